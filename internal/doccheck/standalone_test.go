package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The documentation must stand alone: a reader has only the repository.
// These tests fail on an absolute path, a link to a file the repository
// does not hold, and the word "seed" for a lifecycle (the lifecycles are
// named by what they are) in README.md, docs/, doc comments and vector
// names.

// root is the repository's top, from this package's directory.
const root = "../.."

var (
	// An absolute file path: a slash-rooted path of two or more parts that
	// is not part of a URL (no scheme or host before it).
	absPath = regexp.MustCompile("(^|[\\s(`'\"=])(/[A-Za-z0-9._-]+){2,}/?")
	// A Markdown link's target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// The word seed, and what follows it.
	seedWord = regexp.MustCompile(`(?i)\bseed(s|'s|\d*)?\b(\s+\w+)?`)
)

// seedAllowed says whether a use of "seed" is the random-number sense
// (a fuzz seed corpus, a generator's seed value), not a lifecycle.
func seedAllowed(match string) bool {
	fields := strings.Fields(strings.ToLower(match))
	if len(fields) == 2 {
		switch fields[1] {
		case "corpus", "corpora", "value", "values", "number", "inputs":
			return true
		}
	}
	return false
}

// markdownFiles returns README.md and every Markdown file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// inCode reports whether line is inside a fenced block, given the state
// so far, and returns the new state.
func fence(line string, in bool) bool {
	if strings.HasPrefix(strings.TrimSpace(line), "```") {
		return !in
	}
	return in
}

func TestDocsHaveNoAbsolutePaths(t *testing.T) {
	for _, f := range markdownFiles(t) {
		lines := readLines(t, f)
		for i, line := range lines {
			for _, m := range absPath.FindAllString(line, -1) {
				t.Errorf("%s:%d: absolute path %q", rel(f), i+1, strings.TrimSpace(m))
			}
		}
	}
}

func TestDocsLinksResolve(t *testing.T) {
	for _, f := range markdownFiles(t) {
		in := false
		for i, line := range readLines(t, f) {
			if in = fence(line, in); in {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
					t.Errorf("%s:%d: link to %q, which the repository does not hold", rel(f), i+1, m[1])
				}
			}
		}
	}
}

func TestNoSeedInDocs(t *testing.T) {
	for _, f := range markdownFiles(t) {
		for i, line := range readLines(t, f) {
			checkSeed(t, rel(f), i+1, line)
		}
	}
}

// TestNoSeedInDocComments checks the comments of every Go file of the
// repository (tests included, since test names and their comments are
// documentation too).
func TestNoSeedInDocComments(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || p == filepath.Join(root, "internal", "doccheck", "standalone_test.go") {
			return nil // this file names what it looks for
		}
		for i, line := range readLines(t, p) {
			if _, comment, ok := strings.Cut(line, "//"); ok {
				checkSeed(t, rel(p), i+1, comment)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNoSeedInVectorNames(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root, "conformance", "vectors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(strings.ToLower(e.Name()), "seed") {
			t.Errorf("conformance/vectors/%s: name the lifecycle, not a seed", e.Name())
		}
	}
}

func checkSeed(t *testing.T, file string, line int, text string) {
	t.Helper()
	for _, m := range seedWord.FindAllString(text, -1) {
		if !seedAllowed(m) {
			t.Errorf("%s:%d: %q: name the lifecycle by what it is", file, line, m)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

func rel(p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}
