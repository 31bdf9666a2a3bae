package exstore

import (
	"context"
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
