package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// A connection lost while the function runs fails the call, and nothing
// of it is written: neither the job's write nor what the function wrote
// through the transaction.
func TestConnectionLostMidOperation(t *testing.T) {
	e := newEnv(t)
	marks := e.table("marks", "id int")
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	kill := func(ctx context.Context) {
		tx, ok := pgstore.Tx(ctx)
		require.True(t, ok)
		_, err := tx.Exec(ctx, "INSERT INTO "+marks+" VALUES (1)")
		require.NoError(t, err)
		var pid int
		require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
		_, err = e.pool.Exec(e.ctx, "SELECT pg_terminate_backend($1)", pid)
		require.NoError(t, err)
	}
	_, err = e.store.Update(e.ctx, c.Job.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		kill(ctx)
		j := cur.Job
		j.Version++
		j.Priority = 7
		return jobstate.Write{Job: j}, nil
	})
	require.Error(t, err)
	j, err := e.store.Get(e.ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), j.Version)
	assert.Equal(t, 0, j.Priority)

	_, err = e.eng.Create(context.Background(), jobstate.NewJob{Machine: "work", Key: "k"})
	require.NoError(t, err)
	_, _, err = e.store.Create(e.ctx, "work", "k2", func(ctx context.Context, _ *jobstate.Job) (jobstate.Write, error) {
		kill(ctx)
		j := jobstate.Job{ID: c.Job.ID, Machine: "work", State: "queued", Kind: jobstate.KindReady, Version: 1, CreatedAt: epoch, UpdatedAt: epoch}
		j.ID[0] ^= 0xff
		return jobstate.Write{Job: j}, nil
	})
	require.Error(t, err)
	assert.Equal(t, 0, e.count(marks), "what the functions wrote is gone with them")
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"queued": 2}, n)
	// The pool recovers: the next call works.
	_, err = e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
}

// A call waiting on a locked job gives up when its context ends, without
// calling its function.
func TestContextEndsWhileWaitingForLock(t *testing.T) {
	e := newEnv(t)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := e.store.Update(e.ctx, c.Job.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			close(entered)
			<-release
			return jobstate.Write{Job: cur.Job}, nil
		})
		assert.NoError(t, err)
	}()
	<-entered
	ctx, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
	defer cancel()
	called := false
	_, err = e.store.Update(ctx, c.Job.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		called = true
		return jobstate.Write{Job: cur.Job}, nil
	})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, called)
	close(release)
	wg.Wait()
}

// Payloads of 64 MiB round-trip.
func TestLargePayload(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB payload; not in -short")
	}
	e := newEnv(t)
	payload := make([]byte, 64<<20)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(payload)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work", Payload: payload})
	require.NoError(t, err)
	got, err := e.eng.Get(e.ctx, c.Job.ID)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, got.Payload), "payload differs")
	cl, err := e.eng.Claim(e.ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, cl.Job.Payload))
	j, err := e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{Result: payload[:1<<20]})
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload[:1<<20], j.Result))
}

// Migrate is idempotent and safe when run by many at once.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t) + "_m"
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	var wg sync.WaitGroup
	applied := make([][]int, 6)
	errs := make([]error, 6)
	for i := range applied {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			applied[i], errs[i] = pgstore.Migrate(context.Background(), pool, pgstore.Options{Schema: schema})
		}(i)
	}
	wg.Wait()
	total := 0
	for i := range applied {
		require.NoError(t, errs[i])
		total += len(applied[i])
	}
	assert.Equal(t, pgstore.SchemaVersion, total, "each version applied once")
	again, err := pgstore.Migrate(context.Background(), pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	assert.Empty(t, again)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".jobstate_migrations").Scan(&n))
	assert.Equal(t, pgstore.SchemaVersion, n)

	// A schema from a newer release is refused.
	_, err = pool.Exec(context.Background(), "INSERT INTO "+schema+".jobstate_migrations (version, name) VALUES (999, 'future')")
	require.NoError(t, err)
	_, err = pgstore.Migrate(context.Background(), pool, pgstore.Options{Schema: schema})
	assert.Error(t, err)
}

// The database refuses a second commit and a repeated effect even from a
// writer that bypasses the store.
func TestDatabaseConstraints(t *testing.T) {
	e := newEnv(t)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	cl, err := e.eng.Claim(e.ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)
	_, err = e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	s := e.store.Schema()
	_, err = e.pool.Exec(e.ctx, "UPDATE "+s+".jobs SET earlier_execs = earlier_execs || jsonb_build_object('id', gen_random_uuid(), 'attempt', 9, 'status', 'COMMITTED') WHERE id = $1", c.Job.ID)
	assert.ErrorContains(t, err, "jobs_one_commit")
	_, err = e.pool.Exec(e.ctx, "UPDATE "+s+".jobs SET exec_status = 'COMMITTED' WHERE id = $1 AND exec_status = 'DONE'", c.Job.ID)
	assert.NoError(t, err, "the last execution alone may be committed")
	_, err = e.pool.Exec(e.ctx, "UPDATE "+s+".jobs SET earlier_execs = '[{\"status\": \"DONE\"}]' WHERE id = $1", c.Job.ID)
	assert.ErrorContains(t, err, "jobs_one_commit")
	_, err = e.pool.Exec(e.ctx, "UPDATE "+s+".jobs SET exec_status = 'ABORTED', earlier_execs = '[{\"status\": \"COMMITTED\"}, {\"status\": \"DONE\"}]' WHERE id = $1", c.Job.ID)
	assert.ErrorContains(t, err, "jobs_one_commit", "two among the earlier executions")
	_, err = e.pool.Exec(e.ctx, "UPDATE "+s+".jobs SET earlier_execs = '{}' WHERE id = $1", c.Job.ID)
	assert.ErrorContains(t, err, "jobs_execs")
	_, err = e.pool.Exec(e.ctx, "INSERT INTO "+s+".effects (job_id, name) VALUES ($1, 'x'), ($1, 'x')", c.Job.ID)
	assert.ErrorContains(t, err, "effects_pkey")
	_, err = e.pool.Exec(e.ctx, "INSERT INTO "+s+".transitions (job_id, version, to_state) VALUES ($1, 1, 'x')", c.Job.ID)
	assert.ErrorContains(t, err, "transitions_pkey")
}

// Subscribers hear of jobs made ready by another store on the same
// schema (another process, as far as the listener can tell).
func TestNotifyAcrossStores(t *testing.T) {
	e := newEnv(t)
	other, err := pgstore.New(e.pool, pgstore.Options{Schema: e.store.Schema()})
	require.NoError(t, err)
	defer other.Close()
	ch, stop, err := other.Subscribe(e.ctx, "work")
	require.NoError(t, err)
	defer stop()
	for len(ch) > 0 {
		<-ch
	}
	_, err = e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no signal")
	}
	other.Close()
	// A signal sent before Close may still be buffered; after it the
	// channel must close.
	closed := false
	deadline := time.After(30 * time.Second)
	for !closed {
		select {
		case _, ok := <-ch:
			closed = !ok
		case <-deadline:
			t.Fatal("Close did not end the subscription")
		}
	}
	_, _, err = other.Subscribe(e.ctx)
	assert.True(t, err != nil && !errors.Is(err, context.Canceled))
}
