package conformance

import (
	"os"
	"path/filepath"
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
	if len(vs) < 45 {
		t.Errorf("%d vectors, want at least 45", len(vs))
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
	} {
		if !codes[c] {
			t.Errorf("no vector expects error %q", c)
		}
	}
	if invalid == 0 {
		t.Error("no vector with an invalid definition")
	}
}
