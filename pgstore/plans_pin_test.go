package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// bump is an update function that writes a new version of the job in the
// same state.
func bump(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
	w := jobstate.Write{Job: cur.Job}
	w.Job.Version++
	w.Transitions = []jobstate.Transition{{JobID: cur.Job.ID, Version: w.Job.Version, From: cur.Job.State, To: cur.Job.State, At: epoch}}
	return w, nil
}

// createJobs creates n ready jobs of machine and returns them.
func createJobs(t *testing.T, s *pgstore.Store, machine string, n int) []jobstate.Job {
	t.Helper()
	var out []jobstate.Job
	for range n {
		j := newJob(machine)
		got, _, err := s.Create(context.Background(), machine, "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			return jobstate.Write{Job: j, Transitions: creation(j)}, nil
		})
		require.NoError(t, err)
		out = append(out, got)
	}
	return out
}

// seesSessionPlans checks, through the transaction ctx carries, that the
// planner settings are the session's: with a query, and with an Exec (the
// path a grouped member's Exec takes) that records the setting it ran
// with. Failures are reported without stopping the test, so that the
// store's function returns and its transaction ends.
func seesSessionPlans(ctx context.Context, t *testing.T, when string) {
	t.Helper()
	tx := mustTx(ctx, t)
	for _, name := range []string{"enable_seqscan", "enable_bitmapscan", "enable_hashjoin", "enable_mergejoin", "enable_sort", "jit"} {
		var v string
		assert.NoError(t, tx.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v), when)
		assert.Equal(t, "on", v, when+": "+name)
	}
	var mode string
	assert.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&mode), when)
	assert.Equal(t, "auto", mode, when+": plan_cache_mode")
	_, err := tx.Exec(ctx, "SELECT set_config('jobstate_test.seen', current_setting('enable_seqscan'), true)")
	assert.NoError(t, err, when)
	var seen string
	assert.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('jobstate_test.seen')").Scan(&seen), when)
	assert.Equal(t, "on", seen, when+": enable_seqscan seen by an Exec")
}

// A function's statements see the session's planner settings, also when
// hot batches of the same transaction (a nested store call's lock and
// write, the claim of a batch's next job) pinned the plans again after
// its first statement restored them, and in a nested transaction the
// function began.
func TestFunctionsSeeSessionPlansAfterHotBatches(t *testing.T) {
	for _, group := range []int{0, 4} {
		t.Run(fmt.Sprint("group ", group), func(t *testing.T) {
			s := pgtest.StoreWith(t, pgstore.Options{GroupCommit: group})
			ctx := context.Background()
			jobs := createJobs(t, s, "m", 3)
			other := createJobs(t, s, "other", 1)[0]
			check := func(ctx context.Context, when string) {
				seesSessionPlans(ctx, t, when+", first statement")
				_, err := s.Update(ctx, other.ID, bump)
				assert.NoError(t, err)
				seesSessionPlans(ctx, t, when+", after a nested update")
				sp, err := mustTx(ctx, t).Begin(ctx)
				assert.NoError(t, err)
				_, err = s.Update(ctx, other.ID, bump)
				assert.NoError(t, err)
				var v string
				assert.NoError(t, sp.QueryRow(ctx, "SELECT current_setting('enable_seqscan')").Scan(&v))
				assert.Equal(t, "on", v, when+", nested transaction after a nested update")
				assert.NoError(t, sp.Commit(ctx))
				seesSessionPlans(ctx, t, when+", after the nested transaction")
			}
			_, err := s.Update(ctx, jobs[0].ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
				check(ctx, "update")
				return bump(ctx, cur)
			})
			require.NoError(t, err)
			_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
				check(ctx, "claim")
				return jobstate.Write{}, jobstate.ErrSkip
			})
			require.ErrorIs(t, err, jobstate.ErrNoJob)
			calls := 0
			_, err = s.ClaimBatch(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, 2, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
				calls++
				check(ctx, fmt.Sprint("claim batch, job ", calls))
				if calls == 1 {
					// Rolled back to the function's savepoint.
					return jobstate.Write{}, jobstate.ErrSkip
				}
				return bump(ctx, cur)
			})
			require.NoError(t, err)
			require.Equal(t, 3, calls)
		})
	}
}

