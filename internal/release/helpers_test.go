package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// repoRoot returns the root of the repository the test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loadRepo loads the repository's tree.
func loadRepo(t *testing.T) *Tree {
	t.Helper()
	tree, err := LoadTree(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// copyTree copies the Go files, go.mod and go.sum files of the
// repository's work tree (of those a commit of it would hold) into a
// temporary directory and returns it: what the tool reads of a tree, and
// what the go command needs of a module to tidy it.
func copyTree(t *testing.T) string {
	t.Helper()
	src := loadRepo(t)
	files, err := src.listFiles()
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for _, f := range files {
		if base := path.Base(f); !strings.HasSuffix(base, ".go") && base != "go.mod" && base != "go.sum" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src.Root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dst, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// editFile replaces old by new in the file at path, which must hold old.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runCmd runs name with args in dir with env (nil: the process's) and
// returns its standard output; it fails the test, with the command's
// output, when the command fails.
func runCmd(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %.1f s", name, strings.Join(args, " "), time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// runFailing runs name with args in dir with env and returns its
// combined output; it fails the test when the command succeeds.
func runFailing(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("%s %s (in %s) succeeded, want a failure:\n%s", name, strings.Join(args, " "), dir, out)
	}
	return string(out)
}

// runTool runs the tool's command line on the tree at root and returns
// its exit code, standard output and standard error.
func runTool(root string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"-root", root}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}
