// Package storemigrate reads the versioned migrations of the library's
// SQL stores (pgstore, sqlitestore): each store embeds its own SQL files
// and applies them its own way; the naming of the files and the order of
// the versions are the same for both and are read here.
package storemigrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one versioned step of a store's schema.
type Migration struct {
	// Version is the number the file's name starts with, from 1.
	Version int
	// Name is the file's name after the number and its underscore,
	// without ".sql".
	Name string
	// SQL is the file's content.
	SQL string
}

// Load returns the migrations in the folder dir of fsys, in version order.
// A file is named NNNN_name.sql; its number is its version, and the
// versions must be 1..n. A file named otherwise, or versions with a gap
// or a repeat, give an error; errors start with store, the name of the
// store whose files they are.
func Load(fsys fs.FS, dir, store string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: reading migrations: %w", store, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(rest, ".sql") {
			return nil, fmt.Errorf("%s: migration file %q is not named NNNN_name.sql", store, name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s: migration file %q has no positive version", store, name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: reading migration %q: %w", store, name, err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("%s: migration versions are not 1..n: %d at position %d", store, out[i].Version, i+1)
		}
	}
	return out, nil
}
