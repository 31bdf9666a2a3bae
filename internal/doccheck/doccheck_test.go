package doccheck

import (
	"os"
	"path/filepath"
	"testing"

	m "github.com/jobstate/jobstate/internal/machines"
)

func TestDiagramUpdateThenCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	page := "# Page\n\n```mermaid\nstale\n```\n\nAfter.\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	def := m.Queue()
	var stale testing.T
	ft := &fakeT{T: &stale}
	Diagram(ft, path, def, false)
	if !ft.failed {
		t.Fatal("a stale diagram must fail")
	}
	Diagram(t, path, def, true)
	Diagram(t, path, def, false)
	doc, _ := os.ReadFile(path)
	want := "# Page\n\n```mermaid\n" + def.Mermaid() + "```\n\nAfter.\n"
	if string(doc) != want {
		t.Fatalf("rewritten page:\n%s", doc)
	}
}

// fakeT records a failure instead of failing the running test.
type fakeT struct {
	*testing.T
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
func (f *fakeT) Fatal(...any)          { f.failed = true }
