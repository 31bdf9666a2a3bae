package sqlitestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/sqlitestore/internal/crashmachine"
)

// engineOn returns an engine on s running the crash test's machine, with
// a manual clock.
func engineOn(t *testing.T, s jobstate.Store) *jobstate.Engine {
	t.Helper()
	def, err := jobstate.NewDefinition(crashmachine.Spec())
	require.NoError(t, err)
	eng, err := jobstate.New(s, jobstate.WithMachines(def),
		jobstate.WithClock(jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	require.NoError(t, err)
	return eng
}

// receipts counts the rows of the program's own table.
func receipts(t *testing.T, s *sqlitestore.Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "SELECT count(*) FROM "+crashmachine.Table).Scan(&n))
	return n
}

// TestWithTxCommitsTogether: a job created with a caller's transaction
// exists exactly when the caller's own row written in it does.
func TestWithTxCommitsTogether(t *testing.T) {
	ctx := context.Background()
	s := open(t, sqlitestore.Options{})
	_, err := s.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	eng := engineOn(t, s)

	for _, commit := range []bool{false, true} {
		tx, err := s.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (x'00', 'caller')")
		require.NoError(t, err)
		c, err := eng.Create(sqlitestore.WithTx(ctx, tx), jobstate.NewJob{Machine: crashmachine.Name, Key: "order-1"})
		require.NoError(t, err)
		// Reads with the transaction see the job; reads without do not yet.
		_, err = eng.Get(sqlitestore.WithTx(ctx, tx), c.Job.ID)
		require.NoError(t, err)
		_, err = s.Get(ctx, c.Job.ID)
		require.ErrorIs(t, err, jobstate.ErrNotFound)
		if commit {
			require.NoError(t, tx.Commit())
			_, err = s.Get(ctx, c.Job.ID)
			require.NoError(t, err)
			assert.Equal(t, 1, receipts(t, s))
		} else {
			require.NoError(t, tx.Rollback())
			_, err = s.Get(ctx, c.Job.ID)
			require.ErrorIs(t, err, jobstate.ErrNotFound, "rolled back with the caller's row")
			assert.Equal(t, 0, receipts(t, s))
		}
	}
	// The key is held by the committed job only.
	again, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name, Key: "order-1"})
	require.NoError(t, err)
	assert.True(t, again.Existing)
}

// TestWithTxFailedCallKeepsTransaction: a store call that fails inside a
// caller's transaction rolls back to its savepoint; the caller's earlier
// writes stay and the transaction can commit.
func TestWithTxFailedCallKeepsTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, sqlitestore.Options{})
	_, err := s.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	tx, err := s.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (x'00', 'caller')")
	require.NoError(t, err)
	boom := errors.New("boom")
	_, _, err = s.Create(sqlitestore.WithTx(ctx, tx), "m", "", func(ctx context.Context, _ *jobstate.Job) (jobstate.Write, error) {
		inner, ok := sqlitestore.Tx(ctx)
		require.True(t, ok)
		_, err := inner.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (x'01', 'inside')")
		require.NoError(t, err)
		return jobstate.Write{}, boom
	})
	require.ErrorIs(t, err, boom)
	require.NoError(t, tx.Commit())
	assert.Equal(t, 1, receipts(t, s), "the caller's row stays, the failed call's is gone")
}

// TestWithTxNil: a nil transaction is refused before any function runs.
func TestWithTxNil(t *testing.T) {
	s := open(t, sqlitestore.Options{})
	ctx := sqlitestore.WithTx(context.Background(), nil)
	called := false
	_, _, err := s.Create(ctx, "m", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
		called = true
		return jobstate.Write{}, nil
	})
	require.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.False(t, called)
	_, err = s.Count(ctx, "m")
	require.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, ok := sqlitestore.Tx(ctx)
	assert.False(t, ok)
}

// TestCommitEffectInStoreTransaction: a commit effect's row, written
// through Tx, commits with the job; when the commit is refused (another
// execution committed first), the effect's row is not written.
func TestCommitEffectInStoreTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, sqlitestore.Options{})
	_, err := s.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	eng := engineOn(t, s)
	effect := func(ctx context.Context, j jobstate.Job) error {
		tx, ok := sqlitestore.Tx(ctx)
		if !ok {
			return errors.New("no store transaction")
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (?, 'w')", j.ID[:])
		return err
	}
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
	c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: "w"})
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: effect})
	require.NoError(t, err)
	assert.Equal(t, 1, receipts(t, s))
	// The same lease again: refused, and its effect's row not kept.
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: effect})
	require.Error(t, err)
	assert.Equal(t, 1, receipts(t, s))

	// An effect that fails leaves neither its row nor the commit.
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
	c2, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: "w"})
	require.NoError(t, err)
	boom := errors.New("boom")
	_, err = eng.Succeed(ctx, c2.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
		if err := effect(ctx, j); err != nil {
			return err
		}
		return boom
	}})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, receipts(t, s))
	got, err := eng.Get(ctx, c2.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("running"), got.State)
}
