package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// gateStore holds the first Update made after arm until open is closed,
// closing entered when that Update arrives; every other call passes. It
// wraps the store through the interface, so it offers no capability but
// those of jobstate.Store.
type gateStore struct {
	jobstate.Store
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func newGateStore(s jobstate.Store) *gateStore {
	return &gateStore{Store: s, entered: make(chan struct{}), open: make(chan struct{})}
}

func (s *gateStore) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.open
	}
	return s.Store.Update(ctx, id, fn)
}

// records returns a copy of every record kept so far.
func (s *logSink) records() []map[string]string {
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]map[string]string(nil), st.records...)
}

// atLeast returns the records kept so far at level or above.
func (s *logSink) atLeast(t testing.TB, level slog.Level) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, r := range s.records() {
		var l slog.Level
		require.NoError(t, l.UnmarshalText([]byte(r["level"])))
		if l >= level {
			out = append(out, r)
		}
	}
	return out
}

// named returns the records kept so far with message msg.
func (s *logSink) named(msg string) []map[string]string {
	var out []map[string]string
	for _, r := range s.records() {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// waitAny returns the first record whose message is one of msgs, waiting
// for it.
func (s *logSink) waitAny(t testing.TB, msgs ...string) map[string]string {
	t.Helper()
	deadline := time.After(time.Minute)
	st := s.st
	for {
		st.mu.Lock()
		for _, r := range st.records {
			for _, m := range msgs {
				if r["msg"] == m {
					st.mu.Unlock()
					return r
				}
			}
		}
		ch := st.changed
		st.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no log record among %q", msgs)
		}
	}
}

// msgs lists the messages of records.
func msgs(records []map[string]string) []string {
	out := make([]string, len(records))
	for i, r := range records {
		out[i] = r["level"] + " " + r["msg"]
	}
	return out
}

// TestHeartbeatAfterOwnFailIsNotWarned: a heartbeat in flight while the
// handler returns and the runtime fails the execution comes back refused
// (the execution is over): that is no lost lease, and nothing is logged
// at WARN or above.
func TestHeartbeatAfterOwnFailIsNotWarned(t *testing.T) {
	gs := newGateStore(memstore.New())
	env := newStoreEnv(t, gs)
	c, err := env.eng.Create(context.Background(), jobstate.NewJob{Machine: "task"})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		close(started)
		<-release
		return jobstate.CommitInput{}, errors.New("upstream timeout")
	})
	logs := newLogSink()
	w, err := worker.New(env.eng, quiet(worker.WithName("w1"), worker.WithClock(env.clock), worker.WithLogger(slog.New(logs)),
		worker.Handle("task", h, 1))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, started)
	waitPending(t, env.clock, 3) // poll, sweep, heartbeat
	gs.armed.Store(true)
	env.clock.Advance(10 * time.Second) // the heartbeat fires and is held in the store
	recv(t, gs.entered)
	close(release) // the handler returns; the runtime fails the execution
	logs.wait(t, "job failed")
	close(gs.open) // the heartbeat reaches the store after the failure
	logs.waitAny(t, "lease lost", "heartbeat answered after the handler returned: result ignored")
	cancel()
	require.NoError(t, recv(t, errc))

	j, err := env.eng.Get(context.Background(), c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, queued, j.State)
	assert.Equal(t, 1, j.RetryCount, "failed once, by the runtime")
	assert.Empty(t, msgs(logs.atLeast(t, slog.LevelWarn)), "the runtime's own failure is not a lost lease")
}

// TestCancelOfRunningJobIsInfo: a user's cancel of a running job is
// logged once, at INFO, and nothing at WARN or above.
func TestCancelOfRunningJobIsInfo(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	logs := newLogSink()
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithLogger(slog.New(logs)))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, h.started)
	_, err := e.Engine.Cancel(e.Ctx, job.ID, jobstate.Call{Actor: "alice"})
	require.NoError(t, err)
	waitPending(t, e.Clock, 3)
	e.Advance(10 * time.Second)
	var jc *worker.JobCancelledError
	require.ErrorAs(t, recv(t, h.causes), &jc)
	rec := logs.wait(t, "job cancelled while running")
	cancel()
	require.NoError(t, recv(t, errc))

	assert.Equal(t, "INFO", rec["level"])
	assert.Equal(t, job.ID.String(), rec["job"])
	assert.Len(t, logs.named("job cancelled while running"), 1)
	assert.Empty(t, msgs(logs.atLeast(t, slog.LevelWarn)), "a user's cancel needs no operator")
	e.AssertState(job.ID, cancelled)
}

// TestLeaseLostWhileRunningIsOneWarn: a lease lost while the handler ran
// wasted its work: one WARN record says so, when the handler returns.
func TestLeaseLostWhileRunningIsOneWarn(t *testing.T) {
	e := newEnv(t)
	e.Create(jobstate.NewJob{Machine: "task"})
	h := newBlocking()
	logs := newLogSink()
	w := e.Worker(quiet(worker.Handle("task", h, 1), worker.WithLogger(slog.New(logs)))...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	recv(t, h.started)
	waitPending(t, e.Clock, 3)
	e.Advance(31 * time.Second) // the heartbeat comes after the lease ran out
	var lost *worker.LeaseLostError
	require.ErrorAs(t, recv(t, h.causes), &lost)
	logs.wait(t, "lease lost: the handler's outcome is dropped")
	cancel()
	require.NoError(t, recv(t, errc))
	warns := logs.atLeast(t, slog.LevelWarn)
	require.Len(t, warns, 1, "%q", msgs(warns))
	assert.Equal(t, "WARN", warns[0]["level"])
	assert.Equal(t, "lease lost: the handler's outcome is dropped", warns[0]["msg"])
}
