package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestMigrateFromVersion3: a schema written by version 3 (its rows
// written by the store in a current schema and copied into it), holding
// jobs in flight (leased, committed, retried, ready, done), is brought to
// version 4: every job reads back as it was, without a concurrency key;
// the key's column and indexes are there; the jobs in flight run to their
// end; and a machine limited per key runs beside them, its limit
// enforced.
func TestMigrateFromVersion3(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema, src := olderSchema(t, pool, "_v3", 3)
	clock := jobstate.NewManualClock(epoch)
	limited := workSpec()
	limited.Name = "limited"
	limited.Policy.MaxPerKey = 1
	open := func(schema string) *jobstate.Engine {
		store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		work, err := jobstate.NewDefinition(workSpec())
		require.NoError(t, err)
		lim, err := jobstate.NewDefinition(limited)
		require.NoError(t, err)
		eng, err := jobstate.New(store, jobstate.WithMachines(work, lim), jobstate.WithClock(clock))
		require.NoError(t, err)
		return eng
	}
	eng := open(src)
	create := func() uuid.UUID {
		t.Helper()
		clock.Advance(time.Millisecond)
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Payload: []byte(`{}`)})
		require.NoError(t, err)
		return c.Job.ID
	}
	claim := func(machine string) (jobstate.Claimed, error) {
		clock.Advance(time.Millisecond)
		return eng.Claim(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"})
	}
	done := create()
	c, err := claim("work")
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
	require.NoError(t, err)
	committed := create()
	c, err = claim("work")
	require.NoError(t, err)
	_, err = eng.Commit(ctx, c.Lease, jobstate.CommitInput{Result: []byte("half")})
	require.NoError(t, err)
	committedLease := c.Lease
	leased := create()
	leasedClaim, err := claim("work")
	require.NoError(t, err)
	require.Equal(t, leased, leasedClaim.Job.ID)
	retried := create()
	c, err = claim("work")
	require.NoError(t, err)
	_, err = eng.Fail(ctx, c.Lease, errors.New("flaky"))
	require.NoError(t, err)
	ready := create()
	all := []uuid.UUID{done, committed, retried, leased, ready}
	read := func(eng *jobstate.Engine) map[uuid.UUID][]any {
		out := map[uuid.UUID][]any{}
		for _, id := range all {
			j, err := eng.Get(ctx, id)
			require.NoError(t, err)
			h, err := eng.History(ctx, id)
			require.NoError(t, err)
			x, err := eng.Store().Executions(ctx, id)
			require.NoError(t, err)
			out[id] = []any{j, h, x}
		}
		return out
	}
	before := read(eng)

	copyRows(t, pool, src, schema)
	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	assert.Equal(t, versionsAfter(3), applied)
	var def string
	require.NoError(t, pool.QueryRow(ctx, `SELECT column_default FROM information_schema.columns
 WHERE table_schema = $1 AND table_name = 'jobs' AND column_name = 'concurrency_key' AND is_nullable = 'NO'`, schema).Scan(&def))
	assert.Equal(t, "''::text", def)
	for _, index := range []string{"jobs_key_live", "jobs_key_ready"} {
		require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, schema, index).Scan(&def))
		assert.Contains(t, def, "concurrency_key <> ''", "%s is partial", index)
	}

	eng = open(schema)
	assert.Equal(t, before, read(eng), "every job reads back as it was")
	for _, id := range all {
		j, err := eng.Get(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, j.ConcurrencyKey)
	}

	// A machine limited per key, beside the jobs of version 3.
	a1, err := eng.Create(ctx, jobstate.NewJob{Machine: "limited", ConcurrencyKey: "a"})
	require.NoError(t, err)
	clock.Advance(time.Millisecond)
	a2, err := eng.Create(ctx, jobstate.NewJob{Machine: "limited", ConcurrencyKey: "a"})
	require.NoError(t, err)
	first, err := claim("limited")
	require.NoError(t, err)
	assert.Equal(t, a1.Job.ID, first.Job.ID)
	assert.Equal(t, "a", first.Job.ConcurrencyKey)
	_, err = claim("limited")
	assert.ErrorIs(t, err, jobstate.ErrNoJob, "a2 waits while a1 runs")
	_, err = eng.ClaimJob(ctx, a2.Job.ID, jobstate.ClaimRequest{Machine: "limited", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrKeyLimit)
	_, err = eng.Succeed(ctx, first.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	second, err := claim("limited")
	require.NoError(t, err)
	assert.Equal(t, a2.Job.ID, second.Job.ID, "a's next job once a1 finished")

	// Every job of version 3 runs to its end.
	_, err = eng.Finish(ctx, committedLease)
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, leasedClaim.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	clock.Set(epoch.Add(time.Hour))
	for {
		c, err := claim("work")
		if errors.Is(err, jobstate.ErrNoJob) {
			break
		}
		require.NoError(t, err)
		_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
		require.NoError(t, err)
	}
	for _, id := range all {
		j, err := eng.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, jobstate.KindTerminal, j.Kind, "job %s ends", id)
	}
}
