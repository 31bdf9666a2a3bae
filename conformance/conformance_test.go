package conformance

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

func TestVectorsOnMemstore(t *testing.T) {
	Run(t, func(t *testing.T) jobstate.Store { return memstore.New() })
}

// TestVectorFiles checks that every file in vectors/ parses as a vector
// (no unknown fields, known ops, name = file name) and that the embedded
// set is the whole directory.
func TestVectorFiles(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("vectors", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no vectors")
	}
	for _, p := range paths {
		if !strings.HasSuffix(p, ".json") {
			t.Errorf("%s: vectors/ holds only .json files", p)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ParseVector(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if want := strings.TrimSuffix(filepath.Base(p), ".json"); v.Name != want {
			t.Errorf("%s: name %q", p, v.Name)
		}
		if strings.TrimSpace(v.Description) == "" {
			t.Errorf("%s: no description", p)
		}
		for i, s := range v.Steps {
			if !knownOp(s.Op) {
				t.Errorf("%s: step %d: unknown op %q", p, i+1, s.Op)
			}
		}
	}
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(paths) {
		t.Errorf("%d vectors embedded, %d files", len(vs), len(paths))
	}
}

// TestCoverage checks that the vectors exercise every operation and every
// error code an operation can return, and that there are enough of them.
func TestCoverage(t *testing.T) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 150 {
		t.Errorf("%d vectors, want at least 150", len(vs))
	}
	ops := make(map[string]bool)
	okOps := make(map[string]bool)
	codes := make(map[string]bool)
	invalid := 0
	for _, v := range vs {
		if v.Expect != nil && v.Expect.Error != "" {
			invalid++
			if len(v.Expect.Problems) == 0 {
				t.Errorf("%s: an invalid definition names no problem fragment", v.Name)
			}
		}
		for _, s := range v.Steps {
			ops[s.Op] = true
			if s.Expect.Error == "" {
				okOps[s.Op] = true
			}
			codes[s.Expect.Error] = true
		}
	}
	for _, op := range Ops {
		if !okOps[op] {
			t.Errorf("no vector has a successful %q", op)
		}
	}
	for _, c := range []string{
		"not_found", "unknown_machine", "invalid_transition", "terminal", "guard_refused",
		"version_conflict", "invalid_argument", "lease_lost", "cancelled", "not_claimable",
		"no_job", "already_committed", "effect_applied", "key_conflict", "unknown_effect",
		"incomplete",
	} {
		if !codes[c] {
			t.Errorf("no vector expects error %q", c)
		}
	}
	if invalid == 0 {
		t.Error("no vector with an invalid definition")
	}
}

var updateCoverage = flag.Bool("update-coverage", false, "rewrite the coverage table of docs/conformance.md")

// notExpressible lists the sections of the specification no vector step
// can pin, with the reason.
var notExpressible = map[string]string{
	"2.6":  "Replay is a pure function of a history; the Go tests check it, and every runner may",
	"4.24": "observers are callbacks of the Go engine, which no step can observe",
	"4.2.1": "CreateMany needs the optional BatchCreator capability, whose outcome on an error " +
		"differs between stores with and without transactions; storetest's CreateBatch tests and " +
		"properties (keyed batches against Create one by one included) check it on every store",
}

// specSections returns the numbered sections of docs/specification.md
// that vectors must cover: chapters 1, 2 and 4 (and their subsections),
// and the error catalogue, "6".
func specSections(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "specification.md"))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`(?m)^#{3,4} ([0-9]+(?:\.[0-9]+)+) `)
	var out []string
	for _, m := range heading.FindAllStringSubmatch(string(data), -1) {
		switch m[1][0] {
		case '1', '2', '4':
			out = append(out, m[1])
		}
	}
	return append(out, "6")
}

// TestSpecSectionsCovered checks that every section of the specification
// a vector can pin is pinned by at least one, that vectors name only
// sections that exist, and that the coverage table of docs/conformance.md
// is the one the vectors give (go test -run SpecSections -update-coverage
// rewrites it).
func TestSpecSectionsCovered(t *testing.T) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	sections := specSections(t)
	known := make(map[string]bool, len(sections))
	for _, s := range sections {
		known[s] = true
	}
	by := make(map[string][]string)
	for _, v := range vs {
		if len(v.Covers) == 0 {
			t.Errorf("%s: covers no section", v.Name)
		}
		for _, c := range v.Covers {
			if !known[c] {
				t.Errorf("%s: covers %q, which is no section of the specification", v.Name, c)
			}
			by[c] = append(by[c], v.Name)
		}
	}
	var table strings.Builder
	table.WriteString("| section | vectors |\n|---|---|\n")
	for _, s := range sections {
		names := by[s]
		sort.Strings(names)
		if why, ok := notExpressible[s]; ok {
			fmt.Fprintf(&table, "| %s | none: %s |\n", s, why)
			continue
		}
		if len(names) == 0 {
			t.Errorf("section %s of the specification has no vector", s)
		}
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		fmt.Fprintf(&table, "| %s | %s |\n", s, strings.Join(names, ", "))
	}
	path := filepath.Join("..", "docs", "conformance.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- coverage:begin -->\n", "<!-- coverage:end -->"
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("%s: no coverage table between %q and %q", path, strings.TrimSpace(begin), end)
	}
	want := table.String()
	if got := string(doc[i+len(begin) : j]); got != want {
		if *updateCoverage {
			next := string(doc[:i+len(begin)]) + want + string(doc[j:])
			if err := os.WriteFile(path, []byte(next), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s: the coverage table is stale; run go test ./conformance -run SpecSections -update-coverage", path)
	}
}
