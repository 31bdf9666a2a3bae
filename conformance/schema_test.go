package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
)

// schemaBase is the $id prefix of the schemas in schema/: each schema's
// $id is schemaBase followed by its file name, so that the vector schema's
// relative reference "definition.schema.json" names the definition schema.
const schemaBase = "https://raw.githubusercontent.com/jobstate/jobstate/main/conformance/schema/"

// The schema files.
const (
	definitionSchemaFile = "definition.schema.json"
	vectorSchemaFile     = "vector.schema.json"
)

// compiledSchemas holds the compiled schemas and their documents, compiled once for
// edits the tests of this file.
type compiledSchemas struct {
	def, vec       *jsonschema.Schema
	defDoc, vecDoc map[string]any
}

var (
	schemasOnce sync.Once
	schemasVal  *compiledSchemas
	schemasErr  error
)

// loadSchemas compiles the two schemas of schema/ without any network
// access: both are registered under their $id first.
func loadSchemas(t *testing.T) *compiledSchemas {
	t.Helper()
	schemasOnce.Do(func() { schemasVal, schemasErr = compileSchemas() })
	if schemasErr != nil {
		t.Fatal(schemasErr)
	}
	return schemasVal
}

func compileSchemas() (*compiledSchemas, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	docs := make(map[string]map[string]any)
	for _, name := range []string{definitionSchemaFile, vectorSchemaFile} {
		data, err := os.ReadFile(filepath.Join("schema", name))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("schema/%s: %v", name, err)
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema/%s: not a JSON object", name)
		}
		if err := c.AddResource(schemaBase+name, doc); err != nil {
			return nil, fmt.Errorf("schema/%s: %v", name, err)
		}
		docs[name] = obj
	}
	s := &compiledSchemas{defDoc: docs[definitionSchemaFile], vecDoc: docs[vectorSchemaFile]}
	var err error
	if s.def, err = c.Compile(schemaBase + definitionSchemaFile); err != nil {
		return nil, err
	}
	if s.vec, err = c.Compile(schemaBase + vectorSchemaFile); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeInstance decodes data as the validator wants it (numbers as
// json.Number).
func decodeInstance(data []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

// TestSchemaFiles checks the schema documents themselves: draft 2020-12,
// the $id each is registered under, a title and a description, and a
// description on every property.
func TestSchemaFiles(t *testing.T) {
	s := loadSchemas(t)
	for name, doc := range map[string]map[string]any{definitionSchemaFile: s.defDoc, vectorSchemaFile: s.vecDoc} {
		if got := doc["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %v", name, got)
		}
		if got := doc["$id"]; got != schemaBase+name {
			t.Errorf("%s: $id %v, want %s", name, got, schemaBase+name)
		}
		for _, k := range []string{"title", "description"} {
			if v, _ := doc[k].(string); strings.TrimSpace(v) == "" {
				t.Errorf("%s: no %s", name, k)
			}
		}
		walkProperties(doc, "", func(path string, prop map[string]any) {
			if d, _ := prop["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("%s: property %s has no description", name, path)
			}
		})
	}
}

// walkProperties calls fn for every property schema under a "properties"
// keyword anywhere in node, except those of conditions (if, then, else,
// not), which only restate properties declared elsewhere.
func walkProperties(node any, path string, fn func(path string, prop map[string]any)) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			switch k {
			case "if", "then", "else", "not", "contains":
				continue
			case "properties":
				props, _ := v.(map[string]any)
				for name, p := range props {
					if pm, ok := p.(map[string]any); ok {
						fn(path+"."+name, pm)
						walkProperties(pm, path+"."+name, fn)
					}
				}
			default:
				walkProperties(v, path+"/"+k, fn)
			}
		}
	case []any:
		for i, v := range n {
			walkProperties(v, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// TestSchemaVectors validates every file of vectors/ against the vector
// schema, which applies the definition schema to every definition that
// must load. For the definitions that must not load it checks that the
// definition schema rejects every one refused for a problem of the JSON
// that the schema covers (§5.4 of docs/conformance.md).
func TestSchemaVectors(t *testing.T) {
	s := loadSchemas(t)
	paths, err := filepath.Glob(filepath.Join("vectors", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no vectors")
	}
	loadable, invalid, caught := 0, 0, 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := decodeInstance(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := s.vec.Validate(inst); err != nil {
			t.Errorf("%s: not valid against %s:\n%v", p, vectorSchemaFile, err)
			continue
		}
		var v struct {
			Definition json.RawMessage `json:"definition"`
			Expect     *LoadExpect     `json:"expect"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		rejected := checkDefinitionAgreement(t, s, filepath.Base(p), v.Definition)
		if v.Expect == nil || v.Expect.Error == "" {
			loadable++
			continue
		}
		invalid++
		if rejected {
			caught++
			t.Logf("%s: must not load; %s rejects it", p, definitionSchemaFile)
		} else {
			t.Logf("%s: must not load; %s accepts it (problems of §5.5 or registry names only)", p, definitionSchemaFile)
		}
	}
	t.Logf("%d vectors: %d definitions that load, %d that must not (%d of them rejected by %s)",
		len(paths), loadable, invalid, caught, definitionSchemaFile)
}

// schemaCovered lists the problems of ParseSpec (docs/conformance.md
// §5.4) that the definition schema is meant to reject on its own. It does
// not cover unknown registry names (the schema knows no registry),
// integers written with a fraction or an exponent ("2.0"), nor durations
// of the right form that overflow.
var schemaCovered = []*regexp.Regexp{
	regexp.MustCompile(`^invalid JSON`),
	regexp.MustCompile(`^a definition is a JSON object, not `),
	regexp.MustCompile(`: unknown field "`),
	regexp.MustCompile(`: want (a string|an array|an object|an integer|a number|true or false), not `),
	regexp.MustCompile(`: unknown kind "`),
	regexp.MustCompile(`: \S+ is out of range$`),
}

// schemaDurationForm is the pattern of a Go duration in the definition schema,
// used to tell a malformed duration (which the schema rejects) from an
// overflowing one (which it does not).
var schemaDurationForm = regexp.MustCompile(`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`)

var schemaInvalidDuration = regexp.MustCompile(`: invalid duration "(.*)" \(want a Go duration`)

// checkDefinitionAgreement compares the definition schema with
// jobstate.ParseDefinition (under the conformance registry) on one
// document: a definition that loads must be valid, and one that ParseSpec
// refuses for a problem the schema covers must be invalid. It reports
// whether the schema rejected the document.
func checkDefinitionAgreement(t *testing.T, s *compiledSchemas, label string, data []byte) bool {
	t.Helper()
	inst, decErr := decodeInstance(data)
	rejected := decErr != nil
	var verr error
	if !rejected {
		verr = s.def.Validate(inst)
		rejected = verr != nil
	}
	spec, err := jobstate.ParseSpec(data, NewRegistry())
	if err == nil {
		if _, err := jobstate.NewDefinition(spec); err == nil {
			if rejected {
				t.Errorf("%s: the definition loads, but %s rejects it:\n%v", label, definitionSchemaFile, verr)
			}
			return rejected
		}
		return rejected // a problem of §5.5: the schema may or may not see it
	}
	var de *jobstate.DefinitionError
	if !errors.As(err, &de) {
		t.Errorf("%s: ParseSpec: %v is no *DefinitionError", label, err)
		return rejected
	}
	for _, prob := range de.Problems {
		covered := false
		for _, re := range schemaCovered {
			if re.MatchString(prob) {
				covered = true
				break
			}
		}
		if m := schemaInvalidDuration.FindStringSubmatch(prob); m != nil {
			text, uerr := strconv.Unquote(`"` + m[1] + `"`)
			covered = uerr != nil || !schemaDurationForm.MatchString(text)
		}
		if covered && !rejected {
			t.Errorf("%s: ParseSpec refuses it (%s), but %s accepts it", label, prob, definitionSchemaFile)
		}
	}
	return rejected
}

// TestSchemaFuzzCorpus runs the agreement of checkDefinitionAgreement on
// the inputs kept for FuzzParseSpec (testdata/fuzz/FuzzParseSpec at the
// module root), a set of odd and malformed definitions.
func TestSchemaFuzzCorpus(t *testing.T) {
	s := loadSchemas(t)
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "fuzz", "FuzzParseSpec", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data, ok := fuzzInput(raw)
		if !ok {
			t.Logf("%s: not a one-argument []byte fuzz input; skipped", p)
			continue
		}
		checkDefinitionAgreement(t, s, p, data)
	}
	t.Logf("%d fuzz inputs", len(paths))
}

// fuzzInput decodes a file of Go's fuzzing corpus format holding one
// []byte argument.
func fuzzInput(raw []byte) ([]byte, bool) {
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, false
	}
	arg := lines[1]
	if !strings.HasPrefix(arg, "[]byte(") || !strings.HasSuffix(arg, ")") {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
	if err != nil {
		return nil, false
	}
	return []byte(s), true
}

// TestSchemaExampleDefinitions validates the machines of internal/machines
// (the five lifecycles' literal definitions, bound to their Plain hooks,
// and the generic machines) as MarshalSpec writes them and as
// Definition.MarshalJSON writes them.
func TestSchemaExampleDefinitions(t *testing.T) {
	s := loadSchemas(t)
	var specs []jobstate.Spec
	for _, l := range machines.Lifecycles() {
		specs = append(specs, l.Spec())
	}
	specs = append(specs, machines.Generic()...)
	for _, spec := range specs {
		data, err := jobstate.MarshalSpec(spec)
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		validateDefinition(t, s, spec.Name+" (MarshalSpec)", data)
		d, err := jobstate.NewDefinition(spec)
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		data, err = json.Marshal(d)
		if err != nil {
			t.Errorf("%s: %v", spec.Name, err)
			continue
		}
		validateDefinition(t, s, spec.Name+" (Definition.MarshalJSON)", data)
	}
}

// validateDefinition checks that one definition is valid against the
// definition schema.
func validateDefinition(t *testing.T, s *compiledSchemas, label string, data []byte) {
	t.Helper()
	inst, err := decodeInstance(data)
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return
	}
	if err := s.def.Validate(inst); err != nil {
		t.Errorf("%s: not valid against %s:\n%v\n%s", label, definitionSchemaFile, err, data)
	}
}

// TestSchemaDocs checks the definition schema against docs/conformance.md
// §5: the fields of the table of §5.1 are exactly the properties the
// schema declares, and the example of §5 uses no other key. (The example
// shows the form, not a definition that loads: it declares no terminal
// state, so the schema rejects it as a whole.)
func TestSchemaDocs(t *testing.T) {
	s := loadSchemas(t)
	data, err := os.ReadFile(filepath.Join("..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, "\n## 5.")
	if i < 0 {
		t.Fatal("docs/conformance.md has no section 5")
	}
	sec := doc[i+1:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	declared := schemaPaths(s.defDoc, s.defDoc, "")

	// The table of §5.1: rows "| `path` | type | default | meaning |".
	row := regexp.MustCompile("(?m)^\\| `([a-z_.\\[\\]]+)` \\|")
	table := make(map[string]bool)
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		path := strings.TrimSuffix(m[1], "[]")
		for {
			table[path] = true
			k := strings.LastIndex(path, ".")
			if k < 0 {
				break
			}
			path = strings.TrimSuffix(path[:k], "[]")
		}
	}
	if len(table) == 0 {
		t.Fatal("docs/conformance.md §5.1: no field table")
	}
	if got := sortedSet(table); !reflect.DeepEqual(got, declared) {
		t.Errorf("docs/conformance.md §5.1 lists %v\nthe schema declares %v", got, declared)
	}

	// The example of §5.
	j := strings.Index(sec, "```json\n")
	if j < 0 {
		t.Log("docs/conformance.md §5: no JSON example")
		return
	}
	ex := sec[j+len("```json\n"):]
	ex = ex[:strings.Index(ex, "```")]
	var v any
	if err := json.Unmarshal([]byte(ex), &v); err != nil {
		t.Fatalf("docs/conformance.md §5 example: %v", err)
	}
	known := make(map[string]bool)
	for _, p := range declared {
		known[p] = true
	}
	for _, p := range docPaths(v, "") {
		if !known[p] {
			t.Errorf("docs/conformance.md §5 example: key %s is not in %s", p, definitionSchemaFile)
		}
	}
}

// TestSchemaMatchesGo checks that the schemas name exactly what the Go code
// reads and writes: the keys of a definition in which every field is set,
// the JSON keys of Vector, LoadExpect, Step, Expect and Report, the
// operations (Ops), error codes, kinds, outcomes, lifecycle events and
// execution statuses.
func TestSchemaMatchesGo(t *testing.T) {
	s := loadSchemas(t)

	// Definition keys: a definition with every field set, as MarshalSpec
	// writes it, has exactly the keys of the schema.
	reg := NewRegistry()
	full := jobstate.Spec{
		Name:    "full",
		Initial: "A",
		States: []jobstate.StateSpec{
			{Name: "A", Kind: jobstate.KindReady, Outcome: "x", Description: "d"},
		},
		Rules: []jobstate.Rule{{
			From: []jobstate.State{"A"}, Event: "e", To: "A", Description: "d",
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Effect: reg.Effects["count"], EffectName: "count",
		}},
		Policy: jobstate.Policy{
			LeaseTTL: time.Second, MaxExecutions: 2, MaxPerKey: 1,
			Retry: jobstate.RetryPolicy{MaxRetries: 1, Backoff: jobstate.Backoff{
				Kind: jobstate.BackoffExponential, Initial: time.Second, Factor: 3, Max: time.Minute, Jitter: jobstate.JitterFull,
			}},
			Classify: reg.Classifiers["http"], ClassifyName: "http",
			RequireStart: true, FailOnLeaseLoss: true, LazyExpiry: true, DerivedState: true,
			Idempotency: jobstate.IdempotencyPolicy{Retention: time.Hour, ReleaseIn: []jobstate.State{"A"}},
			RedriveFrom: []jobstate.State{"A"},
		},
		Create: jobstate.CreateSpec{
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Effect: reg.Effects["count"], EffectName: "count",
		},
		Effects: []jobstate.EffectSpec{{
			Name: "count", In: []jobstate.State{"A"},
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Run: reg.Effects["count"], RunName: "count",
		}},
	}
	data, err := jobstate.MarshalSpec(full)
	if err != nil {
		t.Fatal(err)
	}
	var written any
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	if _, err := jobstate.ParseSpec(data, reg); err != nil {
		t.Fatalf("ParseSpec of MarshalSpec's output: %v", err)
	}
	gotKeys := docPaths(written, "")
	wantKeys := schemaPaths(s.defDoc, s.defDoc, "")
	if !reflect.DeepEqual(gotKeys, wantKeys) {
		t.Errorf("definition keys:\n MarshalSpec writes %v\n the schema declares %v", gotKeys, wantKeys)
	}

	// Vector keys: the JSON names of the Go types.
	defs := s.vecDoc["$defs"].(map[string]any)
	for _, c := range []struct {
		name string
		node any
		typ  reflect.Type
	}{
		{"vector", s.vecDoc, reflect.TypeOf(Vector{})},
		{"loadExpect", defs["loadExpect"], reflect.TypeOf(LoadExpect{})},
		{"step", defs["step"], reflect.TypeOf(Step{})},
		{"expect", defs["expect"], reflect.TypeOf(Expect{})},
		{"report", defs["report"], reflect.TypeOf(Report{})},
		{"page", defs["page"], reflect.TypeOf(Page{})},
	} {
		props := c.node.(map[string]any)["properties"].(map[string]any)
		if got, want := objectKeys(props), jsonFieldNames(c.typ); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the schema declares %v, %s has %v", c.name, got, c.typ, want)
		}
	}

	enum := func(doc map[string]any, path ...string) []string {
		t.Helper()
		var node any = doc
		for _, p := range path {
			m, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("no %s in the schema", strings.Join(path, "/"))
			}
			node = m[p]
		}
		list, ok := node.(map[string]any)["enum"].([]any)
		if !ok {
			t.Fatalf("no enum at %s", strings.Join(path, "/"))
		}
		var out []string
		for _, v := range list {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		sort.Strings(out)
		return out
	}
	sorted := func(list []string) []string {
		out := append([]string(nil), list...)
		sort.Strings(out)
		return out
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, sorted(want)) {
			t.Errorf("%s: the schema has %v, the Go code %v", what, got, sorted(want))
		}
	}

	same("ops", enum(s.vecDoc, "$defs", "step", "properties", "op"), Ops)

	codes := []string{"", "unknown"}
	for _, e := range []error{
		jobstate.ErrIncomplete, jobstate.ErrOutcomeUnknown, jobstate.ErrUnavailable, jobstate.ErrCancelled, jobstate.ErrLeaseLost, jobstate.ErrAlreadyCommitted,
		jobstate.ErrEffectApplied, jobstate.ErrKeyConflict, jobstate.ErrUnknownEffect, jobstate.ErrKeyLimit, jobstate.ErrNotClaimable,
		jobstate.ErrGuardRefused, jobstate.ErrTerminal, jobstate.ErrInvalidTransition, jobstate.ErrNoJob,
		jobstate.ErrNotFound, jobstate.ErrUnknownMachine, jobstate.ErrInvalidDefinition,
		jobstate.ErrVersionConflict, jobstate.ErrDuplicateJob, jobstate.ErrUnsupported, jobstate.ErrInvalidArgument,
	} {
		codes = append(codes, jobstate.Code(e))
	}
	same("error codes", enum(s.vecDoc, "$defs", "expect", "properties", "error"), codes)
	same("load error codes", enum(s.vecDoc, "$defs", "loadExpect", "properties", "error"), []string{"", jobstate.Code(jobstate.ErrInvalidDefinition)})

	var kinds []string
	for k := jobstate.KindInitial; k.Valid(); k++ {
		kinds = append(kinds, k.String())
	}
	same("kinds (definition)", enum(s.defDoc, "$defs", "kind"), kinds)
	same("kinds (expect)", enum(s.vecDoc, "$defs", "expect", "properties", "kind"), kinds)

	var outcomes []string
	for _, o := range []jobstate.Outcome{
		jobstate.OutcomeSucceeded, jobstate.OutcomeFailed, jobstate.OutcomeCancelled,
		jobstate.OutcomeExpired, jobstate.OutcomeRejected, jobstate.OutcomeDeadLettered,
	} {
		if !o.Valid() {
			t.Errorf("outcome %q is not valid", o)
		}
		outcomes = append(outcomes, string(o))
	}
	same("outcomes (definition)", enum(s.defDoc, "$defs", "outcome"), outcomes)
	same("outcomes (expect)", enum(s.vecDoc, "$defs", "expect", "properties", "outcome"), append([]string{""}, outcomes...))

	var lifecycle []string
	for _, e := range []jobstate.Event{
		jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail,
		jobstate.EventExhaust, jobstate.EventRequeue, jobstate.EventAbandon, jobstate.EventExpire,
		jobstate.EventCancel,
	} {
		if jobstate.IsLifecycle(e) {
			lifecycle = append(lifecycle, string(e))
		}
	}
	same("lifecycle events", enum(s.defDoc, "$defs", "lifecycleEvent"), lifecycle)

	same("backoff kinds", enum(s.defDoc, "$defs", "backoff", "properties", "kind"),
		[]string{string(jobstate.BackoffNone), string(jobstate.BackoffFixed), string(jobstate.BackoffExponential)})
	same("jitters", enum(s.defDoc, "$defs", "backoff", "properties", "jitter"),
		[]string{string(jobstate.JitterNone), string(jobstate.JitterFull), string(jobstate.JitterEqual)})
	same("error classes", enum(s.vecDoc, "$defs", "expect", "properties", "error_class"),
		[]string{string(jobstate.ClassNone), string(jobstate.ClassRetryable), string(jobstate.ClassPermanent)})

	statuses := enum(s.vecDoc, "$defs", "expect", "properties", "executions", "items")
	same("execution statuses", statuses, []string{
		string(jobstate.ExecLeased), string(jobstate.ExecInProgress), string(jobstate.ExecCommitted),
		string(jobstate.ExecDone), string(jobstate.ExecAborted),
	})
}

// docPaths lists the object keys of a decoded JSON value as paths
// ("policy.retry.backoff.kind", "states[].name"), sorted.
func docPaths(v any, prefix string) []string {
	set := make(map[string]bool)
	var walk func(v any, prefix string)
	walk = func(v any, prefix string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := joinKey(prefix, k)
				set[p] = true
				walk(e, p)
			}
		case []any:
			for _, e := range x {
				walk(e, prefix+"[]")
			}
		}
	}
	walk(v, prefix)
	return sortedSet(set)
}

// schemaPaths lists the properties a schema declares, as docPaths names
// them, following local references ("#/$defs/...") and ignoring
// conditions.
func schemaPaths(root map[string]any, node any, prefix string) []string {
	set := make(map[string]bool)
	var walk func(node any, prefix string, depth int)
	walk = func(node any, prefix string, depth int) {
		m, ok := node.(map[string]any)
		if !ok || depth > 20 {
			return
		}
		if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#/$defs/") {
			defs, _ := root["$defs"].(map[string]any)
			walk(defs[strings.TrimPrefix(ref, "#/$defs/")], prefix, depth+1)
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				path := joinKey(prefix, k)
				set[path] = true
				walk(p, path, depth+1)
			}
		}
		if items, ok := m["items"]; ok {
			walk(items, prefix+"[]", depth+1)
		}
	}
	walk(node, prefix, 0)
	return sortedSet(set)
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func objectKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFieldNames lists the JSON names of a struct type's fields, sorted.
func jsonFieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// schemaBaseDefinition is a small definition that loads with the
// conformance registry; the cases of TestSchemaCases change it.
const schemaBaseDefinition = `{
  "name": "m",
  "initial": "Q",
  "states": [
    {"name": "Q", "kind": "ready"},
    {"name": "R", "kind": "active"},
    {"name": "D", "kind": "terminal", "outcome": "succeeded"},
    {"name": "F", "kind": "terminal", "outcome": "failed"}
  ],
  "rules": [
    {"from": ["Q"], "event": "claim", "to": "R"},
    {"from": ["R"], "event": "succeed", "to": "D"},
    {"from": ["R"], "event": "fail", "to": "F"}
  ]
}`

