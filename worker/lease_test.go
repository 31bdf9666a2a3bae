package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// quiet are the options of a worker whose poll and sweep timers do not
// fire within a test's few minutes, with exact timers (no jitter).
func quiet(opts ...worker.Option) []worker.Option {
	return append([]worker.Option{worker.WithPollInterval(time.Hour), worker.WithSweepInterval(time.Hour), worker.WithJitter(0)}, opts...)
}

// blocking is a handler that reports its task, then waits until its
// context ends (reporting the cause) or it is released.
type blocking struct {
	started chan *worker.Task
	causes  chan error
	release chan struct{}
	result  jobstate.CommitInput
}

func newBlocking() *blocking {
	return &blocking{started: make(chan *worker.Task, 16), causes: make(chan error, 16), release: make(chan struct{})}
}

func (b *blocking) Work(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
	b.started <- t
	select {
	case <-ctx.Done():
		b.causes <- context.Cause(ctx)
		return b.result, nil // ignored, or committed: see each test
	case <-b.release:
		return b.result, nil
	}
}

// TestHeartbeatKeepsLease: the runtime renews the lease every third of
// its TTL, so a handler runs twice the TTL without losing it.
func TestHeartbeatKeepsLease(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	var ledger jobstatetest.Ledger
	h.result.Effect = ledger.Effect
	w := e.Worker(quiet(worker.Handle("task", h, 1))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	tk := recv(t, h.started)
	waitPending(t, e.Clock, 3) // poll, sweep, heartbeat
	for i := 0; i < 6; i++ {
		now := e.Advance(10 * time.Second)
		waitTimer(t, e.Clock, now.Add(10*time.Second)) // renewed and re-armed
		execs, err := e.Engine.Executions(e.Ctx, job.ID)
		require.NoError(t, err)
		assert.Equal(t, now.Add(30*time.Second), execs[0].LeaseExpiresAt, "renewed at %s", now)
	}
	assert.Equal(t, e.Clock.Now().Add(30*time.Second), tk.Lease().ExpiresAt)
	rep := e.Sweep()
	assert.Zero(t, rep.Retried+rep.Aborted, "the lease is live after twice its TTL")
	close(h.release)
	cancel()
	require.NoError(t, recv(t, errc))
	e.AssertAppliedOnce(&ledger, job.ID)
	assert.Empty(t, h.causes)
}

// TestLostLeaseCancelsHandler: a heartbeat refused with ErrLeaseLost
// cancels the handler's context at once with a *LeaseLostError, and the
// handler's result is not committed.
func TestLostLeaseCancelsHandler(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	var ledger jobstatetest.Ledger
	h.result.Effect = ledger.Effect
	logs := newLogSink()
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithLogger(slog.New(logs)))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, h.started)
	waitPending(t, e.Clock, 3)
	e.Advance(31 * time.Second) // the process stalled past the TTL: the heartbeat comes too late
	cause := recv(t, h.causes)
	var lost *worker.LeaseLostError
	require.ErrorAs(t, cause, &lost)
	assert.ErrorIs(t, cause, jobstate.ErrLeaseLost)
	assert.Equal(t, job.ID, lost.Lease.JobID)
	rec := logs.wait(t, "lease lost: the handler's outcome is dropped")
	assert.Equal(t, job.ID.String(), rec["job"])
	assert.Equal(t, "task", rec["machine"])
	assert.Equal(t, jobstatetest.WorkerName, rec["worker"])
	assert.Equal(t, "RUNNING", rec["state"])
	assert.Equal(t, "1", rec["attempt"])
	assert.Zero(t, ledger.Applied(job.ID), "a lost lease commits nothing")
	assert.Equal(t, 1, e.Sweep().Retried, "the sweep recovers the job")
	cancel()
	require.NoError(t, recv(t, errc))
}

// TestCancelCancelsHandler: cancelling a running job cancels its
// handler's context, with a *JobCancelledError, at the next heartbeat.
func TestCancelCancelsHandler(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	var ledger jobstatetest.Ledger
	h.result.Effect = ledger.Effect
	w := e.Worker(quiet(worker.Handle("task", h, 1))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, h.started)
	_, err := e.Engine.Cancel(e.Ctx, job.ID, jobstate.Call{Actor: "alice"})
	require.NoError(t, err)
	waitPending(t, e.Clock, 3)
	e.Advance(10 * time.Second)
	cause := recv(t, h.causes)
	var jc *worker.JobCancelledError
	require.ErrorAs(t, cause, &jc)
	assert.ErrorIs(t, cause, jobstate.ErrCancelled)
	assert.Equal(t, job.ID, jc.JobID)
	cancel()
	require.NoError(t, recv(t, errc))
	e.AssertState(job.ID, cancelled)
	assert.Zero(t, ledger.Applied(job.ID))
}

// TestAdvanceAfterLossCancelsHandler: an Advance refused because the
// lease was lost cancels the handler's context too.
func TestAdvanceAfterLossCancelsHandler(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	var cause error
	e.Run("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		_, err := e.Engine.RecoverWorker(ctx, jobstatetest.WorkerName) // as if another process took over
		require.NoError(t, err)
		_, err = tk.Advance(ctx, "fetch", jobstate.Call{})
		require.ErrorIs(t, err, jobstate.ErrLeaseLost)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ok()
	}))
	var lost *worker.LeaseLostError
	require.ErrorAs(t, cause, &lost)
	j := e.Get(job.ID)
	assert.Equal(t, queued, j.State, "retried by the recovery; the handler's return was dropped")
	assert.Equal(t, 1, j.RetryCount)
	assert.Equal(t, 1, j.Attempt)
}

// logSink is a slog.Handler that keeps every record's message and
// attributes, for tests to wait on.
type logSink struct {
	attrs []slog.Attr
	st    *sinkState
}

type sinkState struct {
	mu      sync.Mutex
	records []map[string]string
	changed chan struct{}
}

func newLogSink() *logSink {
	return &logSink{st: &sinkState{changed: make(chan struct{})}}
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	for _, a := range s.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	st := s.st
	st.mu.Lock()
	st.records = append(st.records, m)
	close(st.changed)
	st.changed = make(chan struct{})
	st.mu.Unlock()
	return nil
}

func (s *logSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSink{attrs: append(append([]slog.Attr(nil), s.attrs...), as...), st: s.st}
}

func (s *logSink) WithGroup(string) slog.Handler { return s }

// wait returns the first record with message msg, waiting for it.
func (s *logSink) wait(t testing.TB, msg string) map[string]string {
	t.Helper()
	deadline := time.After(time.Minute)
	st := s.st
	for {
		st.mu.Lock()
		for _, r := range st.records {
			if r["msg"] == msg {
				st.mu.Unlock()
				return r
			}
		}
		ch := st.changed
		st.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no log record %q", msg)
		}
	}
}
