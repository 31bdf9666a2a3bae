package exstore

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestDatabase returns the URL of a PostgreSQL database for a test: the
// one JOBSTATE_DATABASE_URL names, or a throwaway cluster stopped when t
// ends. Without a server t is skipped, or fails when
// JOBSTATE_REQUIRE_PG=1 (pgtest.Unavailable).
func TestDatabase(t testing.TB) string {
	t.Helper()
	c, err := pgtest.Start(context.Background(), pgtest.Settings{Params: map[string]string{"synchronous_commit": "off"}})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c.URL
}

// Demo is an example program's body: it prints to out, running its jobs
// on b's stores.
type Demo func(ctx context.Context, out io.Writer, b *Backend) error

// Output runs demo on the store cfg names and returns what it printed,
// failing t if it returns an error.
func Output(t testing.TB, cfg Config, demo Demo) string {
	t.Helper()
	ctx := context.Background()
	var out bytes.Buffer
	if err := With(ctx, cfg, func(b *Backend) error { return demo(ctx, &out, b) }); err != nil {
		t.Fatalf("%s: %v", cfg.Store, err)
	}
	return out.String()
}

// OnBoth runs demo on the in-memory store and on PostgreSQL (a database
// from TestDatabase) and returns what each run printed.
func OnBoth(t testing.TB, demo Demo) (mem, pg string) {
	t.Helper()
	url := TestDatabase(t)
	mem = Output(t, Config{Store: Memory}, demo)
	pg = Output(t, Config{Store: Postgres, DatabaseURL: url}, demo)
	return mem, pg
}

// OnSQLite runs demo on the in-memory store and on SQLite (files in t's
// temporary directory) and returns what each run printed.
func OnSQLite(t testing.TB, demo Demo) (mem, lite string) {
	t.Helper()
	mem = Output(t, Config{Store: Memory}, demo)
	lite = Output(t, Config{Store: SQLite, DB: filepath.Join(t.TempDir(), "jobs.db")}, demo)
	return mem, lite
}
