package pgstore

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The store's SQL is in queries/*.sql, one statement per "-- name:"
// section, as a reviewer reads it: the tables qualified by {schema},
// the long column lists of a job as {job_columns}, {exec_columns} and
// {snapshot_columns} (the codec's scan order, jobColumns, execColumns
// and snapColumns), parameters by name (@id), and a part several
// statements share as a "-- fragment:" section, put in where a statement
// names it ({claim_ready}). A statement is compiled
// once per Store: the schema and the column lists are put in, and each
// parameter becomes $k, k its place in the list the store declares for
// the statement (newStatements), which is the order its callers send
// the values in.

//go:embed queries/*.sql
var queryFiles embed.FS

// queryNameLine is a section's first line: a statement's, or a
// fragment's.
var queryNameLine = regexp.MustCompile(`^-- (name|fragment): ([a-z_]+)$`)

// readQueries returns the statements and the fragments of the files in
// queries/ by name, a fragment's name in braces ({claim_ready}).
// Whole-line comments and blank lines are left out of each.
func readQueries() (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(queryFiles, "queries", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := queryFiles.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		name, lines := "", []string(nil)
		flush := func() error {
			if name == "" {
				return nil
			}
			if _, dup := out[name]; dup {
				return fmt.Errorf("%s: statement %s named twice", path, name)
			}
			out[name] = strings.Join(lines, "\n")
			return nil
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), " \t")
			if m := queryNameLine.FindStringSubmatch(line); m != nil {
				if err := flush(); err != nil {
					return err
				}
				name, lines = m[2], nil
				if m[1] == "fragment" {
					name = "{" + name + "}"
				}
				continue
			}
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			if name == "" {
				return fmt.Errorf("%s: a statement before the first name", path)
			}
			lines = append(lines, line)
		}
		if err := sc.Err(); err != nil {
			return err
		}
		return flush()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: queries: %w", err)
	}
	return out, nil
}

// queryBook compiles the statements of readQueries for one schema.
type queryBook struct {
	texts     map[string]string
	frags     *strings.Replacer // the fragments, by their placeholders
	fragNames []string
	lists     *strings.Replacer
	known     map[string]bool // the placeholders lists replaces
	used      map[string]bool
	err       error
}

func newQueryBook(schema string) (*queryBook, error) {
	texts, err := readQueries()
	if err != nil {
		return nil, err
	}
	lists := []string{
		"{schema}", pgx.Identifier{schema}.Sanitize(),
		"{job_columns}", oneLine(jobColumns),
		"{exec_columns}", oneLine(execColumns),
		"{snapshot_columns}", oneLine(snapColumns),
		"{j.snapshot_columns}", qualified("j", snapColumns),
	}
	known := map[string]bool{}
	for i := 0; i < len(lists); i += 2 {
		known[lists[i]] = true
	}
	var frags, names []string
	for name, text := range texts {
		if strings.HasPrefix(name, "{") {
			frags, names = append(frags, name, text), append(names, name)
			delete(texts, name)
		}
	}
	return &queryBook{texts: texts, frags: strings.NewReplacer(frags...), fragNames: names, lists: strings.NewReplacer(lists...), known: known, used: map[string]bool{}}, nil
}

// stmt returns the statement name, compiled with the parameters params
// in that order. The book's first error is kept in b.err.
func (b *queryBook) stmt(name string, params ...string) string {
	text, ok := b.texts[name]
	if !ok {
		b.fail(fmt.Errorf("no statement %s", name))
		return ""
	}
	b.used[name] = true
	for _, f := range b.fragNames {
		if strings.Contains(text, f) {
			b.used[f] = true
		}
	}
	text = b.frags.Replace(text)
	for _, p := range placeholder.FindAllString(text, -1) {
		if !b.known[p] {
			b.fail(fmt.Errorf("statement %s: unknown placeholder %s", name, p))
			return ""
		}
	}
	sql, err := compileQuery(b.lists.Replace(text), params)
	if err != nil {
		b.fail(fmt.Errorf("statement %s: %w", name, err))
	}
	return sql
}

func (b *queryBook) fail(err error) {
	if b.err == nil {
		b.err = fmt.Errorf("pgstore: queries: %w", err)
	}
}

// done returns the book's first error, or names the statements and
// fragments of the files that were never compiled.
func (b *queryBook) done() error {
	if b.err != nil {
		return b.err
	}
	var unused []string
	for name := range b.texts {
		if !b.used[name] {
			unused = append(unused, name)
		}
	}
	for _, name := range b.fragNames {
		if !b.used[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return fmt.Errorf("pgstore: queries: statements not used: %s", strings.Join(unused, ", "))
	}
	return nil
}

// placeholder is a {name} of the files, replaced before compileQuery.
var placeholder = regexp.MustCompile(`\{[a-z_.]+\}`)

// compileQuery replaces each parameter @name of sql, outside string
// literals and quoted identifiers, by $k, k the place of name in params
// counted from 1. A parameter not in params, and one of params the
// statement does not use, are errors.
func compileQuery(sql string, params []string) (string, error) {
	place := make(map[string]int, len(params))
	for i, p := range params {
		if _, dup := place[p]; dup {
			return "", fmt.Errorf("parameter %s declared twice", p)
		}
		place[p] = i + 1
	}
	used := make([]bool, len(params))
	var b strings.Builder
	var quote byte
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '@' && i+1 < len(sql) && isNameStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isNamePart(sql[j]) {
				j++
			}
			name := sql[i+1 : j]
			k, ok := place[name]
			if !ok {
				return "", fmt.Errorf("parameter @%s is not declared", name)
			}
			used[k-1] = true
			fmt.Fprintf(&b, "$%d", k)
			i = j - 1
			continue
		}
		b.WriteByte(c)
	}
	if quote != 0 {
		return "", fmt.Errorf("unterminated quote %c", quote)
	}
	for i, u := range used {
		if !u {
			return "", fmt.Errorf("parameter %s is declared but not used", params[i])
		}
	}
	return b.String(), nil
}

func isNameStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' }

func isNamePart(c byte) bool { return isNameStart(c) || '0' <= c && c <= '9' }

// oneLine is a column list on one line.
func oneLine(cols string) string { return strings.Join(columnNames(cols), ", ") }

// qualified returns the column list cols with each column prefixed by
// alias and a dot.
func qualified(alias, cols string) string {
	names := columnNames(cols)
	for i := range names {
		names[i] = alias + "." + names[i]
	}
	return strings.Join(names, ", ")
}