// A store method that runs in a caller's transaction (WithTx) gives the
// caller its own planner settings back: a setting the caller changed
// stays changed, the ones the store pins are as they were, and the
// method's function sees the caller's settings too.
func TestWithTxKeepsCallersPlannerSettings(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	j := createJobs(t, s, "m", 1)[0]
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL enable_hashjoin = off")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan")
	require.NoError(t, err)
	caller := func(when string) {
		t.Helper()
		var seq, hash, sort, jit, mode string
		require.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin'), current_setting('enable_sort'), current_setting('jit'), current_setting('plan_cache_mode')").Scan(&seq, &hash, &sort, &jit, &mode))
		require.Equal(t, "on", seq, when)
		require.Equal(t, "off", hash, when)
		require.Equal(t, "on", sort, when)
		require.Equal(t, "on", jit, when)
		require.Equal(t, "force_custom_plan", mode, when)
	}
	tctx := pgstore.WithTx(ctx, tx)
	_, err = s.Update(tctx, j.ID, bump)
	require.NoError(t, err)
	caller("after an update")
	_, err = s.Update(tctx, j.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		var seq, hash string
		assert.NoError(t, mustTx(ctx, t).QueryRow(ctx, "SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin')").Scan(&seq, &hash))
		assert.Equal(t, "on", seq)
		assert.Equal(t, "off", hash)
		return bump(ctx, cur)
	})
	require.NoError(t, err)
	caller("after an update whose function ran a statement")
	_, err = s.Update(tctx, j.ID, func(context.Context, jobstate.Snapshot) (jobstate.Write, error) {
		return jobstate.Write{}, fmt.Errorf("refused")
	})
	require.Error(t, err)
	caller("after an update that failed")
	_, err = s.ClaimNext(tctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		return jobstate.Write{}, jobstate.ErrSkip
	})
	require.ErrorIs(t, err, jobstate.ErrNoJob)
	caller("after a claim")
	_, err = s.List(tctx, jobstate.ListQuery{Machine: "m", Limit: 10})
	require.NoError(t, err)
	caller("after a listing")
}

// planCounter counts the statements that pin and restore the plans, as
// sent to the server.
type planCounter struct {
	pins, restores atomic.Int64
}

func (c *planCounter) count(sql string) {
	c.pins.Add(int64(strings.Count(sql, "set_config('enable_seqscan', 'off', true)")))
	c.restores.Add(int64(strings.Count(sql, "set_config('enable_seqscan', split_part(v, ',', 1), true)")))
}

func (c *planCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}

func (c *planCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *planCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *planCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}

func (c *planCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns the pins and restores counted since the last take.
func (c *planCounter) take() (pins, restores int64) {
	return c.pins.Swap(0), c.restores.Swap(0)
}

// A transaction of the store pins its plans once and restores them only
// for the statements of a function, or for a caller's transaction.
func TestPlansPinnedOncePerTransaction(t *testing.T) {
	ctx := context.Background()
	cfg := pgtest.Pool(t).Config()
	counter := &planCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Options{Schema: pgtest.Schema(t)})
	require.NoError(t, err)
	defer s.Close()
	jobs := createJobs(t, s, "m", 3)
	counter.take()
	expect := func(what string, pins, restores int64) {
		t.Helper()
		p, r := counter.take()
		require.Equal(t, pins, p, what+": pins")
		require.Equal(t, restores, r, what+": restores")
	}

	_, err = s.Update(ctx, jobs[0].ID, bump)
	require.NoError(t, err)
	expect("update", 1, 0)

	_, err = s.Update(ctx, jobs[0].ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		_, err := mustTx(ctx, t).Exec(ctx, "SELECT 1")
		if err != nil {
			return jobstate.Write{}, err
		}
		return bump(ctx, cur)
	})
	require.NoError(t, err)
	expect("update whose function runs a statement", 2, 1)

	_, err = s.ClaimBatch(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, 3, bump)
	require.NoError(t, err)
	expect("claim batch of three", 1, 0)

	_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, bump)
	require.NoError(t, err)
	expect("claim", 1, 0)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.Update(pgstore.WithTx(ctx, tx), jobs[1].ID, bump)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	expect("update in a caller's transaction", 1, 1)
}

// The hot statements are planned once per connection: in a transaction
// of the store they run with plan_cache_mode = force_generic_plan, so
// the server keeps the generic plan (which pinPlans makes the index walk
// the statement was written for) instead of planning again for the
// values of each call, as it would for a statement whose custom plans
// look cheaper than the generic one (the update of many jobs from
// arrays).
func TestHotStatementsPlannedOnce(t *testing.T) {
	ctx := context.Background()
	cfg := pgtest.Pool(t).Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	hot := map[string]bool{}
	for _, group := range []int{0, 4} {
		s, err := pgstore.New(pool, pgstore.Options{Schema: pgtest.Schema(t), GroupCommit: group})
		require.NoError(t, err)
		for _, sql := range pgstore.HotSQL(s) {
			hot[sql] = true
		}
		jobs := createJobs(t, s, "m", 12)
		for i := 0; i < 6; i++ {
			_, err = s.ClaimBatch(ctx, jobstate.ClaimQuery{Machine: "m", Now: epoch}, 2, bump)
			require.NoError(t, err)
			_, err = s.Update(ctx, jobs[i].ID, bump)
			require.NoError(t, err)
		}
		s.Close()
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	rows, err := conn.Query(ctx, "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
	require.NoError(t, err)
	seen := 0
	for rows.Next() {
		var sql string
		var generic, custom int64
		require.NoError(t, rows.Scan(&sql, &generic, &custom))
		if !hot[sql] {
			continue
		}
		seen++
		assert.Zero(t, custom, "custom plans of %.60q", sql)
		assert.Positive(t, generic, "generic plans of %.60q", sql)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, seen, 5, "hot statements prepared on the connection")
}
