package pgstore

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStatementsCompile: every statement of queries/*.sql is compiled
// and used, with its parameters numbered 1 to n and nothing of the
// files' notation left, whatever the schema's name.
func TestStatementsCompile(t *testing.T) {
	for _, schema := range []string{"jobstate", `odd "name"; drop`, "Upper Case", "{job_columns}@id'"} {
		s, err := newStatements(schema)
		if err != nil {
			t.Fatalf("schema %q: %v", schema, err)
		}
		for name, sql := range map[string]string{
			"get": s.get, "updateJob": s.updateJob, "updateMany": s.updateMany, "insertJob": s.insertJob,
			"claim": s.claim, "claimKeyed": s.claimKeyed, "heads": s.heads, "holders": s.holders, "list": s.list,
		} {
			if strings.ContainsAny(strings.ReplaceAll(sql, schema, ""), "@{}") {
				t.Errorf("schema %q: %s keeps the files' notation: %s", schema, name, sql)
			}
			if !strings.Contains(sql, `"`+strings.ReplaceAll(schema, `"`, `""`)+`".`) {
				t.Errorf("schema %q: %s does not name the schema: %s", schema, name, sql)
			}
		}
		if got := maxParam(s.updateJob); got != len(jobParams)+len(writeParams) {
			t.Errorf("updateJob has %d parameters, want %d", got, len(jobParams)+len(writeParams))
		}
		if got := maxParam(s.updateMany); got != len(jobParams)+len(writeParams)+1 {
			t.Errorf("updateMany has %d parameters, want %d", got, len(jobParams)+len(writeParams)+1)
		}
		if got := maxParam(s.insertJob); got != len(jobParams) {
			t.Errorf("insertJob has %d parameters, want %d", got, len(jobParams))
		}
	}
}

// paramRef is a positional parameter of a compiled statement.
var paramRef = regexp.MustCompile(`\$([0-9]+)`)

// maxParam returns the highest positional parameter of sql.
func maxParam(sql string) int {
	n := 0
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		k, _ := strconv.Atoi(m[1]) // digits only, by the pattern
		n = max(n, k)
	}
	return n
}

// TestCompileQuery: parameters become their places in the declared
// list, wherever they appear and however often; an undeclared parameter,
// an unused one, one declared twice and an unterminated quote are
// errors; an @ in a string literal or a quoted identifier, and an
// operator with @, are text.
func TestCompileQuery(t *testing.T) {
	for _, c := range []struct {
		sql    string
		params []string
		want   string
		err    string
	}{
		{sql: "SELECT @b, @a, @b", params: []string{"a", "b"}, want: "SELECT $2, $1, $2"},
		{sql: "SELECT '@a', \"@a\", @a", params: []string{"a"}, want: "SELECT '@a', \"@a\", $1"},
		{sql: "SELECT @a_1::int[]", params: []string{"a_1"}, want: "SELECT $1::int[]"},
		{sql: "SELECT 1 @> 2, @a", params: []string{"a"}, want: "SELECT 1 @> 2, $1"},
		{sql: "SELECT @a", params: nil, err: "not declared"},
		{sql: "SELECT @a", params: []string{"a", "b"}, err: "not used"},
		{sql: "SELECT @a", params: []string{"a", "a"}, err: "twice"},
		{sql: "SELECT 'a", params: nil, err: "quote"},
	} {
		got, err := compileQuery(c.sql, c.params)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.sql, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %q, %v; want %q", c.sql, got, err, c.want)
		}
	}
}

// TestQueryBookRefuses: a statement the files lack, a placeholder the
// book does not know, and a statement or fragment of the files no field
// uses, are errors of newStatements' book.
func TestQueryBookRefuses(t *testing.T) {
	b, err := newQueryBook("jobstate")
	if err != nil {
		t.Fatal(err)
	}
	b.stmt("no_such_statement")
	if err := b.done(); err == nil || !strings.Contains(err.Error(), "no statement") {
		t.Errorf("a missing statement: %v", err)
	}
	b, _ = newQueryBook("jobstate")
	b.texts["get"] = "SELECT {jobs_columns} FROM {schema}.jobs WHERE id = @id"
	b.stmt("get", "id")
	if err := b.done(); err == nil || !strings.Contains(err.Error(), "unknown placeholder {jobs_columns}") {
		t.Errorf("a misspelt list: %v", err)
	}
	b, _ = newQueryBook("jobstate")
	b.stmt("get", "id")
	if err := b.done(); err == nil || !strings.Contains(err.Error(), "not used") {
		t.Errorf("unused statements: %v", err)
	}
	if _, err := newStatements("jobstate"); err != nil {
		t.Fatal(err)
	}
	b, _ = newQueryBook("jobstate")
	for name := range b.texts {
		b.stmt(name)
	}
	b.err = nil // the parameters were not declared: only the fragments are asked about
	b.fragNames = append(b.fragNames, "{spare}")
	if err := b.done(); err == nil || !strings.Contains(err.Error(), "not used: {spare}") {
		t.Errorf("an unused fragment: %v", err)
	}
}

// TestFragmentsPutIn: a statement naming a fragment gets the fragment's
// text, with the fragment's own placeholders and parameters compiled.
func TestFragmentsPutIn(t *testing.T) {
	s, err := newStatements("jobstate")
	if err != nil {
		t.Fatal(err)
	}
	for name, sql := range map[string]string{"claim": s.claim, "claimKeyed": s.claimKeyed, "claimPlanned": s.claimPlanned} {
		if !regexp.MustCompile(`WITH u AS MATERIALIZED \(\s+SELECT id, machine`).MatchString(sql) {
			t.Errorf("%s lacks the walk of claim_ready: %s", name, sql)
		}
		if !strings.Contains(sql, `FROM "jobstate".jobs`) {
			t.Errorf("%s: the fragment's schema not put in: %s", name, sql)
		}
	}
	if !strings.Contains(s.claim, "k AS MATERIALIZED") || !strings.Contains(s.claimPlanned, "pg_try_advisory_xact_lock") {
		t.Errorf("claim_heads not put in: %s", s.claim)
	}
}
