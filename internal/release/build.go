package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// Built is a released module as a release at one version makes it.
type Built struct {
	// Module is the module in the tree.
	Module *Module
	// Version is the version it is released at.
	Version string
	// GoMod is its go.mod as released: its requirements of the released
	// modules at Version.
	GoMod []byte
	// GoSum is its go.sum as released: its lines of the released modules
	// are those of Version, computed from the zips built before it.
	GoSum []byte
	// Zip is the module zip: the tree's files of the module, with GoMod
	// and GoSum.
	Zip []byte
	// ZipHash and ModHash are the h1 sums of Zip and GoMod, the lines a
	// go.sum holds for the module at Version.
	ZipHash, ModHash string
}

// checkVersion refuses a version that is not a canonical semantic version
// valid for every released module's path.
func (t *Tree) checkVersion(version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("release: %q is not a canonical semantic version such as v0.1.0: %w", version, ErrUsage)
	}
	for _, m := range t.Released {
		if err := module.Check(m.Path, version); err != nil {
			return fmt.Errorf("release: %w: %w", err, ErrUsage)
		}
	}
	return nil
}

// Build makes every released module at version from the work tree, in
// dependency order, so that each module's go.sum holds the sums of the
// released modules it requires as they are built here.
func (t *Tree) Build(version string) ([]*Built, error) {
	if err := t.checkVersion(version); err != nil {
		return nil, err
	}
	built := make(map[string]*Built)
	var out []*Built
	for _, m := range t.Released {
		goMod, err := t.setRequirements(m, version)
		if err != nil {
			return nil, err
		}
		goSum, err := t.setSums(m, version, built)
		if err != nil {
			return nil, err
		}
		b := &Built{Module: m, Version: version, GoMod: goMod, GoSum: goSum}
		if err := t.zip(b); err != nil {
			return nil, err
		}
		built[m.Path] = b
		out = append(out, b)
	}
	return out, nil
}

// setRequirements returns m's go.mod with its requirements of released
// modules at version (the file as read when they already are).
func (t *Tree) setRequirements(m *Module, version string) ([]byte, error) {
	f, err := modfile.Parse(path.Join(m.Dir, "go.mod"), m.ModData, nil)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	changed := false
	for _, r := range f.Require {
		if t.released(r.Mod.Path) != nil && r.Mod.Path != m.Path && r.Mod.Version != version {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, fmt.Errorf("release: %s/go.mod: %w", m.Dir, err)
			}
			changed = true
		}
	}
	if !changed {
		return m.ModData, nil
	}
	f.Cleanup()
	data, err := f.Format()
	if err != nil {
		return nil, fmt.Errorf("release: formatting %s/go.mod: %w", m.Dir, err)
	}
	return data, nil
}

// setSums returns m's go.sum with its lines of released modules replaced
// by the sums of the zip and go.mod of each released module m requires,
// at version, taken from built. The lines keep the go command's order.
func (t *Tree) setSums(m *Module, version string, built map[string]*Built) ([]byte, error) {
	hashes := make(map[module.Version][]string)
	var keys []module.Version
	add := func(mv module.Version, h string) {
		if _, ok := hashes[mv]; !ok {
			keys = append(keys, mv)
		}
		hashes[mv] = append(hashes[mv], h)
	}
	for i, line := range strings.Split(string(m.SumData), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("release: %s/go.sum:%d: malformed line %q", m.Dir, i+1, line)
		}
		if t.released(fields[0]) != nil {
			continue
		}
		add(module.Version{Path: fields[0], Version: fields[1]}, fields[2])
	}
	for _, r := range m.Mod.Require {
		if t.released(r.Mod.Path) == nil || r.Mod.Path == m.Path {
			continue
		}
		b := built[r.Mod.Path]
		if b == nil {
			return nil, fmt.Errorf("release: %s requires %s, which is not built before it", m.Dir, r.Mod.Path)
		}
		add(module.Version{Path: r.Mod.Path, Version: version}, b.ZipHash)
		add(module.Version{Path: r.Mod.Path, Version: version + "/go.mod"}, b.ModHash)
	}
	if len(keys) == 0 {
		return m.SumData, nil
	}
	module.Sort(keys)
	var buf bytes.Buffer
	for _, k := range keys {
		for _, h := range hashes[k] {
			fmt.Fprintf(&buf, "%s %s %s\n", k.Path, k.Version, h)
		}
	}
	return buf.Bytes(), nil
}

// zip builds b's module zip from the work tree and its go.mod and go.sum
// as released, and computes its sums.
func (t *Tree) zip(b *Built) error {
	m := b.Module
	rel, err := t.moduleFiles(m.Dir)
	if err != nil {
		return err
	}
	var entries []modzip.File
	haveSum := false
	for _, r := range rel {
		switch r {
		case "go.mod":
			entries = append(entries, zipEntry{rel: r, data: b.GoMod})
		case "go.sum":
			haveSum = true
			entries = append(entries, zipEntry{rel: r, data: b.GoSum})
		default:
			// Read now, so that the size declared in the zip is that of
			// the content written even if the file changes meanwhile.
			data, err := os.ReadFile(filepath.Join(t.Root, filepath.FromSlash(path.Join(m.Dir, r))))
			if err != nil {
				return fmt.Errorf("release: zip of %s: %w", m.Dir, err)
			}
			entries = append(entries, zipEntry{rel: r, data: data})
		}
	}
	if !haveSum && len(b.GoSum) > 0 {
		entries = append(entries, zipEntry{rel: "go.sum", data: b.GoSum})
	}
	mv := module.Version{Path: m.Path, Version: b.Version}
	var buf bytes.Buffer
	if err := modzip.Create(&buf, mv, entries); err != nil {
		return fmt.Errorf("release: zip of %s: %w", m.Dir, err)
	}
	b.Zip = buf.Bytes()
	if b.ZipHash, err = hashZip(b.Zip); err != nil {
		return fmt.Errorf("release: zip of %s: %w", m.Dir, err)
	}
	b.ModHash, err = dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b.GoMod)), nil
	})
	if err != nil {
		return fmt.Errorf("release: sum of %s/go.mod: %w", m.Dir, err)
	}
	return nil
}

// hashZip returns the h1 sum of a module zip, as dirhash.HashZip computes
// it from a file.
func hashZip(data []byte) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", err
	}
	files := make(map[string]*zip.File, len(zr.File))
	names := make([]string, 0, len(zr.File))
	for _, f := range zr.File {
		files[f.Name] = f
		names = append(names, f.Name)
	}
	return dirhash.Hash1(names, func(name string) (io.ReadCloser, error) {
		f := files[name]
		if f == nil {
			return nil, fmt.Errorf("file %q not found in zip", name)
		}
		return f.Open()
	})
}
