package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// FuzzOpenPath: a file name a user gives, whatever characters it holds
// (those a URI gives meaning to: ? # % & =, spaces, non-ASCII), names
// exactly the file Open makes; or Open refuses it with a typed error.
func FuzzOpenPath(f *testing.F) {
	for _, seed := range []string{"jobs.db", "a?b.db", "x#y", "100%.db", "a&_txlock=deferred", "sp ace", "émoji-☃.db", "%2F"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 200 {
			t.Skip()
		}
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{})
		if err != nil {
			if !errors.Is(err, jobstate.ErrUnavailable) && !errors.Is(err, jobstate.ErrInvalidArgument) {
				t.Fatalf("open %q: untyped error %v", name, err)
			}
			return
		}
		defer s.Close()
		if _, err := os.Stat(path); err != nil {
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("open %q made %q instead", name, names)
		}
	})
}
