package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// planRows is the number of jobs the plan tests load: 1,000,000, or
// JOBSTATE_PLAN_ROWS.
func planRows(t *testing.T) int {
	if v := os.Getenv("JOBSTATE_PLAN_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	if testing.Short() {
		t.Skip("loading 1,000,000 jobs; not in -short")
	}
	return 1_000_000
}

// plan returns the JSON plan of sql with args, and the node types in it.
func plan(t *testing.T, s *pgstore.Store, sql string, args ...any) (string, []string) {
	t.Helper()
	var raw []byte
	require.NoError(t, s.Pool().QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	var nodes []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if nt, ok := x["Node Type"].(string); ok {
				name := nt
				if idx, ok := x["Index Name"].(string); ok {
					name += " " + idx
				}
				nodes = append(nodes, name)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	walk(doc)
	return string(raw), nodes
}

func requireIndexPlan(t *testing.T, what string, nodes []string, index string) {
	t.Helper()
	joined := strings.Join(nodes, ", ")
	for _, n := range nodes {
		require.NotContains(t, n, "Seq Scan", "%s: %s", what, joined)
		require.NotEqual(t, "Sort", n, "%s: a full sort: %s", what, joined)
	}
	require.Contains(t, joined, index, "%s: %s", what, joined)
}

// loadScale inserts n jobs in one statement, the indexes dropped during
// the load and built again after it: 7 machines ("m0" to "m6"), 1,000
// owners ("user0" to "user999"), 5 priorities; one job in 100 failed and 9
// done, the rest ready ("queued"); one in 100 with a wake time; created a
// millisecond apart from 2026-01-01.
func loadScale(tb testing.TB, s *pgstore.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	t0 := time.Now()
	tbl := s.Schema() + ".jobs"
	// Loading is faster with the indexes built afterwards: their
	// definitions are read from the catalog, dropped and made again.
	var defs []string
	rows, err := s.Pool().Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs' AND indexname <> 'jobs_pkey'`, s.Schema())
	require.NoError(tb, err)
	var names []string
	for rows.Next() {
		var name, def string
		require.NoError(tb, rows.Scan(&name, &def))
		names, defs = append(names, name), append(defs, def)
	}
	require.NoError(tb, rows.Err())
	for _, name := range names {
		_, err := s.Pool().Exec(ctx, "DROP INDEX "+s.Schema()+"."+name)
		require.NoError(tb, err)
	}
	_, err = s.Pool().Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, machine, state, kind, outcome, version, owner, priority,
 created_at, updated_at, not_before, due_at, wake_at)
SELECT gen_random_uuid(), 'm' || (i %% 7),
 CASE WHEN i %% 100 = 0 THEN 'failed' WHEN i %% 10 = 0 THEN 'done' ELSE 'queued' END,
 CASE WHEN i %% 10 = 0 THEN 'terminal' ELSE 'ready' END,
 CASE WHEN i %% 100 = 0 THEN 'failed' WHEN i %% 10 = 0 THEN 'succeeded' ELSE '' END,
 1, 'user' || (i %% 1000), i %% 5,
 t, t, '-infinity', t, CASE WHEN i %% 100 = 0 THEN t ELSE NULL END
FROM generate_series(1, %d) i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 millisecond' AS t) x`, tbl, n))
	require.NoError(tb, err)
	for _, def := range defs {
		_, err := s.Pool().Exec(ctx, def)
		require.NoError(tb, err)
	}
	_, err = s.Pool().Exec(ctx, "ANALYZE "+tbl)
	require.NoError(tb, err)
	tb.Logf("loaded %d jobs in %v", n, time.Since(t0).Round(time.Millisecond))
}

// TestPlansAtScale loads a million jobs and checks that the claim, Due and
// listing queries walk their indexes: no sequential scan, no sort of the
// whole set.
func TestPlansAtScale(t *testing.T) {
	n := planRows(t)
	s := pgtest.Store(t)
	ctx := context.Background()
	loadScale(t, s, n)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

	requireClaimPlan(t, pinnedPlan(t, s, pgstore.ClaimSQL(s), "m3", now, int16(0), []string{}, 10, pgstore.KeyLockPrefix(s, "m3")))

	_, nodes := plan(t, s, pgstore.DueSQL(s), now, int16(0), time.Time{}, int16(0), [16]byte{}, 100)
	requireIndexPlan(t, "due", nodes, "jobs_wake")

	// The first pages of listings, as List sends them.
	for _, q := range []jobstate.ListQuery{
		{Machine: "m3", States: []jobstate.State{"failed"}, Limit: 50},
		{Owner: "user7", Limit: 50},
	} {
		jobs, err := s.List(ctx, q)
		require.NoError(t, err)
		require.Len(t, jobs, q.Limit)
	}
	sql, args := pgstore.ListSQL(s, jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed"}, Limit: 50})
	_, nodes = plan(t, s, sql, args...)
	requireIndexPlan(t, "list by machine and state", nodes, "jobs_machine_state")
	sql, args = pgstore.ListSQL(s, jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed", "done"}, Limit: 50, Desc: true})
	_, nodes = plan(t, s, sql, args...)
	requireIndexPlan(t, "list by machine and two states", nodes, "jobs_machine_state")
	sql, args = pgstore.ListSQL(s, jobstate.ListQuery{Owner: "user7", Limit: 50})
	_, nodes = plan(t, s, sql, args...)
	requireIndexPlan(t, "list by owner", nodes, "jobs_owner")
	sql, args = pgstore.ListSQL(s, jobstate.ListQuery{Key: "k7", Limit: 50})
	_, nodes = plan(t, s, sql, args...)
	requireIndexPlan(t, "list by key", nodes, "jobs_key")
}
