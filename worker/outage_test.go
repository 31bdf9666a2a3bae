package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// errConnRefused stands for the driver's error of a store that cannot be
// reached.
var errConnRefused = errors.New("dial tcp 10.0.0.5:5432: connection refused")

// faultStore makes a store unreachable on demand, answering as a store
// that lost its connection does (*jobstate.UnavailableError): while down,
// every call fails and applies nothing; failUpdates makes the next
// updates fail and apply nothing; lostApplied applies the next updates and
// then reports them with MayHaveApplied set (a COMMIT whose answer never
// came); lostUnapplied reports the next updates so without applying them.
// It wraps the store through the interface, so it offers no capability
// but those of jobstate.Store.
type faultStore struct {
	jobstate.Store
	down atomic.Bool

	mu                                      sync.Mutex
	failUpdates, lostApplied, lostUnapplied int
}

func newFaultStore() *faultStore { return &faultStore{Store: memstore.New()} }

// set arms the next updates' faults.
func (s *faultStore) set(fail, lostApplied, lostUnapplied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failUpdates, s.lostApplied, s.lostUnapplied = fail, lostApplied, lostUnapplied
}

func unreachable(op string, mayHaveApplied bool) error {
	return &jobstate.UnavailableError{Op: op, MayHaveApplied: mayHaveApplied, Err: errConnRefused}
}

// take returns the fault of the next update: 0 none, 1 fail, 2 lost
// after applying, 3 lost without applying.
func (s *faultStore) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failUpdates > 0:
		s.failUpdates--
		return 1
	case s.lostApplied > 0:
		s.lostApplied--
		return 2
	case s.lostUnapplied > 0:
		s.lostUnapplied--
		return 3
	}
	return 0
}

func (s *faultStore) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if s.down.Load() {
		return jobstate.Job{}, unreachable("update", false)
	}
	switch s.take() {
	case 1:
		return jobstate.Job{}, unreachable("update", false)
	case 2:
		if _, err := s.Store.Update(ctx, id, fn); err != nil {
			return jobstate.Job{}, err
		}
		return jobstate.Job{}, unreachable("update", true)
	case 3:
		return jobstate.Job{}, unreachable("update", true)
	}
	return s.Store.Update(ctx, id, fn)
}

func (s *faultStore) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if s.down.Load() {
		return jobstate.Job{}, false, unreachable("create", false)
	}
	return s.Store.Create(ctx, machine, key, fn)
}

func (s *faultStore) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if s.down.Load() {
		return jobstate.Job{}, unreachable("get", false)
	}
	return s.Store.Get(ctx, id)
}

func (s *faultStore) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	if s.down.Load() {
		return nil, unreachable("executions", false)
	}
	return s.Store.Executions(ctx, id)
}

func (s *faultStore) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if s.down.Load() {
		return jobstate.Job{}, unreachable("claim", false)
	}
	return s.Store.ClaimNext(ctx, q, fn)
}

func (s *faultStore) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if s.down.Load() {
		return nil, unreachable("due", false)
	}
	return s.Store.Due(ctx, q)
}

// outageEnv is an engine on a faultStore with a manual clock, and a
// worker's logger that keeps every record.
type outageEnv struct {
	storeEnv
	store *faultStore
	logs  *logSink
}

func newOutageEnv(t *testing.T, defs ...*jobstate.Definition) outageEnv {
	fs := newFaultStore()
	return outageEnv{storeEnv: newStoreEnv(t, fs, defs...), store: fs, logs: newLogSink()}
}

// worker returns a worker named w1 on the env's clock and logger, with
// exact timers (no jitter) and no poll or sweep within the test.
func (e outageEnv) worker(t *testing.T, opts ...worker.Option) *worker.Worker {
	t.Helper()
	w, err := worker.New(e.eng, quiet(append([]worker.Option{worker.WithName("w1"), worker.WithClock(e.clock),
		worker.WithLogger(slog.New(e.logs))}, opts...)...)...)
	require.NoError(t, err)
	return w
}

func (e outageEnv) create(t *testing.T) jobstate.Job {
	t.Helper()
	c, err := e.eng.Create(context.Background(), jobstate.NewJob{Machine: "task"})
	require.NoError(t, err)
	return c.Job
}

