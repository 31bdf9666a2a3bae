package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// errNotStarted is what a test effect returns when what it waits for
// never happened (a guard against a hang: the test then fails).
var errNotStarted = errors.New("the next handler did not start")

// TestCommitsAheadFreesSlot: with one slot and one commit ahead, the next
// job's handler runs while the first job's commit effect is still in
// flight; Drain waits for that commit, and each job commits once.
func TestCommitsAheadFreesSlot(t *testing.T) {
	e := newEnv(t)
	a := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("a")})
	b := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("b")})
	bStarted := make(chan struct{})
	var overlapped atomic.Bool
	var ledger jobstatetest.Ledger
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if string(tk.Job().Payload) == "b" {
			close(bStarted)
			return jobstate.CommitInput{Effect: ledger.Effect}, nil
		}
		return jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
			select {
			case <-bStarted:
				overlapped.Store(true)
			case <-time.After(time.Minute):
				return errNotStarted
			}
			return ledger.Effect(ctx, j)
		}}, nil
	})
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithCommitsAhead(1))...)
	assert.Equal(t, 2, e.Drain(w))
	assert.True(t, overlapped.Load(), "the second handler ran while the first commit was in flight")
	e.AssertState(a.ID, done)
	e.AssertState(b.ID, done)
	e.AssertAppliedOnce(&ledger, a.ID, b.ID)
	e.AssertCommittedOnce(a.ID)
	e.AssertCommittedOnce(b.ID)
}

// TestCommitsAheadZeroHoldsSlot: with no commits ahead, a handler's slot
// is held until its job has committed and finished.
func TestCommitsAheadZeroHoldsSlot(t *testing.T) {
	e := newEnv(t)
	var ids [5]jobstate.Job
	for i := range ids {
		ids[i] = e.Create(jobstate.NewJob{Machine: "task"})
	}
	var unfinished atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		for _, j := range ids {
			if got := e.Get(j.ID); got.ID != tk.Job().ID && got.Kind == jobstate.KindActive {
				unfinished.Add(1)
			}
		}
		return ok()
	})
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithCommitsAhead(0))...)
	assert.Equal(t, len(ids), e.Drain(w))
	assert.Zero(t, unfinished.Load(), "a handler started while another job was still active")
	for _, j := range ids {
		e.AssertState(j.ID, done)
	}
}

// TestCommitsAheadBound: no more than the bound of commits are in flight
// at once; a handler that returns when the bound is reached waits.
func TestCommitsAheadBound(t *testing.T) {
	e := newEnv(t)
	const jobs, bound = 8, 2
	var created []jobstate.Job
	for range jobs {
		created = append(created, e.Create(jobstate.NewJob{Machine: "task"}))
	}
	var inflight, peak atomic.Int64
	gate := make(chan struct{})
	var closed atomic.Bool
	effect := func(context.Context, jobstate.Job) error {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n >= bound && closed.CompareAndSwap(false, true) {
			close(gate)
		}
		select {
		case <-gate:
			return nil
		case <-time.After(time.Minute):
			return errNotStarted
		}
	}
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: effect}, nil
	})
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithCommitsAhead(bound))...)
	assert.Equal(t, jobs, e.Drain(w))
	assert.Equal(t, int64(bound), peak.Load(), "commits in flight at most")
	for _, j := range created {
		e.AssertState(j.ID, done)
		e.AssertCommittedOnce(j.ID)
	}
}

// TestRunWaitsForCommitsAhead: a graceful stop while a commit is in flight
// in the background lets it end before Run returns. The commit's effect
// stops the worker and holds the commit until the shutdown is waiting on
// the grace period (its timer on the manual clock, which nothing
// advances); a Run that did not wait for the commit would have returned
// by then, and the effect sees it.
func TestRunWaitsForCommitsAhead(t *testing.T) {
	e := newEnv(t)
	j := e.Create(jobstate.NewJob{Machine: "task"})
	const grace = 5 * time.Second
	graceAt := e.Clock.Now().Add(grace)
	runReturned := make(chan struct{})
	inEffect, release := make(chan struct{}), make(chan struct{})
	var early atomic.Bool
	var w *worker.Worker
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error {
			w.Stop()
			close(inEffect)
			select {
			case <-runReturned:
				early.Store(true)
			case <-release:
			}
			return nil
		}}, nil
	})
	w = e.Worker(quiet(worker.Handle("task", h, 4), worker.WithCommitsAhead(4), worker.WithGracePeriod(grace))...)
	errc := make(chan error, 1)
	go func() {
		errc <- w.Run(context.Background())
		close(runReturned)
	}()
	recv(t, inEffect)
	waitTimer(t, e.Clock, graceAt) // the shutdown waits for the commit
	close(release)
	require.NoError(t, recv(t, errc))
	assert.False(t, early.Load(), "Run returned with a commit in flight")
	e.AssertState(j.ID, done)
	e.AssertCommittedOnce(j.ID)
}

// TestCommitsAheadConfig: a negative bound is refused at construction.
func TestCommitsAheadConfig(t *testing.T) {
	e := newEnv(t)
	_, err := worker.New(e.Engine, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return ok()
	}), 1), worker.WithCommitsAhead(-1))
	var ce *worker.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "commits ahead -1")
}

// groupingStore is memstore claiming to group writes (WriteGrouper).
type groupingStore struct{ jobstate.Store }

func (groupingStore) GroupsWrites() bool { return true }

// TestCommitsAheadDefault: by default commits run ahead on a store that
// groups writes, and not on one that does not.
func TestCommitsAheadDefault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store jobstate.Store
		ahead bool
	}{
		{"memstore", memstore.New(), false},
		{"grouping", groupingStore{memstore.New()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newStoreEnv(t, tc.store)
			ctx := context.Background()
			a, err := env.eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte("a")})
			require.NoError(t, err)
			_, err = env.eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte("b")})
			require.NoError(t, err)
			bStarted := make(chan struct{})
			var overlapped, aDoneAtB atomic.Bool
			h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
				if string(tk.Job().Payload) == "b" {
					got, err := env.eng.Get(ctx, a.Job.ID)
					aDoneAtB.Store(err == nil && got.Terminal())
					close(bStarted)
					return ok()
				}
				return jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error {
					if !tc.ahead {
						return nil // b cannot start before this commit ends
					}
					select {
					case <-bStarted:
						overlapped.Store(true)
					case <-time.After(time.Minute):
						return errNotStarted
					}
					return nil
				}}, nil
			})
			w, err := worker.New(env.eng, worker.Handle("task", h, 1))
			require.NoError(t, err)
			n, err := w.Drain(ctx, 0)
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			assert.Equal(t, tc.ahead, overlapped.Load(), "b ran while a's commit was in flight")
			assert.Equal(t, !tc.ahead, aDoneAtB.Load(), "a had finished when b started")
		})
	}
}
