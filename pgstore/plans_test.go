package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// storeTables are the tables of a store's schema.
var storeTables = []string{"jobs", "transitions", "effects", "idempotency_keys", "key_heads"}

// analyzeEmpty analyzes the store's tables, as a database-wide ANALYZE
// right after a purge does: the planner then believes them empty.
func analyzeEmpty(t *testing.T, s *pgstore.Store) {
	t.Helper()
	for _, tbl := range storeTables {
		_, err := s.Pool().Exec(context.Background(), "ANALYZE "+pgx.Identifier{s.Schema(), tbl}.Sanitize())
		require.NoError(t, err)
	}
}

// genericPlan returns the node types (with their index names) of the
// generic plan, the one a connection keeps for a prepared statement, of
// sql on tx, planned after pinPlans.
func genericPlan(t *testing.T, tx pgx.Tx, sql string) []string {
	t.Helper()
	ctx := context.Background()
	_, err := tx.Exec(ctx, "SAVEPOINT plan")
	require.NoError(t, err)
	defer func() {
		_, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT plan")
		require.NoError(t, err)
	}()
	_, err = tx.Exec(ctx, pgstore.PinPlansSQL)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "PREPARE hot AS "+sql)
	require.NoError(t, err)
	defer func() {
		_, _ = tx.Exec(ctx, "DEALLOCATE hot")
	}()
	var params int
	require.NoError(t, tx.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'hot'").Scan(&params))
	explain := "EXPLAIN EXECUTE hot"
	if params > 0 {
		// A generic plan does not depend on the values.
		explain += "(" + strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ") + ")"
	}
	rows, err := tx.Query(ctx, explain)
	require.NoError(t, err)
	var nodes []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		nodes = append(nodes, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "->")))
	}
	require.NoError(t, rows.Err())
	return nodes
}

// The statements of the claim, update and commit paths keep their index
// plans on tables analyzed while empty, where the statistics alone make
// a sequential scan the cheapest plan: the generic plan a connection
// keeps for each walks the index it was written for.
func TestHotPlansIgnoreEmptyStatistics(t *testing.T) {
	s := pgtest.Store(t)
	analyzeEmpty(t, s)
	tx, err := s.Pool().Begin(context.Background())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(context.Background(), "SET LOCAL search_path TO "+pgx.Identifier{s.Schema()}.Sanitize())
	require.NoError(t, err)
	want := map[string][]string{
		"claim":       {"jobs_claim", "key_heads_claim", "jobs_pkey"},
		"claimEffs":   {"effects_pkey"},
		"lock":        {"jobs_pkey"},
		"lockMany":    {"jobs_pkey"},
		"snapEffects": {"effects_pkey"},
		"updateJob":   {"jobs_pkey"},
		"updateMany":  {"jobs_pkey"},
		"holders":     {"idempotency_keys_pkey", "jobs_pkey"},
		"claimKeyed":  {"jobs_claim", "key_heads_claim", "jobs_pkey", "jobs_key_live", "jobs_key_ready"},
		"heads":       {"jobs_key_ready", "key_heads_pkey"},
		"keyLive":     {"jobs_key_live"},
	}
	hot := pgstore.HotSQL(s)
	for name, indexes := range want {
		sql, ok := hot[name]
		require.True(t, ok, name)
		nodes := genericPlan(t, tx, sql)
		plan := strings.Join(nodes, "\n")
		for _, bad := range []string{"Seq Scan", "Bitmap", "Hash Join", "Merge Join"} {
			assert.NotContains(t, plan, bad, "%s:\n%s", name, plan)
		}
		for _, ix := range indexes {
			assert.Contains(t, plan, "using "+ix, "%s:\n%s", name, plan)
		}
	}
}