func (e outageEnv) get(t *testing.T, id uuid.UUID) jobstate.Job {
	t.Helper()
	j, err := e.eng.Get(context.Background(), id)
	require.NoError(t, err)
	return j
}

func (e outageEnv) history(t *testing.T, id uuid.UUID) []jobstate.Event {
	t.Helper()
	recs, err := e.eng.History(context.Background(), id)
	require.NoError(t, err)
	evs := make([]jobstate.Event, len(recs))
	for i, r := range recs {
		evs[i] = r.Event
	}
	return evs
}

// drain runs w.Drain in a goroutine; its result arrives on the channel.
func drain(w *worker.Worker) <-chan int {
	ch := make(chan int, 1)
	go func() {
		n, _ := w.Drain(context.Background(), 0)
		ch <- n
	}()
	return ch
}

// retries fires the runtime's first n retries, at their exact backoff
// (100 ms, doubling): it waits for each timer, then moves the clock to
// it.
func retries(t *testing.T, clk *jobstatetest.Clock, n int) {
	t.Helper()
	d := 100 * time.Millisecond
	for i := 0; i < n; i++ {
		waitTimer(t, clk, clk.Now().Add(d))
		clk.Advance(d)
		d = min(2*d, 5*time.Second)
	}
}

// fireUntil moves the clock to each armed timer in turn until done
// yields, and returns its value: for a worker whose only timers are its
// own retries and heartbeats.
func fireUntil[T any](t *testing.T, clk *jobstatetest.Clock, done <-chan T) T {
	t.Helper()
	for {
		ctx, cancel := context.WithCancel(context.Background())
		armed := make(chan error, 1)
		go func() { armed <- clk.WaitPending(ctx, 1) }()
		select {
		case v := <-done:
			cancel()
			return v
		case <-armed:
		case <-time.After(time.Minute):
			cancel()
			t.Fatal("timed out waiting: the worker is stuck")
		}
		cancel()
		if at, ok := clk.Next(); ok {
			clk.Set(at)
		}
	}
}

// assertOneOutage checks that the records hold exactly one WARN, "store
// unreachable" for op, and one "store reachable again" with the outage's
// duration and counts; it returns that INFO record.
func assertOneOutage(t *testing.T, logs *logSink, op string, d time.Duration, failed, retried int) map[string]string {
	t.Helper()
	warns := logs.atLeast(t, slog.LevelWarn)
	require.Len(t, warns, 1, "%q", msgs(warns))
	assert.Equal(t, "WARN", warns[0]["level"])
	assert.Equal(t, "store unreachable", warns[0]["msg"])
	assert.Equal(t, op, warns[0]["op"])
	assert.Contains(t, warns[0]["error"], "connection refused")
	ups := logs.named("store reachable again")
	require.Len(t, ups, 1)
	up := ups[0]
	assert.Equal(t, "INFO", up["level"])
	assert.Equal(t, d.String(), up["duration"])
	assert.Equal(t, strconv.Itoa(failed), up["failed_calls"])
	assert.Equal(t, strconv.Itoa(retried), up["retried"])
	return up
}

