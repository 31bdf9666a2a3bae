package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestPruneDeletesEverythingOfAJob: Prune deletes a finished job's rows
// from every table (executions, history, effects, key), and nothing of a
// job it keeps. The schema has no foreign keys to cascade, so this is the
// store's own work.
func TestPruneDeletesEverythingOfAJob(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	spec := workSpec()
	spec.Effects = []jobstate.EffectSpec{{Name: "notify", Run: func(context.Context, jobstate.Job) error { return nil }}}
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	clock := jobstate.NewManualClock(epoch)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock))
	require.NoError(t, err)

	run := func(key string, finish bool) uuid.UUID {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: key})
		require.NoError(t, err)
		_, err = eng.Apply(ctx, c.Job.ID, "notify", jobstate.Call{})
		require.NoError(t, err)
		cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, c.Job.ID, cl.Job.ID)
		if finish {
			_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{})
			require.NoError(t, err)
		}
		return c.Job.ID
	}
	done := run("k-done", true)
	kept := run("k-kept", false)

	rows := func(id uuid.UUID) map[string]int {
		out := map[string]int{}
		for _, table := range []string{"jobs", "transitions", "effects", "idempotency_keys"} {
			col := "job_id"
			if table == "jobs" {
				col = "id"
			}
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+"."+table+" WHERE "+col+" = $1", id).Scan(&n))
			out[table] = n
		}
		return out
	}
	for _, id := range []uuid.UUID{done, kept} {
		for table, n := range rows(id) {
			require.Positive(t, n, "job %s has rows in %s before the prune", id, table)
		}
	}
	keptBefore := rows(kept)

	clock.Advance(time.Hour)
	n, err := eng.Prune(ctx, time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one finished job pruned")
	for table, n := range rows(done) {
		assert.Zero(t, n, "rows of the pruned job left in %s", table)
	}
	assert.Equal(t, keptBefore, rows(kept), "the job kept lost rows")

	// The key is free again: a new job takes it.
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k-done"})
	require.NoError(t, err)
	assert.False(t, c.Existing, "the pruned job's key was not freed")
	assert.NotEqual(t, done, c.Job.ID)
}
