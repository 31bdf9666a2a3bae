package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// The backoff between tries of a write that found the store unreachable:
// the first wait, doubled after each try up to the last. Each wait is
// randomised by the worker's jitter, so that the writes of many jobs do
// not all arrive together when the store is back.
const (
	firstRetry = 100 * time.Millisecond
	maxRetry   = 5 * time.Second
)

// retryDelay returns the wait before try n+1 (n from 0).
func retryDelay(n int) time.Duration {
	if n >= 6 {
		return maxRetry
	}
	return min(firstRetry<<n, maxRetry)
}

// ending is one of the runtime's writes that end a task's execution
// (Succeed, Fail, Snooze, Finish, the give-back), made while the store
// may be unreachable. A try that finds the store unreachable with nothing
// applied (jobstate.ErrUnavailable) is made again after a backoff on the
// worker's clock, for as long as the lease is live on the engine's clock
// and stop is open; then the runtime gives up, and the sweep recovers the
// job when its lease has lapsed. A try whose outcome is unknown
// (jobstate.ErrOutcomeUnknown) is settled by reading the execution: the
// caller decides from what it finds.
type ending struct {
	w     *Worker
	t     *Task
	lease jobstate.Lease
	// back is set for a give-back, whose tries end at a hard stop; the
	// tries of a handler's outcome end with the shutdown's grace period.
	back bool
	// tries counts the tries that found the store unreachable, for the
	// backoff.
	tries int
	// unsure is set once a try's outcome was unknown: a later refusal
	// may then be the trace of that try's own write, and is checked
	// against the execution.
	unsure bool
}

// tryResult says how a try ended.
type tryResult int

const (
	// answered: the store answered, with success or a refusal.
	answered tryResult = iota
	// unknown: the store may have applied the write; read the execution.
	unknown
	// gaveUp: the lease lapsed or stop closed while the store could not
	// be reached; the runtime has logged it and leaves the job to the
	// sweep.
	gaveUp
)

// ending returns the ending of t's execution by its handler's outcome,
// or by a give-back when back is set.
func (w *Worker) ending(t *Task, back bool) ending {
	return ending{w: w, t: t, lease: t.Lease(), back: back}
}

// stop returns the channel that ends the tries.
func (e *ending) stop() <-chan struct{} {
	if e.back {
		return e.w.givingBackStop()
	}
	return e.w.writesStop()
}

// try calls f, the write named op, until the store answers, the outcome
// is unknown, or the runtime gives up. It returns f's last error.
func (e *ending) try(op string, f func(context.Context) error) (error, tryResult) {
	w := e.w
	ctx := w.ops()
	for {
		m := w.out.mark()
		err := f(ctx)
		if !unavailable(err) {
			w.out.answered(ctx, m, err)
			return err, answered
		}
		w.out.failed(ctx, m, op, err, e.t.attrs()...)
		if !e.pause(op, err) {
			return err, gaveUp
		}
		if errors.Is(err, jobstate.ErrOutcomeUnknown) {
			e.unsure = true
			return err, unknown
		}
	}
}

// pause waits out the backoff before the next try, and reports whether
// to make it. It returns false, having logged why, when the lease has
// lapsed on the engine's clock or stop closed.
func (e *ending) pause(op string, err error) bool {
	w := e.w
	left := e.lease.ExpiresAt.Sub(w.eng.Now())
	if left <= 0 {
		e.giveUp(op, err, "the store was unreachable until the lease lapsed: the sweep recovers the job")
		return false
	}
	d := min(w.jittered(retryDelay(e.tries)), left)
	e.tries++
	w.out.retry()
	tm := w.clock.NewTimer(d)
	select {
	case <-tm.C():
	case <-e.stop():
		tm.Stop()
		e.giveUp(op, err, "the store is unreachable and the worker is stopping: the lease is left to lapse, the sweep recovers the job")
		return false
	}
	if !w.eng.Now().Before(e.lease.ExpiresAt) {
		e.giveUp(op, err, "the store was unreachable until the lease lapsed: the sweep recovers the job")
		return false
	}
	return true
}

// giveUp logs, at DEBUG (the outage itself was logged), that the runtime
// stops trying the write op, and counts the lease left to lapse.
func (e *ending) giveUp(op string, err error, msg string) {
	e.w.out.lapse()
	e.w.logTask(e.w.ops(), slog.LevelDebug, e.t, msg, slog.String("op", op), slog.Any("error", err))
}

// read returns the execution as stored, reading until the store answers
// (nil when the job or the execution is gone); ok is false when the
// runtime gave up, having logged why.
func (e *ending) read() (x *jobstate.Execution, ok bool) {
	var execs []jobstate.Execution
	for {
		err, r := e.try("read executions", func(ctx context.Context) error {
			var err error
			execs, err = e.w.eng.Executions(ctx, e.lease.JobID)
			return err
		})
		switch {
		case r == gaveUp:
			return nil, false
		case r == unknown:
			continue // a read applies nothing: read again
		case errors.Is(err, jobstate.ErrNotFound):
			return nil, true
		case err != nil:
			e.w.logTask(e.w.ops(), slog.LevelWarn, e.t, "the outcome of a write is unknown and its execution cannot be read: the lease is left to lapse", slog.Any("error", err))
			return nil, false
		}
		return findExec(execs, e.lease.ExecID), true
	}
}

// findExec returns a copy of the execution with id, or nil.
func findExec(execs []jobstate.Execution, id uuid.UUID) *jobstate.Execution {
	for i := range execs {
		if execs[i].ID == id {
			x := execs[i]
			return &x
		}
	}
	return nil
}

// pending reports whether x, read after a write of unknown outcome, shows
// that the write was not applied and the lease is still held uncommitted:
// the write is to be made again.
func pending(x *jobstate.Execution) bool {
	return x != nil && (x.Status == jobstate.ExecLeased || x.Status == jobstate.ExecInProgress)
}

// mayBeOwn reports whether a refusal, after a try of unknown outcome, may
// be the trace of that try's own write (the execution committed, finished
// or ended by it).
func mayBeOwn(err error) bool {
	return errors.Is(err, jobstate.ErrLeaseLost) || errors.Is(err, jobstate.ErrAlreadyCommitted)
}

// endedElsewhere logs, at DEBUG, that x, read after a write of unknown
// outcome, had been ended (or removed) by another write: the handler's
// outcome is dropped, as with a lost lease, during an outage whose
// records tell the rest.
func (e *ending) endedElsewhere(op string, x *jobstate.Execution, err error) {
	args := []any{slog.String("op", op), slog.Any("error", err)}
	if x != nil {
		args = append(args, slog.String("status", string(x.Status)), slog.String("reason", x.Error))
	}
	e.w.logTask(e.w.ops(), slog.LevelDebug, e.t, "execution ended by another write while the store's answer was lost: the handler's outcome is dropped", args...)
}