// TestUnreachableSucceedIsRetried: a commit that found the store
// unreachable, nothing applied, is made again with backoff and commits
// once when the store is back; the job is not failed.
func TestUnreachableSucceedIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		fail, lostApplied, lostNotYet int
		// tries is the number of backoffs before the job is done.
		tries int
		// confirmed is the record of a commit known from a read.
		confirmed string
	}{
		{name: "nothing applied", fail: 3, tries: 3},
		{name: "lost answer, applied", lostApplied: 1, tries: 1, confirmed: "job succeeded (confirmed after the store's answer was lost)"},
		{name: "lost answer, not applied", lostNotYet: 1, tries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOutageEnv(t)
			job := e.create(t)
			var ledger jobstatetest.Ledger
			var runs atomic.Int32
			w := e.worker(t, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
				runs.Add(1)
				return jobstate.CommitInput{Result: []byte("ok"), Effect: ledger.Effect}, nil
			}), 1))
			e.store.set(tc.fail, tc.lostApplied, tc.lostNotYet)
			drained := drain(w)
			retries(t, e.clock, tc.tries)
			assert.Equal(t, 1, recv(t, drained))

			j := e.get(t, job.ID)
			assert.Equal(t, done, j.State)
			assert.Equal(t, "ok", string(j.Result))
			assert.Zero(t, j.RetryCount, "an unreachable store is no failure of the job")
			assert.Equal(t, 1, j.Attempt)
			assert.Equal(t, []jobstate.Event{jobstate.EventCreate, jobstate.EventClaim, jobstate.EventSucceed}, e.history(t, job.ID))
			assert.Equal(t, 1, ledger.Applied(job.ID), "the effect applied once")
			assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
			assert.Empty(t, e.logs.named("job failed"))
			if tc.confirmed != "" {
				assert.Len(t, e.logs.named(tc.confirmed), 1)
			} else {
				assert.Len(t, e.logs.named("job succeeded"), 1)
			}
			// Every try found the store unreachable until the last.
			var total time.Duration
			for i, d := 0, 100*time.Millisecond; i < tc.tries; i, d = i+1, 2*d {
				total += d
			}
			assertOneOutage(t, e.logs, "succeed", total, tc.tries, tc.tries)
		})
	}
}

// TestLostAnswerCommitIsFinished: a Succeed whose answer was lost after
// it recorded the commit alone (its succeed rule's effect failed) is
// found COMMITTED, and finished, without applying the effect again.
func TestLostAnswerCommitIsFinished(t *testing.T) {
	spec := taskSpec("task")
	var ruleRuns atomic.Int32
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventSucceed {
			spec.Rules[i].Effect = func(context.Context, jobstate.Job) error {
				if ruleRuns.Add(1) == 1 {
					return errors.New("notification service down")
				}
				return nil
			}
		}
	}
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	e := newOutageEnv(t, def)
	job := e.create(t)
	var ledger jobstatetest.Ledger
	w := e.worker(t, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}), 1))
	e.store.set(0, 1, 0)
	drained := drain(w)
	retries(t, e.clock, 1)
	assert.Equal(t, 1, recv(t, drained))

	assert.Equal(t, done, e.get(t, job.ID).State)
	assert.Equal(t, 1, ledger.Applied(job.ID))
	assert.EqualValues(t, 2, ruleRuns.Load(), "the succeed rule's effect ran again with the finish")
	assert.Len(t, e.logs.named("committed (confirmed after the store's answer was lost); finishing"), 1)
	assert.Len(t, e.logs.named("job succeeded (finished after its commit)"), 1)
	assert.Empty(t, e.logs.named("job failed"))
}

// TestUnreachableFailIsRetried: a failure of the execution that found the
// store unreachable is recorded once when the store is back: one retry
// counted, whether the lost try was applied or not.
func TestUnreachableFailIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		fail, lostApplied, lostNotYet int
		tries                         int
		text                          string // the handler's error text, when not the plain one
	}{
		{name: "nothing applied", fail: 2, tries: 2},
		{name: "lost answer, applied", lostApplied: 1, tries: 1},
		{name: "lost answer, not applied", lostNotYet: 1, tries: 1},
		// The engine records the text cleaned: the runtime recognises its
		// own failure by the cleaned text.
		{name: "lost answer, applied, a text the engine cleans", lostApplied: 1, tries: 1, text: "upstream\x00timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "upstream timeout"
			if tc.text != "" {
				text = tc.text
			}
			e := newOutageEnv(t)
			job := e.create(t)
			w := e.worker(t, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
				return jobstate.CommitInput{}, errors.New(text)
			}), 1))
			e.store.set(tc.fail, tc.lostApplied, tc.lostNotYet)
			drained := drain(w)
			retries(t, e.clock, tc.tries)
			assert.Equal(t, 1, recv(t, drained))

			j := e.get(t, job.ID)
			assert.Equal(t, queued, j.State)
			assert.Equal(t, 1, j.RetryCount, "failed once")
			assert.Equal(t, jobstate.CleanErrorText(text), j.LastError)
			assert.Equal(t, []jobstate.Event{jobstate.EventCreate, jobstate.EventClaim, jobstate.EventRetry}, e.history(t, job.ID))
			failedRecs := e.logs.named("job failed")
			require.Len(t, failedRecs, 1)
			assert.Equal(t, "INFO", failedRecs[0]["level"])
			assert.Len(t, e.logs.atLeast(t, slog.LevelWarn), 1, "the outage's record only")
		})
	}
}

