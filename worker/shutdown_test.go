package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/jobstatetest/envtest"
	"github.com/jobstate/jobstate/worker"
)

// finishedJobs is an engine observer that reports each job reaching a
// terminal state.
func finishedJobs() (jobstate.Option, <-chan uuid.UUID) {
	ch := make(chan uuid.UUID, 64)
	return jobstate.WithObserver(func(_ context.Context, j jobstate.Job, _ jobstate.Transition) {
		if j.Terminal() {
			ch <- j.ID
		}
	}), ch
}

// claimNow claims the job with another worker's name at the clock's
// current time, as a worker in another process would.
func claimNow(t *testing.T, e *jobstatetest.Env, id uuid.UUID) jobstate.Claimed {
	t.Helper()
	c, err := e.Engine.ClaimJob(e.Ctx, id, jobstate.ClaimRequest{Worker: "other"})
	require.NoError(t, err, "another worker must be able to claim at once, before the TTL")
	return c
}

// TestGracefulShutdown: a stop lets running handlers finish within the
// grace period; then the rest are cancelled with a *ShutdownError and
// their leases given back, so another worker claims them at once, with no
// failure counted and nothing committed twice.
func TestGracefulShutdown(t *testing.T) {
	obs, finished := finishedJobs()
	e := newEnv(t, obs)
	quick := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("quick")})
	slow := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("slow")})
	var ledger jobstatetest.Ledger
	releaseQuick := make(chan struct{})
	started := make(chan string, 2)
	causes := make(chan error, 1)
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		started <- string(tk.Job().Payload)
		if string(tk.Job().Payload) == "quick" {
			<-releaseQuick
			return jobstate.CommitInput{Effect: ledger.Effect}, nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return jobstate.CommitInput{}, ctx.Err()
	})
	w := e.Worker(quiet(worker.Handle("task", h, 2), worker.WithGracePeriod(5*time.Second))...)
	errc := runWorker(context.Background(), w)
	recv(t, started)
	recv(t, started)
	waitPending(t, e.Clock, 4) // poll, sweep, two heartbeats
	w.Stop()
	waitTimer(t, e.Clock, e.Clock.Now().Add(5*time.Second)) // the grace period runs
	close(releaseQuick)
	assert.Equal(t, quick.ID, recv(t, finished), "a handler finishing within the grace period commits")
	e.Advance(5 * time.Second)
	cause := recv(t, causes)
	var se *worker.ShutdownError
	require.ErrorAs(t, cause, &se)
	assert.ErrorIs(t, cause, worker.ErrShutdown)
	assert.False(t, se.Hard)
	require.NoError(t, recv(t, errc))

	e.AssertAppliedOnce(&ledger, quick.ID)
	j := e.Get(slow.ID)
	assert.Equal(t, queued, j.State)
	assert.Zero(t, j.RetryCount, "giving a lease back is no failure")
	assert.Zero(t, j.Leases)
	c := claimNow(t, e, slow.ID)
	_, err := e.Engine.Succeed(e.Ctx, c.Lease, jobstate.CommitInput{Effect: ledger.Effect})
	require.NoError(t, err)
	e.AssertAppliedOnce(&ledger, slow.ID)
}

// TestHardStop: a second stop signal ends the grace period at once: the
// leases are given back and Run returns without waiting for a handler
// that ignores its context; what that handler returns later is dropped.
func TestHardStop(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	var ledger jobstatetest.Ledger
	h := newBlocking()
	stubborn := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		h.started <- tk
		<-h.release // ignores ctx
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	})
	logs := newLogSink()
	w := e.Worker(quiet(worker.Handle("task", stubborn, 1), worker.WithGracePeriod(time.Hour), worker.WithLogger(slog.New(logs)))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	tk := recv(t, h.started)
	cancel() // the first signal
	waitTimer(t, e.Clock, e.Clock.Now().Add(time.Hour))
	w.Stop() // the second
	require.NoError(t, recv(t, errc))

	j := e.Get(job.ID)
	assert.Equal(t, queued, j.State)
	assert.Zero(t, j.RetryCount)
	c := claimNow(t, e, job.ID)
	assert.Equal(t, 2, c.Lease.Token)
	close(h.release)
	logs.wait(t, "handler returned after its lease was given back")
	assert.Zero(t, ledger.Applied(job.ID), "the stale handler committed nothing")
	_, err := e.Engine.Succeed(e.Ctx, tk.Lease(), jobstate.CommitInput{Effect: ledger.Effect})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "the old lease is fenced out")
	_, err = e.Engine.Succeed(e.Ctx, c.Lease, jobstate.CommitInput{Effect: ledger.Effect})
	require.NoError(t, err)
	e.AssertAppliedOnce(&ledger, job.ID)
}

// TestShutdownWaitsThenStopsHard: Shutdown returns nil once Run returned;
// when its context ends first, it stops hard and returns ctx's error.
func TestShutdownWaitsThenStopsHard(t *testing.T) {
	e := newEnv(t)
	e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithGracePeriod(time.Hour))...)
	errc := runWorker(context.Background(), w)
	recv(t, h.started)
	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(ctx) }()
	waitTimer(t, e.Clock, e.Clock.Now().Add(time.Hour))
	cancel()
	assert.ErrorIs(t, recv(t, shut), context.Canceled)
	require.NoError(t, recv(t, errc))
	var se *worker.ShutdownError
	require.ErrorAs(t, recv(t, h.causes), &se)
	assert.True(t, se.Hard)
	assert.ErrorIs(t, w.Run(context.Background()), worker.ErrStopped, "a worker runs once")
	assert.NoError(t, w.Shutdown(context.Background()), "a stopped worker shuts down at once")
}

// TestShutdownIdle: an idle worker stops at once; Stop before Run makes
// Run return ErrStopped.
func TestShutdownIdle(t *testing.T) {
	e := newEnv(t)
	w := e.Worker(quiet(worker.Handle("task", newBlocking(), 1))...)
	errc := runWorker(context.Background(), w)
	waitPending(t, e.Clock, 2)
	require.NoError(t, w.Shutdown(context.Background()))
	require.NoError(t, recv(t, errc))

	w2 := e.Worker(quiet(worker.Handle("task", newBlocking(), 1))...)
	w2.Stop()
	assert.ErrorIs(t, w2.Run(context.Background()), worker.ErrStopped)
}

// TestShutdownToWaitingState: a machine whose retry rule leads to a
// waiting state gets its job back as ready too: the stopping worker
// sweeps after giving leases back.
func TestShutdownToWaitingState(t *testing.T) {
	def := envtest.Machine()
	e := jobstatetest.New(t, jobstate.WithMachines(def))
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	h := newBlocking()
	w := e.Worker(quiet(worker.Handle("queue", h, 1), worker.WithGracePeriod(0))...)
	errc := runWorker(context.Background(), w)
	recv(t, h.started)
	w.Stop()
	require.NoError(t, recv(t, errc))
	e.AssertPath(job.ID, "QUEUED", "RUNNING", "RETRYING", "QUEUED")
	claimNow(t, e, job.ID)
}
