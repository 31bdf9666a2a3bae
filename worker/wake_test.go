package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/jobstatetest/envtest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// TestIdleWorkerDoesNotSpin: over 10 s of manual time, an idle worker
// claims about once per poll interval, and does nothing between: no
// busy loop.
func TestIdleWorkerDoesNotSpin(t *testing.T) {
	store := &countingStore{Store: memstore.New()}
	env := newStoreEnv(t, store)
	w, err := worker.New(env.eng, worker.Handle("task", newBlocking(), 4), worker.WithClock(env.clock),
		worker.WithPollInterval(time.Second), worker.WithSweepInterval(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	waitPending(t, env.clock, 2) // poll and sweep: at rest
	before := store.claims.Load()
	for i := 0; i < 100; i++ { // 10 s in steps of 100 ms
		env.clock.Advance(100 * time.Millisecond)
		waitPending(t, env.clock, 2)
	}
	// A poll every 0.8 to 1.2 s, each late by up to a step: 7 to 13 polls.
	claims := store.claims.Load() - before
	assert.GreaterOrEqual(t, claims, int64(7), "the worker polls")
	assert.LessOrEqual(t, claims, int64(14), "one claim per poll, not a busy loop")
	cancel()
	require.NoError(t, recv(t, errc))
}

// TestNotificationWakesWorker: on a store that notifies, a job created in
// an idle system is claimed at once, without any poll.
func TestNotificationWakesWorker(t *testing.T) {
	store := newNotifyStore()
	env := newStoreEnv(t, store)
	h := newBlocking()
	w, err := worker.New(env.eng, append(quiet(worker.Handle("task", h, 1)), worker.WithClock(env.clock))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	waitPending(t, env.clock, 2)
	start := env.clock.Now()
	c, err := env.eng.Create(context.Background(), jobstate.NewJob{Machine: "task"})
	require.NoError(t, err)
	tk := recv(t, h.started)
	assert.Equal(t, c.Job.ID, tk.Job().ID)
	assert.Equal(t, start, env.clock.Now(), "no time passed: the notification woke the worker")
	close(h.release)
	cancel()
	require.NoError(t, recv(t, errc))
}

// TestWithoutNotificationsPolls: on a store that does not notify, the
// job waits for the next poll.
func TestWithoutNotificationsPolls(t *testing.T) {
	store := &countingStore{Store: memstore.New()}
	env := newStoreEnv(t, store)
	h := newBlocking()
	w, err := worker.New(env.eng, worker.Handle("task", h, 1), worker.WithClock(env.clock),
		worker.WithPollInterval(time.Minute), worker.WithSweepInterval(time.Hour), worker.WithJitter(0))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	waitPending(t, env.clock, 2)
	_, err = env.eng.Create(context.Background(), jobstate.NewJob{Machine: "task"})
	require.NoError(t, err)
	select {
	case <-h.started:
		t.Fatal("claimed before any poll, on a store that does not notify")
	default:
	}
	env.clock.Advance(time.Minute)
	recv(t, h.started)
	close(h.release)
	cancel()
	require.NoError(t, recv(t, errc))
}

// TestBatchClaimsUsed: on a store with batch claims the worker claims as
// many jobs as it has free slots in one call.
func TestBatchClaimsUsed(t *testing.T) {
	store := &batchStore{countingStore: countingStore{Store: memstore.New()}}
	env := newStoreEnv(t, store)
	for i := 0; i < 10; i++ {
		_, err := env.eng.Create(context.Background(), jobstate.NewJob{Machine: "task"})
		require.NoError(t, err)
	}
	w, err := worker.New(env.eng, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return ok()
	}), 4), worker.WithClock(env.clock))
	require.NoError(t, err)
	n, err := w.Drain(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	sizes := store.batchSizes()
	require.NotEmpty(t, sizes)
	assert.Equal(t, 4, sizes[0], "the first batch fills every slot")
	for _, s := range sizes {
		assert.LessOrEqual(t, s, 4, "never more than the free slots")
	}
}

// TestRecoverWorkerAtStart: a worker restarted under the same name ends
// its previous process's executions at once and runs the job again,
// without waiting for the old lease to lapse.
func TestRecoverWorkerAtStart(t *testing.T) {
	obs, finished := finishedJobs()
	e := newEnv(t, obs)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	_, err := e.Engine.Claim(e.Ctx, jobstate.ClaimRequest{Machine: "task", Worker: "test-worker"}) // the old process
	require.NoError(t, err)
	e.Advance(time.Second) // past the retry's 1 s backoff, well before the 30 s TTL
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return ok()
	}), 1), worker.WithPollInterval(time.Second), worker.WithSweepInterval(time.Hour), worker.WithJitter(0))
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	waitPending(t, e.Clock, 2)
	e.Advance(time.Second) // the retry's backoff ends; the next poll claims
	assert.Equal(t, job.ID, recv(t, finished))
	cancel()
	require.NoError(t, recv(t, errc))
	j := e.Get(job.ID)
	assert.Equal(t, done, j.State)
	assert.Equal(t, 2, j.Attempt)
	e.AssertHistory(job.ID, jobstate.EventCreate, jobstate.EventClaim, jobstate.EventRetry, jobstate.EventClaim, jobstate.EventSucceed)
}