// TestUnreachableSnoozeIsRetried: a snooze that found the store
// unreachable is made again, and counts no failure.
func TestUnreachableSnoozeIsRetried(t *testing.T) {
	e := newOutageEnv(t)
	job := e.create(t)
	w := e.worker(t, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, worker.Snooze(time.Minute)
	}), 1))
	e.store.set(1, 0, 1)
	drained := drain(w)
	retries(t, e.clock, 2)
	assert.Equal(t, 1, recv(t, drained))
	j := e.get(t, job.ID)
	assert.Equal(t, queued, j.State)
	assert.Zero(t, j.RetryCount)
	assert.Equal(t, e.clock.Now().Add(time.Minute), j.NotBefore)
	assert.Len(t, e.logs.named("job snoozed"), 1)
	assertOneOutage(t, e.logs, "snooze", 300*time.Millisecond, 2, 2)
}

// TestUnreachableUntilLeaseLapses: while the store cannot be reached the
// commit is tried until the lease lapses on the engine's clock, then left
// to the sweep: the job is neither committed nor failed by the runtime,
// and the sweep recovers it once the store is back.
func TestUnreachableUntilLeaseLapses(t *testing.T) {
	e := newOutageEnv(t)
	job := e.create(t)
	var ledger jobstatetest.Ledger
	started, release := make(chan struct{}), make(chan struct{})
	w := e.worker(t, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		close(started)
		<-release
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}), 1))
	drained := drain(w)
	recv(t, started)
	e.store.down.Store(true) // the store goes away while the handler runs
	close(release)
	assert.Equal(t, "succeed", e.logs.wait(t, "store unreachable")["op"]) // the heartbeat is stopped
	fireUntil(t, e.clock, drained)
	assert.Equal(t, jobstatetest.Epoch.Add(30*time.Second), e.clock.Now(), "tried until the lease lapsed, no longer")
	gaveUp := e.logs.named("the store was unreachable until the lease lapsed: the sweep recovers the job")
	require.Len(t, gaveUp, 1)
	assert.Equal(t, "DEBUG", gaveUp[0]["level"])
	assert.Empty(t, e.logs.named("job failed"))
	warns := e.logs.atLeast(t, slog.LevelWarn)
	require.Len(t, warns, 1, "%q", msgs(warns))
	assert.Equal(t, "store unreachable", warns[0]["msg"])

	e.store.down.Store(false)
	rep, err := e.eng.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Retried, "the sweep recovers the job")
	j := e.get(t, job.ID)
	assert.Equal(t, queued, j.State)
	assert.Zero(t, ledger.Applied(job.ID))
}

// TestOutageLoggedOnce: an outage met by the commits of many jobs is one
// WARN record and one INFO record, whatever the number of jobs; every job
// commits once when the store is back.
func TestOutageLoggedOnce(t *testing.T) {
	const n = 8
	e := newOutageEnv(t)
	jobs := make([]jobstate.Job, n)
	for i := range jobs {
		jobs[i] = e.create(t)
	}
	h := newBlocking()
	var ledger jobstatetest.Ledger
	h.result.Effect = ledger.Effect
	w := e.worker(t, worker.Handle("task", h, n))
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	for range jobs {
		recv(t, h.started)
	}
	e.store.down.Store(true)
	close(h.release)
	waitCount(t, e.logs, n, "store unreachable", "store still unreachable")
	waitPending(t, e.clock, 2+n) // poll, sweep and a retry per job (the heartbeats stopped)
	e.store.down.Store(false)
	e.clock.Advance(100 * time.Millisecond)
	waitCount(t, e.logs, n, "job succeeded")
	cancel()
	require.NoError(t, recv(t, errc))

	for _, j := range jobs {
		assert.Equal(t, done, e.get(t, j.ID).State)
	}
	assert.Equal(t, n, ledger.Total())
	assertOneOutage(t, e.logs, "succeed", 100*time.Millisecond, n, n)
	var info []string
	for _, r := range e.logs.atLeast(t, slog.LevelInfo) {
		switch r["msg"] {
		case "worker started", "stopping: waiting for running handlers", "worker stopped", "store unreachable", "store reachable again":
		default:
			info = append(info, r["msg"])
		}
	}
	assert.Empty(t, info, "no record per job at INFO or above")
}