// From a freshly analyzed empty schema, jobs created (one by one and in
// keyed batches), claimed, renewed and committed one by one (each
// statement run often enough for the server to keep a generic plan)
// never scan a table of the store sequentially: the statistics taken
// while the tables were empty decide no plan of the hot path.
func TestHotPathScansNoTableAfterEmptyAnalyze(t *testing.T) {
	e := newEnv(t)
	analyzeEmpty(t, e.store)
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	ctx := pgstore.WithTx(e.ctx, tx)
	news := make([]jobstate.NewJob, 200)
	for i := range news {
		news[i] = jobstate.NewJob{Machine: "work", Payload: []byte(`{}`)}
	}
	_, err = e.eng.CreateMany(ctx, news)
	require.NoError(t, err)
	// The sequential scans counted from here on (COPY, which loaded the
	// jobs, is not a lookup).
	scans := func() map[string]int64 {
		out := map[string]int64{}
		for _, tbl := range storeTables {
			var n int64
			require.NoError(t, tx.QueryRow(e.ctx, "SELECT pg_stat_get_xact_numscans($1::regclass)",
				pgx.Identifier{e.store.Schema(), tbl}.Sanitize()).Scan(&n))
			out[tbl] = n
		}
		return out
	}
	before := scans()
	for i := 0; i < 30; i++ {
		_, err := e.eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: fmt.Sprint("k", i%5)})
		require.NoError(t, err)
		keyed := []jobstate.NewJob{{Machine: "work", Key: fmt.Sprint("k", i%7)}, {Machine: "work", Key: fmt.Sprint("m", i)}}
		_, err = e.eng.CreateMany(ctx, keyed)
		require.NoError(t, err)
	}
	for i := 0; i < 40; i++ {
		var leases []jobstate.Lease
		if i%2 == 0 {
			c, err := e.eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
			require.NoError(t, err)
			leases = append(leases, c.Lease)
		} else {
			cs, err := e.eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"}, 3)
			require.NoError(t, err)
			for _, c := range cs {
				leases = append(leases, c.Lease)
			}
		}
		for _, l := range leases {
			l, err := e.eng.Heartbeat(ctx, l)
			require.NoError(t, err)
			_, err = e.eng.Succeed(ctx, l, jobstate.CommitInput{})
			require.NoError(t, err)
		}
	}
	require.Equal(t, before, scans(), "sequential scans of the store's tables")
}

// The statements a function sends through the store's transaction are
// planned with the session's settings, not with the ones the store's own
// statements are planned with.
func TestFunctionsSeeSessionPlannerSettings(t *testing.T) {
	for _, group := range []int{0, 4} {
		t.Run(fmt.Sprint("group ", group), func(t *testing.T) {
			s := pgtest.StoreWith(t, pgstore.Options{GroupCommit: group})
			ctx := context.Background()
			_, _, err := s.Create(ctx, "m", "key", func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
				require.Equal(t, "on", setting(ctx, t, "enable_seqscan"))
				return jobstate.Write{}, errors.New("no job")
			})
			require.Error(t, err)
			j := newJob("m")
			_, _, err = s.Create(ctx, "m", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
				return jobstate.Write{Job: j, Transitions: creation(j)}, nil
			})
			require.NoError(t, err)
			for _, sort := range []string{"on", "off"} {
				_, err = s.Update(ctx, j.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
					for _, name := range []string{"enable_seqscan", "enable_bitmapscan", "enable_hashjoin", "enable_mergejoin", "enable_sort"} {
						require.Equal(t, "on", setting(ctx, t, name), name)
					}
					require.Equal(t, "auto", setting(ctx, t, "plan_cache_mode"))
					// What a function sets stays set.
					_, err := mustTx(ctx, t).Exec(ctx, "SET LOCAL enable_sort = "+sort)
					require.NoError(t, err)
					w := jobstate.Write{Job: cur.Job}
					w.Job.Version++
					w.Transitions = []jobstate.Transition{{JobID: j.ID, Version: w.Job.Version, From: cur.Job.State, To: cur.Job.State, At: epoch}}
					return w, nil
				})
				require.NoError(t, err)
			}
			_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
				require.Equal(t, "on", setting(ctx, t, "enable_seqscan"))
				return jobstate.Write{}, jobstate.ErrSkip
			})
			require.ErrorIs(t, err, jobstate.ErrNoJob)
		})
	}
}

func mustTx(ctx context.Context, t *testing.T) pgx.Tx {
	t.Helper()
	tx, ok := pgstore.Tx(ctx)
	require.True(t, ok)
	return tx
}

// setting reads a setting through the transaction ctx carries.
func setting(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var v string
	require.NoError(t, mustTx(ctx, t).QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v))
	return v
}

// newJob is a new ready job of machine, as a store takes it.
func newJob(machine string) jobstate.Job {
	return jobstate.Job{ID: uuid.New(), Machine: machine, State: "queued", Kind: jobstate.KindReady, Version: 1, CreatedAt: epoch, UpdatedAt: epoch}
}

// creation is the history record of j's creation.
func creation(j jobstate.Job) []jobstate.Transition {
	return []jobstate.Transition{{JobID: j.ID, Version: 1, To: j.State, At: epoch}}
}
