package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jobstate/jobstate"
)

// Handler runs one claimed job. Its return decides the execution's end:
//
//   - a nil error commits and finishes in one write (Engine.Succeed) with
//     the returned result and effect: the effect runs exactly once per
//     job, inside the commit boundary;
//   - an error made by Snooze gives the job back, to run again after the
//     delay, without counting a failure (Engine.Snooze);
//   - any other error fails the execution (Engine.Fail): the machine's
//     classifier, or jobstate.Permanent, Retryable or RetryAfter on the
//     error, decides between a retry with backoff and a failure.
//
// A panic fails the execution with a *PanicError. ctx is cancelled, with
// a cause from context.Cause, when the lease is lost (*LeaseLostError),
// the job is cancelled (*JobCancelledError), the machine's timeout passes
// (*TimeoutError), or the worker stops and its grace period ends
// (*ShutdownError, the lease already given back). After a lost lease, a
// cancel or a shutdown the return value is ignored: the engine would
// refuse it. A handler that moved its job out of the active states with
// Task.Advance has ended its execution, and its return is ignored too.
type Handler interface {
	Work(ctx context.Context, t *Task) (jobstate.CommitInput, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t *Task) (jobstate.CommitInput, error)

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, t *Task) (jobstate.CommitInput, error) {
	return f(ctx, t)
}

// Task is a handler's hold on its job: the job, its lease, and the moves
// the lease allows. Its methods are safe for concurrent use; it is valid
// only until the handler returns.
type Task struct {
	w *Worker
	r *route

	mu    sync.Mutex
	job   jobstate.Job
	lease jobstate.Lease
	// ended is set when an Advance took the job out of the states that
	// hold leases: the execution is over, there is nothing to commit.
	ended bool
	// done is set when the handler returned: no more heartbeats.
	done bool

	state  atomic.Int32
	ctx    context.Context
	cancel context.CancelCauseFunc
	hb     Timer
	to     Timer
	logger *slog.Logger
}

// Task states: a task is given back or finished, never both.
const (
	taskRunning int32 = iota
	taskFinishing
	taskGivenBack
)

// Job returns the job as last written through this task: as claimed, then
// as each Advance left it.
func (t *Task) Job() jobstate.Job {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.job
}

// Lease returns the task's lease, with the expiry of its last renewal.
func (t *Task) Lease() jobstate.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease
}

// Worker returns the name of the worker running the task.
func (t *Task) Worker() string { return t.w.name }

// Logger returns the worker's logger with the job's attributes (job,
// machine, state at claim, attempt).
func (t *Task) Logger() *slog.Logger {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.logger == nil {
		t.logger = t.w.log.With(t.attrsLocked()...)
	}
	return t.logger
}

func (t *Task) attrs() []any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attrsLocked()
}

func (t *Task) attrsLocked() []any {
	return []any{
		slog.String("job", t.job.ID.String()),
		slog.String("machine", t.job.Machine),
		slog.String("state", string(t.job.State)),
		slog.Int("attempt", t.lease.Token),
	}
}

// Advance fires the user event ev through the lease (Engine.Advance): a
// move between active states (CLAIMED → DOWNLOADING → STREAMING), or out
// of them (a rejection), which ends the execution without a commit; the
// handler's return is then ignored. Errors are the engine's; a lost lease
// or a cancel also cancels the handler's context with its cause. With an
// error matching jobstate.ErrIncomplete part of the move was written, and
// the job returned (and Job) is as written.
func (t *Task) Advance(ctx context.Context, ev jobstate.Event, c jobstate.Call) (jobstate.Job, error) {
	job, err := t.w.eng.Advance(ctx, t.Lease(), ev, c)
	if err != nil && !errors.Is(err, jobstate.ErrIncomplete) {
		t.lost(err)
		return job, err
	}
	// With ErrIncomplete, part of the move was written: job is as written.
	t.mu.Lock()
	t.job = job
	if !(job.Kind == jobstate.KindActive || (job.Kind == jobstate.KindReady && t.r.maxExec > 1)) {
		t.ended = true
	}
	t.mu.Unlock()
	return job, err
}

