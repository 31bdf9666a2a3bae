package conformancetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jobstate/jobstate/sqlitestore"
)

// open returns a store on a new file in t's temporary directory, closed
// when t ends.
func open(t testing.TB, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "jobs.db"), opts)
}

// openAt returns a store on the file at path, closed when t ends.
func openAt(t testing.TB, path string, opts sqlitestore.Options) *sqlitestore.Store {
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
