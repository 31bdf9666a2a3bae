// Package doccheck keeps the diagrams in the documentation in step with
// the definitions they are generated from.
package doccheck

import (
	"os"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
)

// Diagram checks that the first ```mermaid block of the Markdown file at
// path is def.Mermaid(), and fails the test naming the command that
// refreshes it when it is stale. With update set it rewrites the block
// instead.
func Diagram(t testing.TB, path string, def *jobstate.Definition, update bool) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const open, fence = "```mermaid\n", "\n```"
	start := strings.Index(string(doc), open)
	if start < 0 {
		t.Fatalf("%s: no ```mermaid block", path)
	}
	start += len(open)
	end := strings.Index(string(doc[start-1:]), fence)
	if end < 0 {
		t.Fatalf("%s: the ```mermaid block is not closed", path)
	}
	end += start // the body ends with its last newline
	want := def.Mermaid()
	if update {
		next := string(doc[:start]) + want + string(doc[end:])
		if err := os.WriteFile(path, []byte(next), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := string(doc[start:end]); got != want {
		t.Errorf("%s: the diagram is stale; run the test with -update to regenerate it.\nwant:\n%s\ngot:\n%s", path, want, got)
	}
}