// schemaBaseVector is a small vector that passes on memstore; the cases of
// TestSchemaCases change it.
const schemaBaseVector = `{
  "name": "schema_base",
  "description": "a job is created, claimed, succeeds; its history",
  "covers": ["4.2"],
  "definition": ` + schemaBaseDefinition + `,
  "start": "2026-01-01T00:00:00Z",
  "steps": [
    {"op": "create", "as": "j", "expect": {"state": "Q", "version": 1, "existing": false}},
    {"op": "claim", "worker": "w", "as": "a", "expect": {"job": "j", "token": 1, "kind": "active"}},
    {"op": "succeed", "lease": "a", "result": "ok", "expect": {"state": "D", "outcome": "succeeded"}},
    {"op": "clock", "advance": "1s"},
    {"op": "sweep", "expect": {"report": {"jobs": 0}}},
    {"op": "history", "job": "j", "note": "the whole history",
     "expect": {"history": [["", "create", "Q"], ["Q", "claim", "R"], ["R", "succeed", "D"]], "executions": ["DONE"]}}
  ]
}`

// schemaBadVector is a vector whose definition must not load.
const schemaBadVector = `{
  "name": "def_schema_base",
  "description": "a definition that is no object",
  "covers": ["2.7"],
  "definition": [1],
  "start": "2026-01-01T00:00:00Z",
  "expect": {"error": "invalid_definition", "problems": ["a definition is a JSON object, not an array"], "complete": true},
  "steps": []
}`