// Heartbeat renews the lease now, besides the automatic heartbeats. Errors
// as for Engine.Heartbeat; a lost lease or a cancel also cancels the
// handler's context with its cause.
func (t *Task) Heartbeat(ctx context.Context) error {
	l, err := t.w.eng.Heartbeat(ctx, t.Lease())
	if err != nil {
		t.lost(err)
		return err
	}
	t.renewed(l)
	return nil
}

func (t *Task) renewed(l jobstate.Lease) {
	t.mu.Lock()
	if l.ExpiresAt.After(t.lease.ExpiresAt) {
		t.lease.ExpiresAt = l.ExpiresAt
	}
	t.mu.Unlock()
}

// lost cancels the handler's context when err says the lease is gone, and
// reports whether it did.
func (t *Task) lost(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lostLocked(err)
}

// lostLocked is lost with t.mu held.
func (t *Task) lostLocked(err error) bool {
	switch {
	case errors.Is(err, jobstate.ErrCancelled):
		t.cancel(&JobCancelledError{JobID: t.lease.JobID, Err: err})
	case errors.Is(err, jobstate.ErrLeaseLost), errors.Is(err, jobstate.ErrAlreadyCommitted), errors.Is(err, jobstate.ErrNotFound):
		t.cancel(&LeaseLostError{Lease: t.lease, Err: err})
	default:
		return false
	}
	return true
}

// over reports, with t.mu held, whether the heartbeats are over: the
// handler has returned (the write that ends the execution decides what
// becomes of the lease, and reports it) or its lease was given back.
func (t *Task) over() bool {
	return t.done || t.state.Load() != taskRunning
}

// beat is the heartbeat timer's function: renew the lease, then re-arm.
// Its records are DEBUG or about the store: what becomes of a handler
// whose lease is lost or whose job is cancelled is logged once, when the
// handler returns (execute). A heartbeat answered after the handler
// returned is ignored: the execution may have been ended by the runtime
// itself meanwhile.
func (t *Task) beat() {
	t.mu.Lock()
	if t.over() {
		t.mu.Unlock()
		return
	}
	lease := t.lease
	t.mu.Unlock()
	w := t.w
	ctx := w.base
	m := w.out.mark()
	l, err := w.eng.Heartbeat(ctx, lease)
	down := unavailable(err)
	if down {
		w.out.failed(ctx, m, "heartbeat", err, t.attrs()...)
	} else {
		w.out.answered(ctx, m, err)
	}
	t.mu.Lock()
	if t.over() {
		attrs := t.attrsLocked()
		t.mu.Unlock()
		if err != nil {
			w.logf(ctx, slog.LevelDebug, "heartbeat answered after the handler returned: result ignored", append(attrs, slog.Any("error", err))...)
		}
		return
	}
	switch {
	case err == nil:
		if l.ExpiresAt.After(t.lease.ExpiresAt) {
			t.lease.ExpiresAt = l.ExpiresAt
		}
	case !down && isLoss(err):
		// Logged before the handler learns of it, so that the record
		// precedes whatever the handler does next.
		w.logf(ctx, slog.LevelDebug, "heartbeat refused: stopping the handler", append(t.attrsLocked(), slog.Any("error", err))...)
		t.lostLocked(err)
		t.mu.Unlock()
		return
	case !w.eng.Now().Before(lease.ExpiresAt):
		// The store could not be reached until the lease ran out.
		w.logf(ctx, slog.LevelDebug, "lease expired: heartbeats failed", append(t.attrsLocked(), slog.Any("error", err))...)
		if down {
			w.out.lapse()
		}
		t.cancel(&LeaseLostError{Lease: lease, Err: err})
		t.mu.Unlock()
		return
	case down:
		w.out.retry() // at the next interval
	default:
		attrs := t.attrsLocked()
		t.mu.Unlock()
		w.logf(ctx, slog.LevelWarn, "heartbeat failed; will retry", append(attrs, slog.Any("error", err))...)
		t.mu.Lock()
		if t.over() {
			t.mu.Unlock()
			return
		}
	}
	t.hb.Reset(t.r.hbEvery)
	t.mu.Unlock()
}

// isLoss reports whether err says the lease is gone (lost, cancelled,
// another execution committed, the job removed).
func isLoss(err error) bool {
	return errors.Is(err, jobstate.ErrLeaseLost) || errors.Is(err, jobstate.ErrAlreadyCommitted) || errors.Is(err, jobstate.ErrNotFound)
}
