// Command release releases jobstate's modules: it checks that the tree can
// be released, sets one version across the released modules' requirements
// of one another and their go.sum lines, builds a file module proxy of
// the tree for tests, checks that the released modules are tidy, and
// prints the tags of a release. It never pushes. See docs/releasing.md.
//
//	go run ./internal/release [-root DIR] check
//	go run ./internal/release [-root DIR] set VERSION
//	go run ./internal/release [-root DIR] proxy VERSION DIR
//	go run ./internal/release [-root DIR] tidy [MODULE_DIR...]
//	go run ./internal/release [-root DIR] release VERSION
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: release [-root DIR] COMMAND
  check                  refuse a released module with a replace, a requirement of a sibling
                         at another version than the others, or a missing requirement
  set VERSION            set VERSION in every module's requirements of the released modules
                         and the released modules' go.sum lines of one another
  proxy VERSION DIR      write a file module proxy of the released modules at VERSION to DIR
  tidy [MODULE_DIR...]   check that every released module (or those in the directories given)
                         is tidy as it would be released
  release VERSION        check, set VERSION and print the tags to push (never pushes)`

// run runs the command line args and returns the process's exit code: 0
// on success, 1 when the tree is refused, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "the repository root (default: found from the current directory)")
	fs.Usage = func() { fmt.Fprintln(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := command(ctx, *root, fs.Args(), stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(stderr, "release:", err)
		fmt.Fprintln(stderr, usage)
		return 2
	default:
		var ce *CheckError
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stderr, p)
			}
			return 1
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
}

func command(ctx context.Context, root string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no command: %w", ErrUsage)
	}
	want := map[string]int{"check": 0, "set": 1, "proxy": 2, "tidy": -1, "release": 1}
	n, ok := want[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: %w", args[0], ErrUsage)
	}
	if n >= 0 && len(args)-1 != n {
		return fmt.Errorf("%s takes %d argument(s), got %d: %w", args[0], n, len(args)-1, ErrUsage)
	}
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if root, err = FindRoot(wd); err != nil {
			return err
		}
	}
	t, err := LoadTree(root)
	if err != nil {
		return err
	}
	switch args[0] {
	case "check":
		v, err := t.Check()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "the released modules can be released; they require one another at %s\n", orNone(v))
	case "set":
		changed, err := t.Set(args[1])
		for _, f := range changed {
			fmt.Fprintln(stdout, "wrote", f)
		}
		return err
	case "proxy":
		built, err := t.WriteProxy(args[1], args[2])
		if err != nil {
			return err
		}
		for _, b := range built {
			fmt.Fprintf(stdout, "%s %s %s\n", b.Module.Path, b.Version, b.ZipHash)
		}
	case "tidy":
		if err := t.Tidy(ctx, stdout, args[1:]...); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "the released modules are tidy")
	case "release":
		return t.Release(ctx, args[1], stdout)
	}
	return nil
}

func orNone(v string) string {
	if v == "" {
		return "no version (none requires another)"
	}
	return v
}

// Release prepares the release of every released module at version: it
// refuses a work tree with changes other than to go.mod and go.sum files,
// a version already tagged, or a tree Check refuses; then it sets version
// (Set) and prints the commit and the tags to make and push. It pushes
// nothing.
func (t *Tree) Release(ctx context.Context, version string, w io.Writer) error {
	if err := t.checkVersion(version); err != nil {
		return err
	}
	if err := t.cleanTree(ctx); err != nil {
		return err
	}
	var tags []string
	for _, m := range t.Released {
		tag := m.Tag(version)
		out, err := exec.CommandContext(ctx, "git", "-C", t.Root, "tag", "--list", tag).Output()
		if err != nil {
			return fmt.Errorf("release: git tag --list: %w", err)
		}
		if strings.TrimSpace(string(out)) != "" {
			return &CheckError{Problems: []Problem{{File: m.Dir, Msg: fmt.Sprintf("tag %s exists already", tag)}}}
		}
		tags = append(tags, tag)
	}
	if _, err := t.Check(); err != nil {
		return err
	}
	changed, err := t.Set(version)
	if err != nil {
		return err
	}
	after, err := LoadTree(t.Root)
	if err != nil {
		return err
	}
	if _, err := after.Check(); err != nil {
		return err
	}
	fmt.Fprintf(w, "set %s in %d file(s):\n", version, len(changed))
	for _, f := range changed {
		fmt.Fprintln(w, "  "+f)
	}
	fmt.Fprintln(w, "\nNext: check that every released module is tidy, then commit, tag and push:")
	fmt.Fprintln(w, "  go run ./internal/release tidy")
	if len(changed) > 0 {
		fmt.Fprintf(w, "  git commit -m \"Release %s\" -- %s\n", version, strings.Join(changed, " "))
	}
	for _, tag := range tags {
		fmt.Fprintf(w, "  git tag -a %s -m \"Release %s\"\n", tag, version)
	}
	fmt.Fprintf(w, "  git push origin %s\n", strings.Join(tags, " "))
	fmt.Fprintln(w, "\nTags:")
	for _, tag := range tags {
		fmt.Fprintln(w, tag)
	}
	return nil
}

// cleanTree refuses a work tree with changes other than to the modules'
// go.mod and go.sum files: the tags must hold what the sums were
// computed from.
func (t *Tree) cleanTree(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "git", "-C", t.Root, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		return fmt.Errorf("release: git status (a release is made from a git work tree): %w", err)
	}
	allowed := make(map[string]bool)
	for _, m := range t.all() {
		allowed[path.Join(m.Dir, "go.mod")] = true
		allowed[path.Join(m.Dir, "go.sum")] = true
	}
	var problems []Problem
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) < 4 {
			continue
		}
		file := line[3:]
		if !allowed[file] || strings.HasPrefix(line, "??") {
			problems = append(problems, Problem{File: file, Msg: "changed in the work tree (" + strings.TrimSpace(line[:2]) + "): commit it or remove it before a release"})
		}
	}
	if len(problems) > 0 {
		return &CheckError{Problems: problems}
	}
	return nil
}
