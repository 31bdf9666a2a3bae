// Package sqlitetest opens stores on files for sqlitestore's tests.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jobstate/jobstate/sqlitestore"
)

// Open returns a store on a new file in t's temporary directory, closed
// when t ends.
func Open(t testing.TB, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "jobs.db"), opts)
}

// OpenAt returns a store on the file at path, closed when t ends.
func OpenAt(t testing.TB, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}
