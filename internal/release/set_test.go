package main

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
)

// set writes one version everywhere and, in each released module's
// go.sum, the sums of the zips and go.mod files the proxy serves at that
// version; a second set changes nothing.
func TestSetWritesTheSumsOfTheProxysModules(t *testing.T) {
	root := copyTree(t)
	const version = "v0.2.0"
	if code, stdout, stderr := runTool(root, "set", version); code != 0 {
		t.Fatalf("set exited %d:\n%s%s", code, stdout, stderr)
	}
	tree, err := LoadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tree.Check(); err != nil || v != version {
		t.Fatalf("after set %s, Check: %q, %v", version, v, err)
	}
	for _, m := range tree.Others {
		for _, r := range m.Mod.Require {
			if tree.released(r.Mod.Path) != nil && r.Mod.Version != version {
				t.Errorf("%s/go.mod requires %s %s after set %s", m.Dir, r.Mod.Path, r.Mod.Version, version)
			}
		}
	}

	proxyDir := t.TempDir()
	if _, err := tree.WriteProxy(version, proxyDir); err != nil {
		t.Fatal(err)
	}
	// The sums, computed here from the proxy's files.
	zipSum := make(map[string]string)
	modSum := make(map[string]string)
	for _, m := range tree.Released {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(proxyDir, filepath.FromSlash(esc), "@v")
		if zipSum[m.Path], err = dirhash.HashZip(filepath.Join(dir, version+".zip"), dirhash.Hash1); err != nil {
			t.Fatal(err)
		}
		mod, err := os.ReadFile(filepath.Join(dir, version+".mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mod, m.ModData) {
			t.Errorf("the proxy's %s.mod of %s is not the tree's go.mod after set", version, m.Dir)
		}
		if modSum[m.Path], err = dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
			return os.Open(filepath.Join(dir, version+".mod"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for _, m := range tree.Released {
		for _, r := range m.Mod.Require {
			if tree.released(r.Mod.Path) == nil {
				continue
			}
			for _, want := range []string{
				r.Mod.Path + " " + version + " " + zipSum[r.Mod.Path],
				r.Mod.Path + " " + version + "/go.mod " + modSum[r.Mod.Path],
			} {
				checked++
				if !strings.Contains(string(m.SumData), want+"\n") {
					t.Errorf("%s/go.sum does not hold %q", m.Dir, want)
				}
			}
			for _, line := range strings.Split(string(m.SumData), "\n") {
				if strings.HasPrefix(line, r.Mod.Path+" ") && !strings.HasPrefix(line, r.Mod.Path+" "+version) {
					t.Errorf("%s/go.sum still holds %q", m.Dir, line)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no released module requires another")
	}

	if code, stdout, stderr := runTool(root, "set", version); code != 0 || stdout != "" {
		t.Errorf("a second set exited %d and wrote %q (stderr %q), want nothing written", code, stdout, stderr)
	}
}

// The proxy lists every version written to it, and serves each.
func TestProxyListsEveryVersion(t *testing.T) {
	tree, err := LoadTree(copyTree(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, v := range []string{"v0.3.0", "v0.2.1"} {
		if _, err := tree.WriteProxy(v, dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range tree.Released {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		v := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		list, err := os.ReadFile(filepath.Join(v, "list"))
		if err != nil {
			t.Fatal(err)
		}
		if string(list) != "v0.2.1\nv0.3.0\n" {
			t.Errorf("%s: list %q, want v0.2.1 and v0.3.0", m.Dir, list)
		}
		for _, name := range []string{"v0.2.1.info", "v0.2.1.mod", "v0.2.1.zip", "v0.3.0.info", "v0.3.0.mod", "v0.3.0.zip"} {
			if _, err := os.Stat(filepath.Join(v, name)); err != nil {
				t.Errorf("%s: %v", m.Dir, err)
			}
		}
		mod, err := os.ReadFile(filepath.Join(v, "v0.2.1.mod"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range m.Mod.Require {
			if tree.released(r.Mod.Path) != nil && !strings.Contains(string(mod), r.Mod.Path+" v0.2.1") {
				t.Errorf("%s: v0.2.1.mod does not require %s at v0.2.1:\n%s", m.Dir, r.Mod.Path, mod)
			}
		}
	}
}

// A module's zip holds its files, none of a nested module's, and no file
// git ignores.
func TestZipLeavesOutNestedModulesAndIgnoredFiles(t *testing.T) {
	tree := loadRepo(t)
	files, err := tree.moduleFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	has := make(map[string]bool)
	for _, f := range files {
		has[f] = true
		for _, m := range tree.all() {
			if strings.HasPrefix(f, m.Dir+"/") {
				t.Errorf("the root module's files hold %s, a file of %s", f, m.Dir)
			}
		}
		if path.Ext(f) == ".test" {
			t.Errorf("the root module's files hold %s, which git ignores", f)
		}
	}
	for _, f := range []string{"go.mod", "go.sum", "engine.go", "memstore/memstore.go"} {
		if !has[f] {
			t.Errorf("the root module's files lack %s", f)
		}
	}
}
