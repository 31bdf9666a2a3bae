package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckAcceptsTheRepository(t *testing.T) {
	tree := loadRepo(t)
	v, err := tree.Check()
	if err != nil {
		t.Fatalf("the repository's modules are refused:\n%v", err)
	}
	if v == "" {
		t.Fatal("the released modules require none of one another")
	}
	var dirs []string
	for _, m := range tree.Released {
		dirs = append(dirs, m.Dir)
	}
	// Dependency order: the root before everything, pgstore before the
	// command that requires it.
	if dirs[0] != "." || indexOf(dirs, "pgstore") > indexOf(dirs, "cmd/jobstate") {
		t.Errorf("released modules in order %v: want the root first and pgstore before cmd/jobstate", dirs)
	}
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// A copy of the tree, corrupted, is refused with one line naming the file
// and the fault, and a non-zero exit.
func TestCheckRefusesACorruptedCopy(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(t *testing.T, root string)
		lines []string // what each line of the refusal holds, in order
	}{
		{
			name: "replace in pgstore",
			edit: func(t *testing.T, root string) {
				editFile(t, filepath.Join(root, "pgstore", "go.mod"), "\nrequire (", "\nreplace github.com/jobstate/jobstate => ../\n\nrequire (")
			},
			lines: []string{"pgstore/go.mod: replace github.com/jobstate/jobstate => ../: a released module must not replace"},
		},
		{
			name: "requirement removed from cmd/jobstate",
			edit: func(t *testing.T, root string) {
				editFile(t, filepath.Join(root, "cmd", "jobstate", "go.mod"), "\tgithub.com/jobstate/jobstate/pgstore v", "\tgithub.com/jobstate/jobstate/pgstorx v")
			},
			lines: []string{"cmd/jobstate/go.mod: does not require github.com/jobstate/jobstate/pgstore, and the module imports it (cmd/jobstate/"},
		},
		{
			name: "requirement of the root needed through pgstore",
			edit: func(t *testing.T, root string) {
				editFile(t, filepath.Join(root, "cmd", "jobstate", "go.mod"), "\tgithub.com/jobstate/jobstate v", "\tgithub.com/jobstate/jobstatx v")
			},
			// cmd/jobstate imports the root's packages too: the first
			// reason found is the import.
			lines: []string{"cmd/jobstate/go.mod: does not require github.com/jobstate/jobstate, and the module "},
		},
		{
			name: "sibling at another version",
			edit: func(t *testing.T, root string) {
				editFile(t, filepath.Join(root, "otel", "go.mod"), "\tgithub.com/jobstate/jobstate v0.", "\tgithub.com/jobstate/jobstate v0.9")
			},
			lines: []string{"otel/go.mod: requires github.com/jobstate/jobstate v0.9"},
		},
		{
			name: "import of a module that is not released",
			edit: func(t *testing.T, root string) {
				editFile(t, filepath.Join(root, "otel", "telemetry.go"), "\nimport (\n", "\nimport (\n\t_ \"github.com/jobstate/jobstate/examples/internal/x\"\n")
			},
			lines: []string{"otel/telemetry.go: imports github.com/jobstate/jobstate/examples/internal/x, a package of examples, a module that is not released"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copyTree(t)
			c.edit(t, root)
			code, stdout, stderr := runTool(root, "check")
			if code != 1 {
				t.Fatalf("check exited %d, want 1; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(got) != len(c.lines) {
				t.Fatalf("check printed %d line(s), want %d:\n%s", len(got), len(c.lines), stderr)
			}
			for i, want := range c.lines {
				if !strings.HasPrefix(got[i], want) {
					t.Errorf("line %d: got %q, want it to start with %q", i+1, got[i], want)
				}
			}
			// set and the proxy build from the same tree; tidy and a
			// release refuse it before anything is written.
			tree, err := LoadTree(root)
			if err != nil {
				t.Fatal(err)
			}
			var ce *CheckError
			if _, err := tree.Check(); !errors.As(err, &ce) {
				t.Fatalf("Check: %v, want a *CheckError", err)
			}
			if code, _, stderr := runTool(root, "tidy"); code != 1 || !strings.HasPrefix(stderr, c.lines[0]) {
				t.Errorf("tidy exited %d, want 1 with the check's refusal; stderr:\n%s", code, stderr)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	root := copyTree(t)
	for _, args := range [][]string{
		{},
		{"publish"},
		{"set"},
		{"proxy", "v0.1.0"},
		{"set", "1.0"},
		{"set", "v2.0.0"}, // a major version above 1 needs a /v2 module path
		{"set", "v0.1"},   // not canonical
	} {
		code, stdout, stderr := runTool(root, args...)
		if code != 2 || !strings.Contains(stderr, "usage: release") {
			t.Errorf("release %v: exit %d, want 2 with the usage; stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
