package memstore

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// TestNoRefusalAfterFunc: once a function has returned a valid Write, the
// store applies it: it checks its context, the job's existence and
// everything else that does not depend on the Write before calling the
// function, not after, even when the context is cancelled, or jobs (the
// key's holder among them) are pruned, while the function runs.
func TestNoRefusalAfterFunc(t *testing.T) {
	t.Run("Update", func(t *testing.T) {
		s := New()
		j := put(t, s, readyJob("m", sec(0)))
		ctx, cancel := context.WithCancel(context.Background())
		got, err := s.Update(ctx, j.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			cancel()
			_, err := s.Prune(context.Background(), sec(1000), 0) // finds nothing to do with this job
			require.NoError(t, err)
			w := jobstate.Write{Job: cur.Job}
			w.Job.Version++
			w.Job.State, w.Job.Kind, w.Job.CompletedAt = "done", jobstate.KindTerminal, sec(1)
			return w, nil
		})
		require.NoError(t, err)
		assert.Equal(t, int64(2), got.Version)
	})
	t.Run("Create with key", func(t *testing.T) {
		s := New()
		old := terminalJob("m", sec(0))
		old.IdempotencyKey = "k"
		put(t, s, old)
		ctx, cancel := context.WithCancel(context.Background())
		nj := readyJob("m", sec(5))
		nj.IdempotencyKey = "k"
		got, created, err := s.Create(ctx, "m", "k", func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
			require.NotNil(t, existing)
			cancel()
			n, err := s.Prune(context.Background(), sec(1000), 0) // deletes the key's holder
			require.NoError(t, err)
			require.Equal(t, 1, n)
			return creation(nj), nil
		})
		require.NoError(t, err)
		assert.True(t, created)
		assert.Equal(t, nj.ID, got.ID)
		assert.Equal(t, 1, s.Len())
		_, _, err = s.Create(context.Background(), "m", "k", func(_ context.Context, existing *jobstate.Job) (jobstate.Write, error) {
			require.NotNil(t, existing)
			assert.Equal(t, nj.ID, existing.ID, "the new job holds the key")
			return jobstate.Write{}, nil
		})
		require.NoError(t, err)
	})
	t.Run("Create without key", func(t *testing.T) {
		s := New()
		ctx, cancel := context.WithCancel(context.Background())
		nj := readyJob("m", sec(5))
		_, created, err := s.Create(ctx, "m", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			cancel()
			return creation(nj), nil
		})
		require.NoError(t, err)
		assert.True(t, created)
	})
	t.Run("ClaimNext", func(t *testing.T) {
		s := New()
		a := put(t, s, readyJob("m", sec(0)))
		put(t, s, terminalJob("m", sec(0)))
		ctx, cancel := context.WithCancel(context.Background())
		got, err := s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: sec(10)}, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			cancel()
			n, err := s.Prune(context.Background(), sec(1000), 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			w := jobstate.Write{Job: cur.Job}
			w.Job.Version++
			w.Job.State, w.Job.Kind = "run", jobstate.KindActive
			return w, nil
		})
		require.NoError(t, err)
		assert.Equal(t, a.ID, got.ID)
		assert.Equal(t, jobstate.KindActive, got.Kind)
	})
	t.Run("checked before the function", func(t *testing.T) {
		s := New()
		j := put(t, s, readyJob("m", sec(0)))
		called := false
		fn := func(context.Context, jobstate.Snapshot) (jobstate.Write, error) {
			called = true
			return jobstate.Write{}, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Update(ctx, j.ID, fn)
		assert.ErrorIs(t, err, context.Canceled)
		_, err = s.Update(context.Background(), readyJob("m", sec(0)).ID, fn)
		assert.ErrorIs(t, err, jobstate.ErrNotFound)
		_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: sec(1)}, fn)
		assert.ErrorIs(t, err, context.Canceled)
		_, _, err = s.Create(ctx, "m", "k", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			called = true
			return jobstate.Write{}, nil
		})
		assert.ErrorIs(t, err, context.Canceled)
		assert.False(t, called, "no function runs when the store refuses")
	})
}