// editDoc decodes base, applies f to it and encodes it again.
func editDoc(t *testing.T, base string, f func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(base))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if f != nil {
		f(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putAt sets the value at path in node (removes it, with remove), where
// path names object keys and array indices (decimal; an index equal to the
// array's length appends), and returns the changed node.
func putAt(node any, path []string, v any, remove bool) any {
	if len(path) == 0 {
		return v
	}
	switch x := node.(type) {
	case map[string]any:
		if len(path) == 1 && remove {
			delete(x, path[0])
			return x
		}
		x[path[0]] = putAt(x[path[0]], path[1:], v, remove)
		return x
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i > len(x) {
			panic(fmt.Sprintf("bad index %q", path[0]))
		}
		if len(path) == 1 && remove {
			return append(x[:i:i], x[i+1:]...)
		}
		if i == len(x) {
			x = append(x, nil)
		}
		x[i] = putAt(x[i], path[1:], v, remove)
		return x
	}
	panic(fmt.Sprintf("no object or array at %q", path[0]))
}

// setAt returns an edit setting the value at path to the JSON value v.
func setAt(v string, path ...string) func(map[string]any) {
	var x any
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		panic(err)
	}
	return func(m map[string]any) { putAt(m, path, x, false) }
}

// delAt returns an edit removing the value at path.
func delAt(path ...string) func(map[string]any) {
	return func(m map[string]any) { putAt(m, path, nil, true) }
}

// edits applies several edits in order.
func edits(fs ...func(map[string]any)) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range fs {
			f(m)
		}
	}
}

