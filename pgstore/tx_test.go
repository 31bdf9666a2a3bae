package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
)

// A job created in the caller's transaction exists exactly when the
// caller's own row does.
func TestCreateInCallersTransaction(t *testing.T) {
	e := newEnv(t)
	orders := e.table("orders", "id text PRIMARY KEY")
	for _, commit := range []bool{false, true} {
		tx, err := e.pool.Begin(e.ctx)
		require.NoError(t, err)
		id := "rolled-back"
		if commit {
			id = "committed"
		}
		_, err = tx.Exec(e.ctx, "INSERT INTO "+orders+" VALUES ($1)", id)
		require.NoError(t, err)
		c, err := e.eng.Create(pgstore.WithTx(e.ctx, tx), jobstate.NewJob{Machine: "work", Payload: []byte(id), Key: id})
		require.NoError(t, err)
		// Inside the transaction the job is visible; outside, not yet.
		_, err = e.store.Get(pgstore.WithTx(e.ctx, tx), c.Job.ID)
		require.NoError(t, err)
		_, err = e.store.Get(e.ctx, c.Job.ID)
		require.ErrorIs(t, err, jobstate.ErrNotFound)
		if commit {
			require.NoError(t, tx.Commit(e.ctx))
		} else {
			require.NoError(t, tx.Rollback(e.ctx))
		}
		_, err = e.store.Get(e.ctx, c.Job.ID)
		var rows int
		require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+orders+" WHERE id = $1", id).Scan(&rows))
		if commit {
			assert.NoError(t, err, "the job commits with the row")
			assert.Equal(t, 1, rows)
		} else {
			assert.ErrorIs(t, err, jobstate.ErrNotFound, "the job rolls back with the row")
			assert.Equal(t, 0, rows)
			// The key was not taken either.
			again, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work", Key: id})
			require.NoError(t, err)
			assert.False(t, again.Existing)
		}
	}
}

// A store call that fails inside the caller's transaction leaves it
// usable: it rolls back to its own savepoint.
func TestFailureInCallersTransactionKeepsIt(t *testing.T) {
	e := newEnv(t)
	orders := e.table("orders", "id text PRIMARY KEY")
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer tx.Rollback(e.ctx)
	ctx := pgstore.WithTx(e.ctx, tx)
	boom := errors.New("boom")
	_, _, err = e.store.Create(ctx, "work", "", func(ctx context.Context, _ *jobstate.Job) (jobstate.Write, error) {
		tx, ok := pgstore.Tx(ctx)
		require.True(t, ok)
		_, err := tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ('inside')")
		require.NoError(t, err)
		return jobstate.Write{}, boom
	})
	require.ErrorIs(t, err, boom)
	_, err = tx.Exec(e.ctx, "INSERT INTO "+orders+" VALUES ('after')")
	require.NoError(t, err, "the caller's transaction goes on")
	require.NoError(t, tx.Commit(e.ctx))
	var ids []string
	rows, err := e.pool.Query(e.ctx, "SELECT id FROM "+orders)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	assert.Equal(t, []string{"after"}, ids, "what the failed call wrote is gone")
}

// A commit effect that writes the user's table through the store's
// transaction commits with the state change, or not at all.
func TestCommitEffectInStoreTransaction(t *testing.T) {
	e := newEnv(t)
	receipts := e.table("receipts", "job uuid PRIMARY KEY")
	insert := func(ctx context.Context, j jobstate.Job) error {
		tx, ok := pgstore.Tx(ctx)
		if !ok {
			return errors.New("no transaction in the effect's context")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+receipts+" VALUES ($1)", j.ID)
		return err
	}
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	cl, err := e.eng.Claim(e.ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)

	// The effect writes, then fails: its row goes with the refused commit.
	boom := errors.New("boom")
	_, err = e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
		if err := insert(ctx, j); err != nil {
			return err
		}
		return boom
	}})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, e.count(receipts))
	j, err := e.eng.Get(e.ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("running"), j.State)

	// The effect writes and succeeds: row and commit together.
	j, err = e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{Effect: insert})
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("done"), j.State)
	assert.Equal(t, 1, e.count(receipts))

	// A second commit is refused before its effect runs: still one row.
	_, err = e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{Effect: insert})
	require.Error(t, err)
	assert.Equal(t, 1, e.count(receipts))
}

// Inside a store function, Tx's transaction cannot be ended by the user.
func TestFunctionCannotEndStoreTransaction(t *testing.T) {
	e := newEnv(t)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	_, err = e.store.Update(e.ctx, c.Job.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		tx, ok := pgstore.Tx(ctx)
		require.True(t, ok)
		assert.ErrorIs(t, tx.Commit(ctx), pgstore.ErrTxOwned)
		assert.ErrorIs(t, tx.Rollback(ctx), pgstore.ErrTxOwned)
		return jobstate.Write{Job: cur.Job}, nil
	})
	require.NoError(t, err)
}