// TestRunExcludesDrain: Run and Drain exclude each other.
func TestRunExcludesDrain(t *testing.T) {
	e := newEnv(t)
	w := e.Worker(quiet(worker.Handle("task", newBlocking(), 1))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	waitPending(t, e.Clock, 2)
	_, err := w.Drain(context.Background(), 0)
	assert.ErrorIs(t, err, worker.ErrRunning)
	assert.ErrorIs(t, w.Run(context.Background()), worker.ErrRunning)
	cancel()
	require.NoError(t, recv(t, errc))
}

// TestRunSweeps: a running worker sweeps on its own, so a job retried into
// a waiting state is requeued when its backoff ends, and the sweep wakes
// the claim loop.
func TestRunSweeps(t *testing.T) {
	obs, finished := finishedJobs()
	retried := make(chan struct{}, 1)
	onRetry := jobstate.WithObserver(func(_ context.Context, _ jobstate.Job, tr jobstate.Transition) {
		if tr.Event == jobstate.EventRetry {
			retried <- struct{}{}
		}
	})
	e := jobstatetest.New(t, jobstate.WithMachines(envtest.Machine()), obs, onRetry)
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if tk.Lease().Token == 1 {
			return jobstate.CommitInput{}, errors.New("timeout")
		}
		return ok()
	})
	w := e.Worker(worker.Handle("queue", h, 1), worker.WithPollInterval(time.Hour), worker.WithSweepInterval(time.Second), worker.WithJitter(0))
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, retried)
	waitPending(t, e.Clock, 2) // poll and sweep: the heartbeat was stopped before the retry
	e.AssertState(job.ID, "RETRYING")
	e.Advance(time.Second) // the backoff ends; the worker's sweep requeues, then claims
	assert.Equal(t, job.ID, recv(t, finished))
	cancel()
	require.NoError(t, recv(t, errc))
	e.AssertHistory(job.ID, "create", "claim", "retry", "requeue", "claim", "succeed")
}

// TestWakeDuringClaimInFlight: a sweep that makes a job ready wakes the
// claim loop while a handler goroutine's claim, made before the job was
// ready and so empty, is still on its way back (its machine's only slot
// held, and on a store with batch claims the machine's one claim in
// flight): the loop cannot claim then, and the job is claimed once that
// claim returns, not at the next poll an hour later.
func TestWakeDuringClaimInFlight(t *testing.T) {
	for _, sc := range []struct {
		name  string
		store func(*holdingStore) jobstate.Store
	}{
		{"one-by-one", func(s *holdingStore) jobstate.Store { return s }},
		{"batch", func(s *holdingStore) jobstate.Store { return batchHoldingStore{s} }},
	} {
		t.Run(sc.name, func(t *testing.T) {
			hs := newHoldingStore()
			clk := jobstatetest.NewClock(jobstatetest.Epoch)
			obs, finished := finishedJobs()
			retried := make(chan struct{}, 1)
			onRetry := jobstate.WithObserver(func(_ context.Context, _ jobstate.Job, tr jobstate.Transition) {
				if tr.Event == jobstate.EventRetry {
					retried <- struct{}{}
				}
			})
			eng, err := jobstate.New(sc.store(hs), jobstate.WithMachines(envtest.Machine()), jobstate.WithClock(clk), obs, onRetry)
			require.NoError(t, err)
			ctx := context.Background()
			c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
			require.NoError(t, err)
			h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
				if tk.Lease().Token == 1 {
					hs.armed.Store(true) // the claim this goroutine makes next is held
					return jobstate.CommitInput{}, errors.New("timeout")
				}
				return ok()
			})
			w, err := worker.New(eng, quiet(worker.Handle("queue", h, 1), worker.WithClock(clk),
				worker.WithPollInterval(time.Hour), worker.WithSweepInterval(envtest.Backoff), worker.WithJitter(0))...)
			require.NoError(t, err)
			runCtx, cancel := context.WithCancel(ctx)
			errc := runWorker(runCtx, w)
			recv(t, retried)    // the first attempt's failure is written (it may be, after the claim below)
			recv(t, hs.claimed) // the goroutine's claim found nothing; its answer is held
			hs.armed.Store(false)
			waitPending(t, clk, 2) // poll and sweep armed: the loop and the sweeper at rest
			woke := clk.Now().Add(envtest.Backoff)
			clk.Advance(envtest.Backoff)           // the backoff ends: the sweep requeues the job and wakes the loop
			waitTimer(t, clk, woke.Add(time.Hour)) // the loop's round is done: it re-armed its poll
			j, err := eng.Get(ctx, c.Job.ID)
			require.NoError(t, err)
			require.Equal(t, jobstate.State("QUEUED"), j.State, "the sweep requeued the job")
			close(hs.release) // the empty claim returns, and the slot is freed
			assert.Equal(t, c.Job.ID, recv(t, finished))
			cancel()
			require.NoError(t, recv(t, errc))
		})
	}
}

// TestDrainLimit: Drain stops claiming at its limit and says so.
func TestDrainLimit(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.Create(jobstate.NewJob{Machine: "task"})
	}
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return ok()
	}), 2))
	n, err := w.Drain(context.Background(), 3)
	assert.ErrorIs(t, err, worker.ErrDrainLimit)
	assert.Equal(t, 3, n)
	n, err = w.Drain(context.Background(), 0)
	assert.NoError(t, err)
	assert.Equal(t, 2, n, "the rest, on the next drain")
}