// TestSchemaCases checks the schemas on documents made to be valid or
// invalid: each must be accepted or rejected as stated. Every definition
// case is also loaded with jobstate.ParseDefinition, which must agree.
func TestSchemaCases(t *testing.T) {
	s := loadSchemas(t)

	t.Run("base vector passes", func(t *testing.T) {
		v, err := ParseVector([]byte(schemaBaseVector))
		if err != nil {
			t.Fatal(err)
		}
		RunVector(t, v, func(t *testing.T) jobstate.Store { return memstore.New() })
	})

	retryRule := setAt(`[{"from": ["Q"], "event": "claim", "to": "R"}, {"from": ["R"], "event": "succeed", "to": "D"},
		{"from": ["R"], "event": "fail", "to": "F"}, {"from": ["R"], "event": "retry", "to": "Q"}]`, "rules")
	defCases := []struct {
		name  string
		edit  func(map[string]any)
		valid bool
	}{
		{"base", nil, true},
		{"nulls for absent values", edits(setAt(`null`, "policy"), setAt(`null`, "create"), setAt(`null`, "effects"),
			setAt(`null`, "states", "0", "description"), setAt(`null`, "rules", "0", "guard")), true},
		{"empty policy members", setAt(`{"retry": null, "idempotency": {}, "lease_ttl": "", "classify": ""}`, "policy"), true},
		{"durations", setAt(`{"lease_ttl": "1h2m3.5s", "idempotency": {"retention": "-0s"}}`, "policy"), true},
		{"fractional durations", setAt(`{"lease_ttl": ".5s", "idempotency": {"retention": "1.5µs"}}`, "policy"), true},
		{"signed and zero durations", setAt(`{"lease_ttl": "+2s", "idempotency": {"retention": "0"}}`, "policy"), true},
		{"fixed backoff", edits(retryRule, setAt(`{"retry": {"max_retries": -1, "backoff": {"kind": "fixed", "initial": "1s", "factor": 0}}}`, "policy")), true},
		{"exponential backoff", edits(retryRule, setAt(`{"retry": {"max_retries": 2, "backoff": {"kind": "exponential", "initial": "10ms", "factor": 1.5, "max": "1m", "jitter": "equal"}}}`, "policy")), true},
		{"initial state by kind", edits(delAt("initial"), setAt(`{"name": "I", "kind": "initial"}`, "states", "4"),
			setAt(`{"from": ["I"], "event": "submit", "to": "Q"}`, "rules", "3")), true},
		{"registry names", edits(setAt(`"owner_only"`, "rules", "2", "guard"), setAt(`{"guard": "owner_only", "effect": "count"}`, "create"),
			setAt(`[{"name": "count", "in": ["D"]}]`, "effects"), setAt(`{"classify": "http"}`, "policy")), true},
		{"derived state", setAt(`{"derived_state": true, "max_executions": 1}`, "policy"), true},

		{"unknown field", setAt(`"m"`, "nmae"), false},
		{"key in another case", edits(delAt("name"), setAt(`"m"`, "Name")), false},
		{"unknown policy field", setAt(`{"leaseTTL": "1s"}`, "policy"), false},
		{"unknown state field", setAt(`"x"`, "states", "0", "label"), false},
		{"name of the wrong type", setAt(`5`, "name"), false},
		{"blank name", setAt(`"  "`, "name"), false},
		{"integer as a string", setAt(`{"max_executions": "1"}`, "policy"), false},
		{"from as a string", setAt(`"Q"`, "rules", "0", "from"), false},
		{"boolean as a string", setAt(`{"require_start": "yes"}`, "policy"), false},
		{"bad duration", setAt(`{"lease_ttl": "5 s"}`, "policy"), false},
		{"duration in days", setAt(`{"lease_ttl": "1d"}`, "policy"), false},
		{"duration without unit", setAt(`{"idempotency": {"retention": "10"}}`, "policy"), false},
		{"negative duration", setAt(`{"lease_ttl": "-1s"}`, "policy"), false},
		{"unknown kind", setAt(`"running"`, "states", "1", "kind"), false},
		{"no kind", delAt("states", "1", "kind"), false},
		{"terminal without outcome", delAt("states", "2", "outcome"), false},
		{"unknown outcome", setAt(`"done"`, "states", "2", "outcome"), false},
		{"outcome on a ready state", setAt(`"failed"`, "states", "0", "outcome"), false},
		{"factor below 1", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "exponential", "initial": "1s", "factor": 0.5}}}`, "policy")), false},
		{"negative factor", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "exponential", "initial": "1s", "factor": -1}}}`, "policy")), false},
		{"backoff without initial", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "fixed"}}}`, "policy")), false},
		{"backoff with a zero initial", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "fixed", "initial": "0s"}}}`, "policy")), false},
		{"unknown backoff kind", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "linear", "initial": "1s"}}}`, "policy")), false},
		{"unknown jitter", setAt(`{"retry": {"backoff": {"jitter": "half"}}}`, "policy"), false},
		{"max_retries below -1", edits(retryRule, setAt(`{"retry": {"max_retries": -2}}`, "policy")), false},
		{"negative max_executions", setAt(`{"max_executions": -1}`, "policy"), false},
		{"fractional max_executions", setAt(`{"max_executions": 1.5}`, "policy"), false},
		{"guarded succeed rule", setAt(`"owner_only"`, "rules", "1", "guard"), false},
		{"rule with no from state", setAt(`[]`, "rules", "0", "from"), false},
		{"from state twice", setAt(`["Q", "Q"]`, "rules", "0", "from"), false},
		{"rule with an empty event", setAt(`""`, "rules", "0", "event"), false},
		{"no terminal state", setAt(`[{"name": "Q", "kind": "ready"}, {"name": "R", "kind": "active"}]`, "states"), false},
		{"no initial state", delAt("initial"), false},
		{"two initial states", edits(delAt("initial"), setAt(`{"name": "I", "kind": "initial"}`, "states", "4"),
			setAt(`{"name": "J", "kind": "initial"}`, "states", "5")), false},
		{"no states", setAt(`[]`, "states"), false},
		{"no rules", delAt("rules"), false},
		{"null state", setAt(`null`, "states", "0"), false},
		{"derived state with a user event", edits(setAt(`{"derived_state": true}`, "policy"),
			setAt(`{"from": ["Q"], "event": "cancel", "to": "F"}`, "rules", "3")), false},
		{"derived state with several executions", setAt(`{"derived_state": true, "max_executions": 2}`, "policy"), false},
		{"effect named redrive", setAt(`[{"name": "redrive", "run": "count"}]`, "effects"), false},
		{"effect without a name", setAt(`[{"run": "count"}]`, "effects"), false},
		{"empty state in a list", setAt(`{"idempotency": {"release_in": [""]}}`, "policy"), false},
	}
	checkDef := func(t *testing.T, data []byte, valid bool) {
		t.Helper()
		inst, err := decodeInstance(data)
		if err != nil {
			if valid {
				t.Errorf("not JSON: %v", err)
			}
		} else if verr := s.def.Validate(inst); valid && verr != nil {
			t.Errorf("rejected:\n%v\n%s", verr, data)
		} else if !valid && verr == nil {
			t.Errorf("accepted:\n%s", data)
		}
		_, lerr := jobstate.ParseDefinition(data, NewRegistry())
		if loads := lerr == nil; loads != valid {
			t.Errorf("ParseDefinition disagrees with the case (loads: %v, %v):\n%s", loads, lerr, data)
		}
	}
	for _, c := range defCases {
		t.Run("definition/"+c.name, func(t *testing.T) {
			checkDef(t, editDoc(t, schemaBaseDefinition, c.edit), c.valid)
		})
	}
	for name, doc := range map[string]string{
		"not an object": "[" + schemaBaseDefinition + "]",
		"null":          "null",
		"not JSON":      `{"name": "m",`,
	} {
		t.Run("definition/"+name, func(t *testing.T) { checkDef(t, []byte(doc), false) })
	}

	vecCases := []struct {
		name  string
		base  string
		edit  func(map[string]any)
		valid bool
	}{
		{"base", schemaBaseVector, nil, true},
		{"definition that must not load", schemaBadVector, nil, true},
		{"definition that must not load, any JSON", schemaBadVector, setAt(`"not a definition"`, "definition"), true},
		{"definition that must not load, semantically wrong", schemaBadVector,
			setAt(`{"name": "m", "states": [{"name": "Q", "kind": "ready"}], "rules": [{"from": ["Q"], "event": "claim", "to": "Q"}]}`, "definition"), true},
		{"empty load error", schemaBaseVector, setAt(`{"error": ""}`, "expect"), true},
		{"clock set", schemaBaseVector, setAt(`{"op": "clock", "set": "2026-01-01T00:00:01.5+01:00"}`, "steps", "3"), true},
		{"literal job id", schemaBaseVector, setAt(`{"op": "get", "job_id": "ffffffff-ffff-7fff-bfff-ffffffffffff", "expect": {"error": "not_found"}}`, "steps", "5"), true},
		{"sweep naming its job", schemaBaseVector, setAt(`{"op": "sweep", "job": "j", "expect": {"state": "D"}}`, "steps", "4"), true},
		{"fail with a class", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "error": "429", "class": "retry_after", "after": "7s", "expect": {"error": "lease_lost"}}`, "steps", "2"), true},
		{"times in expectations", schemaBaseVector, setAt(`{"not_before": "", "started_at": "2026-01-01T00:00:00.000000001Z"}`, "steps", "0", "expect"), true},

		{"unknown op", schemaBaseVector, setAt(`"launch"`, "steps", "3", "op"), false},
		{"no op", schemaBaseVector, delAt("steps", "3", "op"), false},
		{"unknown vector field", schemaBaseVector, setAt(`"x"`, "comment"), false},
		{"unknown step field", schemaBaseVector, setAt(`5`, "steps", "3", "delay_ms"), false},
		{"unknown expectation field", schemaBaseVector, setAt(`"Q"`, "steps", "0", "expect", "status"), false},
		{"argument the op does not read", schemaBaseVector, setAt(`"1s"`, "steps", "1", "delay"), false},
		{"token as a string", schemaBaseVector, setAt(`"1"`, "steps", "1", "expect", "token"), false},
		{"no name", schemaBaseVector, delAt("name"), false},
		{"name with a space", schemaBaseVector, setAt(`"schema base"`, "name"), false},
		{"blank description", schemaBaseVector, setAt(`" "`, "description"), false},
		{"no covers", schemaBaseVector, delAt("covers"), false},
		{"bad section", schemaBaseVector, setAt(`["4.x"]`, "covers"), false},
		{"no steps", schemaBaseVector, delAt("steps"), false},
		{"start not RFC 3339", schemaBaseVector, setAt(`"2026-01-01 00:00:00"`, "start"), false},
		{"start in month 13", schemaBaseVector, setAt(`"2026-13-01T00:00:00Z"`, "start"), false},
		{"empty start", schemaBaseVector, setAt(`""`, "start"), false},
		{"bad duration", schemaBaseVector, setAt(`"1 s"`, "steps", "3", "advance"), false},
		{"bad deadline", schemaBaseVector, setAt(`"tomorrow"`, "steps", "0", "deadline"), false},
		{"bad expected time", schemaBaseVector, setAt(`"2026-01-01"`, "steps", "0", "expect", "deadline"), false},
		{"job and job_id", schemaBaseVector, setAt(`"ffffffff-ffff-7fff-bfff-ffffffffffff"`, "steps", "5", "job_id"), false},
		{"job_id not a UUID", schemaBaseVector, edits(delAt("steps", "5", "job"), setAt(`"42"`, "steps", "5", "job_id")), false},
		{"history without a job", schemaBaseVector, delAt("steps", "5", "job"), false},
		{"lease operation without a lease", schemaBaseVector, delAt("steps", "2", "lease"), false},
		{"clock with advance and set", schemaBaseVector, setAt(`"2026-01-01T00:00:05Z"`, "steps", "3", "set"), false},
		{"clock with neither", schemaBaseVector, delAt("steps", "3", "advance"), false},
		{"clock with a job expectation", schemaBaseVector, setAt(`{"state": "Q"}`, "steps", "3", "expect"), false},
		{"unknown error code", schemaBaseVector, setAt(`{"error": "lease_expired"}`, "steps", "2", "expect"), false},
		{"existing on claim", schemaBaseVector, setAt(`true`, "steps", "1", "expect", "existing"), false},
		{"token on create", schemaBaseVector, setAt(`1`, "steps", "0", "expect", "token"), false},
		{"report on succeed", schemaBaseVector, setAt(`{"jobs": 1}`, "steps", "2", "expect", "report"), false},
		{"unknown report count", schemaBaseVector, setAt(`{"swept": 1}`, "steps", "4", "expect", "report"), false},
		{"sweep without job expecting a state", schemaBaseVector, setAt(`"D"`, "steps", "4", "expect", "state"), false},
		{"class without an error", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "class": "permanent"}`, "steps", "2"), false},
		{"unknown class", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "error": "x", "class": "fatal"}`, "steps", "2"), false},
		{"unknown kind", schemaBaseVector, setAt(`"running"`, "steps", "1", "expect", "kind"), false},
		{"unknown execution status", schemaBaseVector, setAt(`["RUNNING"]`, "steps", "5", "expect", "executions"), false},
		{"history record of two", schemaBaseVector, setAt(`[["", "create"]]`, "steps", "5", "expect", "history"), false},
		{"history not starting with create", schemaBaseVector, setAt(`[["Q", "claim", "R"]]`, "steps", "5", "expect", "history"), false},
		{"negative effect count", schemaBaseVector, setAt(`{"count": -1}`, "steps", "5", "expect", "effect_count"), false},
		{"definition that must load with an unknown field", schemaBaseVector, setAt(`"x"`, "definition", "comment"), false},
		{"definition that must load with a bad duration", schemaBaseVector, setAt(`{"lease_ttl": "30 s"}`, "definition", "policy"), false},
		{"definition that must load, any JSON", schemaBaseVector, setAt(`[1]`, "definition"), false},
		{"definition that must not load, with steps", schemaBadVector, setAt(`[{"op": "sweep"}]`, "steps"), false},
		{"definition that must not load, no problems", schemaBadVector, delAt("expect", "problems"), false},
		{"unknown load error", schemaBadVector, setAt(`"invalid"`, "expect", "error"), false},
		{"problems of a definition that loads", schemaBaseVector, setAt(`{"error": "", "problems": ["x"]}`, "expect"), false},
		{"list", schemaBaseVector, setAt(`{"op": "list", "machine": "m", "states": ["Q"], "kinds": ["ready"], "outcomes": ["failed"], "owner": "o", "key": "k", "created_from": "2026-01-01T00:00:00Z", "created_to": "2026-01-01T00:00:05Z", "updated_from": "", "completed_to": "2026-01-02T00:00:00Z", "order": "updated", "desc": true, "limit": 2, "as": "p", "expect": {"page": {"jobs": ["j"], "states": ["Q"], "next": false}}}`, "steps", "4"), true},
		{"list with a cursor and an empty page", schemaBaseVector, setAt(`{"op": "list", "cursor": "p", "expect": {"page": {"jobs": []}}}`, "steps", "4"), true},
		{"list expecting a job field", schemaBaseVector, setAt(`{"op": "list", "expect": {"state": "Q"}}`, "steps", "4"), false},
		{"list with a lease", schemaBaseVector, setAt(`{"op": "list", "lease": "a"}`, "steps", "4"), false},
		{"list with an unknown kind", schemaBaseVector, setAt(`{"op": "list", "kinds": ["running"]}`, "steps", "4"), false},
		{"page without jobs", schemaBaseVector, setAt(`{"op": "list", "expect": {"page": {"next": true}}}`, "steps", "4"), false},
		{"page on a get", schemaBaseVector, setAt(`{"jobs": []}`, "steps", "5", "expect", "page"), false},
	}
	for _, c := range vecCases {
		t.Run("vector/"+c.name, func(t *testing.T) {
			data := editDoc(t, c.base, c.edit)
			inst, err := decodeInstance(data)
			if err != nil {
				t.Fatal(err)
			}
			err = s.vec.Validate(inst)
			if c.valid && err != nil {
				t.Errorf("rejected:\n%v\n%s", err, data)
			}
			if !c.valid && err == nil {
				t.Errorf("accepted:\n%s", data)
			}
		})
	}
}
