package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
)

// Set writes version into the tree: every released module's requirements
// of the released modules and their go.sum lines (computed from the zips
// of the tree's content, in dependency order), and the other modules'
// requirements of the released modules (which they replace with the
// tree's directories, so they need no sums). It returns the files it
// changed, relative to the root.
func (t *Tree) Set(version string) ([]string, error) {
	built, err := t.Build(version)
	if err != nil {
		return nil, err
	}
	var changed []string
	write := func(file string, old, data []byte) error {
		if bytes.Equal(old, data) {
			return nil
		}
		if err := os.WriteFile(filepath.Join(t.Root, filepath.FromSlash(file)), data, 0o644); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		changed = append(changed, file)
		return nil
	}
	for _, b := range built {
		m := b.Module
		if err := write(path.Join(m.Dir, "go.mod"), m.ModData, b.GoMod); err != nil {
			return changed, err
		}
		if err := write(path.Join(m.Dir, "go.sum"), m.SumData, b.GoSum); err != nil {
			return changed, err
		}
	}
	for _, m := range t.Others {
		data, err := t.setRequirements(m, version)
		if err != nil {
			return changed, err
		}
		if err := write(path.Join(m.Dir, "go.mod"), m.ModData, data); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// WriteProxy builds every released module at version from the work tree
// and writes them to dir as a module proxy the go command reads through
// GOPROXY=file://dir: for each module, dir/<escaped path>/@v/ holds list
// (the versions, this one added), version.info, version.mod and
// version.zip. The modules are those Build makes, so their go.mod and
// go.sum are right for version whether or not Set has written it.
func (t *Tree) WriteProxy(version, dir string) ([]*Built, error) {
	built, err := t.Build(version)
	if err != nil {
		return nil, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	for _, b := range built {
		esc, err := module.EscapePath(b.Module.Path)
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		v := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(v, 0o755); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		list, err := os.ReadFile(filepath.Join(v, "list"))
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("release: %w", err)
		}
		versions := map[string]bool{version: true}
		for _, l := range strings.Fields(string(list)) {
			versions[l] = true
		}
		var lines []string
		for l := range versions {
			lines = append(lines, l)
		}
		sort.Strings(lines)
		for name, data := range map[string][]byte{
			"list":            []byte(strings.Join(lines, "\n") + "\n"),
			version + ".info": info,
			version + ".mod":  b.GoMod,
			version + ".zip":  b.Zip,
		} {
			if err := os.WriteFile(filepath.Join(v, name), data, 0o644); err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
		}
	}
	return built, nil
}
