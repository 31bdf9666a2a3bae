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
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
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