// Outside any store call there is no transaction to find.
func TestTxOutsideStoreCall(t *testing.T) {
	_, ok := pgstore.Tx(context.Background())
	assert.False(t, ok)
}

// CreateMany in the caller's transaction: the jobs commit or roll back
// with the caller's rows (a keyed job's hold on its key too), and a
// failed batch leaves the transaction usable, with nothing of the batch
// in it.
func TestCreateManyInCallersTransaction(t *testing.T) {
	spec := workSpec()
	spec.Create.Guard = func(_ context.Context, in jobstate.GuardInput) error {
		if string(in.Job.Payload) == "bad" {
			return errors.New("bad payload")
		}
		return nil
	}
	e := newEnv(t, spec)
	orders := e.table("orders", "id text PRIMARY KEY")
	batch := []jobstate.NewJob{{Machine: "work", Payload: []byte("a")}, {Machine: "work", Payload: []byte("b"), Key: "order-b"}}
	for _, commit := range []bool{false, true} {
		tx, err := e.pool.Begin(e.ctx)
		require.NoError(t, err)
		id := fmt.Sprint("order-", commit)
		_, err = tx.Exec(e.ctx, "INSERT INTO "+orders+" VALUES ($1)", id)
		require.NoError(t, err)
		ctx := pgstore.WithTx(e.ctx, tx)

		// A batch that fails in the store (the second job's guard
		// refuses, after the first was built) leaves the transaction
		// usable, with no job in it.
		_, err = e.eng.CreateMany(ctx, []jobstate.NewJob{{Machine: "work", Payload: []byte("a")}, {Machine: "work", Payload: []byte("bad")}})
		require.ErrorIs(t, err, jobstate.ErrGuardRefused)
		page, err := e.eng.List(ctx, jobstate.ListQuery{Machine: "work"}, "")
		require.NoError(t, err, "the caller's transaction is usable")
		require.Empty(t, page.Jobs, "nothing of the failed batch")

		jobs, err := e.eng.CreateMany(ctx, batch)
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		assert.False(t, jobs[1].Existing, "the key is free: a rolled back holder took it with its transaction")
		for _, j := range jobs {
			_, err = e.store.Get(ctx, j.Job.ID)
			require.NoError(t, err, "visible inside the transaction")
			_, err = e.store.Get(e.ctx, j.Job.ID)
			require.ErrorIs(t, err, jobstate.ErrNotFound, "not outside it yet")
		}
		if commit {
			require.NoError(t, tx.Commit(e.ctx))
		} else {
			require.NoError(t, tx.Rollback(e.ctx))
		}
		var rows int
		require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+orders+" WHERE id = $1", id).Scan(&rows))
		for _, j := range jobs {
			_, err = e.store.Get(e.ctx, j.Job.ID)
			if commit {
				assert.NoError(t, err, "the jobs commit with the row")
			} else {
				assert.ErrorIs(t, err, jobstate.ErrNotFound, "the jobs roll back with the row")
			}
		}
		assert.Equal(t, map[bool]int{true: 1, false: 0}[commit], rows)
		if commit {
			again, err := e.eng.CreateMany(e.ctx, batch[1:])
			require.NoError(t, err)
			assert.True(t, again[0].Existing, "the committed holder keeps its key")
			assert.Equal(t, jobs[1].Job.ID, again[0].Job.ID)
		}
	}
}

// A keyed CreateMany with more keys than the server's lock table can
// hold is refused with ErrInvalidArgument, naming the setting, creates
// nothing, and leaves the store usable.
func TestCreateManyKeysBeyondTheLockTable(t *testing.T) {
	e := newEnv(t)
	var slots int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT current_setting('max_locks_per_transaction')::int *
 (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int)`).Scan(&slots))
	// The shared lock table takes somewhat more than its nominal size
	// from the server's spare shared memory: ten times it is beyond.
	news := make([]jobstate.NewJob, 10*slots)
	for i := range news {
		news[i] = jobstate.NewJob{Machine: "work", Key: fmt.Sprint("k", i)}
	}
	got, err := e.eng.CreateMany(e.ctx, news)
	require.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "max_locks_per_transaction")
	assert.Empty(t, got)
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Empty(t, n, "nothing created")

	created, err := e.eng.CreateMany(e.ctx, news[:100])
	require.NoError(t, err, "the store is usable, and a batch that fits is created")
	assert.Len(t, created, 100)
}