// waitCount waits until the records with one of the messages msgs number
// at least n.
func waitCount(t *testing.T, s *logSink, n int, msgs ...string) {
	t.Helper()
	deadline := time.After(time.Minute)
	st := s.st
	for {
		st.mu.Lock()
		k := 0
		for _, r := range st.records {
			for _, m := range msgs {
				if r["msg"] == m {
					k++
				}
			}
		}
		ch := st.changed
		st.mu.Unlock()
		if k >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d log records among %q, want %d", k, msgs, n)
		}
	}
}

// TestHeartbeatOutageLoggedOnce: heartbeats that cannot reach the store
// are retried at their interval and logged as one outage; the lease held
// through it, the job commits.
func TestHeartbeatOutageLoggedOnce(t *testing.T) {
	e := newOutageEnv(t)
	job := e.create(t)
	h := newBlocking()
	var ledger jobstatetest.Ledger
	h.result.Effect = ledger.Effect
	w := e.worker(t, worker.Handle("task", h, 1, worker.HeartbeatInterval(5*time.Second)))
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, h.started)
	waitPending(t, e.clock, 3) // poll, sweep, heartbeat
	e.store.down.Store(true)
	for i := 0; i < 2; i++ {
		now := e.clock.Advance(5 * time.Second)
		waitTimer(t, e.clock, now.Add(5*time.Second)) // failed, re-armed
	}
	e.store.down.Store(false)
	now := e.clock.Advance(5 * time.Second)
	waitTimer(t, e.clock, now.Add(5*time.Second))
	execs, err := e.eng.Executions(context.Background(), job.ID)
	require.NoError(t, err)
	assert.Equal(t, now.Add(30*time.Second), execs[0].LeaseExpiresAt, "renewed once the store was back")
	close(h.release)
	waitCount(t, e.logs, 1, "job succeeded")
	cancel()
	require.NoError(t, recv(t, errc))
	assert.Empty(t, h.causes, "the handler ran on")
	assert.Equal(t, 1, ledger.Applied(job.ID))
	assertOneOutage(t, e.logs, "heartbeat", 10*time.Second, 2, 2)
}

// TestOutageEndsRetriesWithGrace: a commit still trying when the
// shutdown's grace period ends stops trying; Run returns, and the job is
// left to the sweep, neither committed nor failed.
func TestOutageEndsRetriesWithGrace(t *testing.T) {
	e := newOutageEnv(t)
	job := e.create(t)
	var ledger jobstatetest.Ledger
	release := make(chan struct{})
	w := e.worker(t, worker.WithGracePeriod(time.Second), worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		<-release
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}), 1))
	errc := runWorker(context.Background(), w)
	waitPending(t, e.clock, 3) // poll, sweep, heartbeat: the handler runs
	e.store.down.Store(true)
	close(release)
	waitTimer(t, e.clock, e.clock.Now().Add(100*time.Millisecond)) // the commit's first retry
	w.Stop()
	waitTimer(t, e.clock, e.clock.Now().Add(time.Second)) // the grace period
	e.clock.Advance(time.Second)
	require.NoError(t, recv(t, errc))
	assert.NotEmpty(t, e.logs.named("the store is unreachable and the worker is stopping: the lease is left to lapse, the sweep recovers the job"))
	e.store.down.Store(false)
	j := e.get(t, job.ID)
	assert.Equal(t, running, j.State, "left to the sweep")
	assert.Zero(t, j.RetryCount)
	assert.Zero(t, ledger.Applied(job.ID))
}
