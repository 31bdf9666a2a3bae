package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// rootPath is the module path of the repository's root module.
const rootPath = "github.com/jobstate/jobstate"

// releasedDirs returns the directories, relative to the repository root,
// of the modules users get: each is tagged at every release, requires its
// siblings at the version the tree is released as and has no replace.
func releasedDirs() []string {
	return []string{".", "pgstore", "otel", "sqlitestore", "conformance", "storetest", "cmd/jobstate", "ui"}
}

// otherDirs returns the directories of the modules nobody depends on.
// They build from the tree through replace directives and are never
// tagged; set keeps their requirements of the released modules at the
// release's version all the same.
func otherDirs() []string {
	return []string{"examples", "bench", "bench/pgcompare", "bench/sqlitecompare", "internal/release", "internal/properties", "pgstore/internal/conformancetest", "sqlitestore/internal/conformancetest"}
}

// Module is one module of the tree as its files hold it.
type Module struct {
	// Dir is the module's directory, slash-separated and relative to the
	// repository root ("." for the root module).
	Dir string
	// Path is the module path its go.mod declares.
	Path string
	// Mod is its parsed go.mod.
	Mod *modfile.File
	// ModData and SumData are its go.mod and go.sum as read (SumData is
	// nil when it has no go.sum).
	ModData, SumData []byte
}

// Tag returns the tag that releases the module at version: the version
// itself for the root module, "dir/version" for the others.
func (m *Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// Tree is a repository work tree and its modules.
type Tree struct {
	// Root is the repository's root directory (absolute).
	Root string
	// Released are the modules users get, in dependency order: every
	// module comes after the released modules it requires.
	Released []*Module
	// Others are the modules nobody depends on.
	Others []*Module

	files []string // the work tree's files, see listFiles
}

// FindRoot returns the nearest directory at or above dir whose go.mod
// declares the root module.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("release: finding the repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modfile.ModulePath(data) == rootPath {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("release: no directory at or above %s holds the go.mod of %s: %w", dir, rootPath, os.ErrNotExist)
		}
	}
}

// LoadTree reads the go.mod and go.sum of every module of the tree at
// root and orders the released modules by their requirements.
func LoadTree(root string) (*Tree, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	t := &Tree{Root: root}
	var released []*Module
	for _, dir := range releasedDirs() {
		m, err := loadModule(root, dir)
		if err != nil {
			return nil, err
		}
		released = append(released, m)
	}
	for _, dir := range otherDirs() {
		m, err := loadModule(root, dir)
		if err != nil {
			return nil, err
		}
		t.Others = append(t.Others, m)
	}
	if t.Released, err = dependencyOrder(released); err != nil {
		return nil, err
	}
	return t, nil
}

func loadModule(root, dir string) (*Module, error) {
	file := path.Join(dir, "go.mod")
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if f.Module == nil {
		return nil, fmt.Errorf("release: %s declares no module path", file)
	}
	sum, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path.Join(dir, "go.sum"))))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("release: %w", err)
	}
	return &Module{Dir: dir, Path: f.Module.Mod.Path, Mod: f, ModData: data, SumData: sum}, nil
}

// dependencyOrder sorts mods so that each comes after the modules of mods
// it requires, keeping the given order where requirements leave it free.
func dependencyOrder(mods []*Module) ([]*Module, error) {
	byPath := make(map[string]*Module, len(mods))
	for _, m := range mods {
		byPath[m.Path] = m
	}
	var order []*Module
	placed := make(map[string]bool, len(mods))
	for len(order) < len(mods) {
		progress := false
		for _, m := range mods {
			if placed[m.Path] {
				continue
			}
			ready := true
			for _, r := range m.Mod.Require {
				if byPath[r.Mod.Path] != nil && r.Mod.Path != m.Path && !placed[r.Mod.Path] {
					ready = false
				}
			}
			if ready {
				order = append(order, m)
				placed[m.Path] = true
				progress = true
			}
		}
		if !progress {
			var left []string
			for _, m := range mods {
				if !placed[m.Path] {
					left = append(left, m.Dir)
				}
			}
			return nil, fmt.Errorf("release: the requirements of modules %s form a cycle", strings.Join(left, ", "))
		}
	}
	return order, nil
}

// released reports whether path is the module path of a released module.
func (t *Tree) released(path string) *Module {
	for _, m := range t.Released {
		if m.Path == path {
			return m
		}
	}
	return nil
}

// releasedDir returns the released module in directory dir, or nil.
func (t *Tree) releasedDir(dir string) *Module {
	for _, m := range t.Released {
		if m.Dir == dir {
			return m
		}
	}
	return nil
}

// all returns the released modules, then the others.
func (t *Tree) all() []*Module {
	return append(append([]*Module(nil), t.Released...), t.Others...)
}
