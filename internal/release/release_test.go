package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tidy passes on the tree's otel module and reports a requirement it does
// not need, as `go mod tidy -diff` prints it, with a non-zero exit.
func TestTidyReportsAnUntidyModule(t *testing.T) {
	root := copyTree(t)
	if code, stdout, stderr := runTool(root, "tidy", "otel"); code != 0 {
		t.Fatalf("tidy otel exited %d on the tree:\n%s%s", code, stdout, stderr)
	}
	editFile(t, filepath.Join(root, "otel", "go.mod"), "\nrequire (\n", "\nrequire (\n\tgolang.org/x/mod v0.25.0\n")
	code, stdout, stderr := runTool(root, "tidy", "otel")
	if code != 1 {
		t.Fatalf("tidy otel exited %d with an unneeded requirement, want 1:\n%s%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "otel: go mod tidy would change go.mod or go.sum") || !strings.Contains(stdout, "-\tgolang.org/x/mod v0.25.0") {
		t.Errorf("tidy otel printed:\n%s\nwant the module named and the requirement's removal", stdout)
	}
	if !strings.Contains(stderr, ErrUntidy.Error()) {
		t.Errorf("tidy otel: stderr %q, want %q", stderr, ErrUntidy)
	}
	if code, _, stderr := runTool(root, "tidy", "examples"); code != 2 {
		t.Errorf("tidy examples (not released) exited %d, want 2; stderr %q", code, stderr)
	}
}

// release refuses a dirty work tree and a version already tagged; on a
// clean tree it sets the version and prints the tags, creating none.
func TestReleasePrintsTheTagsAndTagsNothing(t *testing.T) {
	root := copyTree(t)
	git := func(args ...string) string {
		return runCmd(t, root, nil, "git", append([]string{"-c", "user.name=release test", "-c", "user.email=release@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "tree")

	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runTool(root, "release", "v0.2.0")
	if code != 1 || stderr != "notes.txt: changed in the work tree (??): commit it or remove it before a release\n" {
		t.Errorf("release with an untracked file: exit %d, stderr %q", code, stderr)
	}
	if err := os.Remove(filepath.Join(root, "notes.txt")); err != nil {
		t.Fatal(err)
	}

	git("tag", "otel/v0.2.0")
	code, _, stderr = runTool(root, "release", "v0.2.0")
	if code != 1 || stderr != "otel: tag otel/v0.2.0 exists already\n" {
		t.Errorf("release of a tagged version: exit %d, stderr %q", code, stderr)
	}
	git("tag", "-d", "otel/v0.2.0")

	code, stdout, stderr := runTool(root, "release", "v0.2.0")
	if code != 0 {
		t.Fatalf("release exited %d:\n%s%s", code, stdout, stderr)
	}
	_, tags, ok := strings.Cut(stdout, "\nTags:\n")
	if want := "v0.2.0\npgstore/v0.2.0\notel/v0.2.0\nsqlitestore/v0.2.0\nconformance/v0.2.0\nstoretest/v0.2.0\nui/v0.2.0\ncmd/jobstate/v0.2.0\n"; !ok || tags != want {
		t.Errorf("release printed:\n%s\nwant it to end with the tags:\n%s", stdout, want)
	}
	if !strings.Contains(stdout, "git push origin v0.2.0 pgstore/v0.2.0 otel/v0.2.0 sqlitestore/v0.2.0 conformance/v0.2.0 storetest/v0.2.0 ui/v0.2.0 cmd/jobstate/v0.2.0\n") {
		t.Errorf("release printed:\n%s\nwant the push of the tags", stdout)
	}
	if got := git("tag", "--list"); got != "" {
		t.Errorf("release created tags: %q", got)
	}
	tree, err := LoadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tree.Check(); err != nil || v != "v0.2.0" {
		t.Errorf("after release v0.2.0, Check: %q, %v", v, err)
	}
	// The work tree holds only the release's go.mod and go.sum changes,
	// so the release can be prepared again.
	if code, stdout, stderr := runTool(root, "release", "v0.2.0"); code != 0 || !strings.Contains(stdout, "set v0.2.0 in 0 file(s)") {
		t.Errorf("a second release v0.2.0 exited %d:\n%s%s", code, stdout, stderr)
	}
}
