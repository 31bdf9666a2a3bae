package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/jobstate/jobstate"
)

// newTask makes the task of a claimed job and registers it. After the
// grace period has ended no task may run: the job is given back at once
// and nil returned.
func (w *Worker) newTask(r *route, c jobstate.Claimed) *Task {
	t := &Task{w: w, r: r, job: c.Job, lease: c.Lease}
	ctx, cancel := context.WithCancelCause(w.base)
	t.cancel = cancel
	t.ctx = ctx
	w.launched.Add(1)
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		t.state.Store(taskGivenBack)
		cancel(&ShutdownError{Grace: w.grace, Hard: true})
		w.giveBack(t)
		return nil
	}
	w.tasks[t] = struct{}{}
	w.mu.Unlock()
	return t
}

// launch runs a claimed job in a goroutine of its own, which holds one
// slot of its machine and one overall slot (taken by the caller) until it
// finds no more work.
func (w *Worker) launch(r *route, c jobstate.Claimed) {
	t := w.newTask(r, c)
	w.wg.Add(1)
	go w.work(r, t)
}

// work runs t, then, while its machine may have more due jobs, claims and
// runs the next one in the same goroutine; then it frees its slots. On a
// store without batch claims it claims one job (one claim per job costs
// least there). On a store with batch claims, when no claim of the
// machine is in flight, it claims for its own slot and every free slot of
// the machine in one batch, and starts the others' goroutines, so that
// freed slots are filled together, one claim at a time, and a lone
// handler goroutine never hands its slot over to another.
func (w *Worker) work(r *route, t *Task) {
	defer w.wg.Done()
	for {
		if t != nil {
			w.execute(t)
		}
		var ok bool
		if w.batch {
			t, ok = w.nextBatch(r)
		} else {
			t, ok = w.next(r)
		}
		if !ok {
			break
		}
	}
	r.running.Add(-1)
	w.running.Add(-1)
	r.freed()
	if w.starved.Load() || (w.batch && r.more.Load()) || w.draining() {
		w.poke()
	}
}

// next claims the next job of r for a goroutine that has just finished
// one, when r may have more and nothing stands against it. ok is false
// when there is nothing to do; t may be nil with ok true when the job
// claimed had to be given back at once.
func (w *Worker) next(r *route) (t *Task, ok bool) {
	if w.stopping() || !r.more.Load() || w.starved.Load() || w.take(1) == 0 {
		return nil, false
	}
	c, err := w.eng.Claim(w.base, r.request(w.name))
	if err != nil {
		w.refund(1)
		r.more.Store(false)
		if !errors.Is(err, jobstate.ErrNoJob) {
			w.logf(w.base, slog.LevelError, "claim failed", slog.String("machine", r.machine), slog.Any("error", err))
		}
		return nil, false
	}
	return w.newTask(r, c), true
}

// nextBatch is next on a store with batch claims: it claims, for the
// calling goroutine's slot and the free slots of r, in one batch, unless
// a claim of r is in flight (it fills the free slots), starts the jobs
// beyond the first in goroutines of their own, and returns the first.
func (w *Worker) nextBatch(r *route) (t *Task, ok bool) {
	if w.stopping() || !r.more.Load() || w.starved.Load() {
		return nil, false
	}
	if !r.enter() {
		return nil, false
	}
	w.gather(r, 1, r.gatherDeadline(time.Now()))
	extra, _ := w.reserve(r, int64(r.limit))
	got, _, full := w.claimReserved(w.base, r, 1, extra)
	if full && w.hasFree(r) {
		w.poke() // slots freed while this claim was in flight
	}
	if len(got) == 0 {
		return nil, false
	}
	for _, c := range got[1:] {
		w.launch(r, c)
	}
	return w.newTask(r, got[0]), true
}

// execute runs one task's handler and ends its execution.
func (w *Worker) execute(t *Task) {
	ctx := t.ctx
	defer func() {
		t.cancel(context.Canceled)
		w.mu.Lock()
		delete(w.tasks, t)
		w.mu.Unlock()
	}()
	w.logTask(ctx, slog.LevelDebug, t, "job claimed")
	t.mu.Lock()
	t.hb = w.clock.AfterFunc(t.r.hbEvery, t.beat)
	if t.r.timeoutSet {
		id, d := t.lease.JobID, t.r.timeout
		t.to = w.clock.AfterFunc(d, func() { t.cancel(&TimeoutError{JobID: id, Timeout: d}) })
	}
	t.mu.Unlock()

	var res jobstate.CommitInput
	var err error
	started := true
	if t.r.requireStart {
		if _, serr := w.eng.Start(ctx, t.Lease()); serr != nil {
			started = false
			if !t.lost(serr) {
				err = fmt.Errorf("worker: start: %w", serr)
			}
		}
	}
	if started {
		res, err = w.call(ctx, t)
	}

	t.mu.Lock()
	t.done = true
	t.hb.Stop()
	if t.to != nil {
		t.to.Stop()
	}
	ended := t.ended
	t.mu.Unlock()
	cause := context.Cause(ctx)
	if !t.state.CompareAndSwap(taskRunning, taskFinishing) {
		w.logTask(ctx, slog.LevelDebug, t, "handler returned after its lease was given back", slog.Any("error", err))
		return
	}
	var lost *LeaseLostError
	var cancelled *JobCancelledError
	switch {
	case ended:
		w.logTask(ctx, slog.LevelDebug, t, "execution ended by a move out of the active states")
	case errors.As(cause, &lost):
		w.logTask(ctx, slog.LevelWarn, t, "lease lost: the handler's outcome is dropped", slog.Any("cause", cause), slog.Any("error", err))
	case errors.As(cause, &cancelled):
		w.logTask(ctx, slog.LevelInfo, t, "job cancelled while running", slog.Any("error", err))
	case err == nil:
		w.end(t, func() { w.succeed(t, res) })
	default:
		w.end(t, func() { w.fail(t, err, cause) })
	}
}

// end makes the write that ends t's execution: in the background when
// commits ahead are allowed (the caller's slot is then free at once),
// waiting for a token when as many are in flight, and in the caller's
// goroutine when none are allowed. t is in the finishing state, so
// shutdown never gives its lease back.
func (w *Worker) end(t *Task, write func()) {
	if cap(w.ahead) == 0 {
		write()
		return
	}
	w.ahead <- struct{}{}
	w.pending.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		write()
		<-w.ahead
		if w.pending.Add(-1) == 0 && w.draining() {
			w.poke()
		}
	}()
}

// call runs the handler, turning a panic into a *PanicError.
func (w *Worker) call(ctx context.Context, t *Task) (res jobstate.CommitInput, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			w.logTask(ctx, slog.LevelError, t, "handler panicked", slog.Any("panic", v))
		}
	}()
	return t.r.h.Work(ctx, t)
}

// succeed commits the handler's result and effect and finishes.
func (w *Worker) succeed(t *Task, res jobstate.CommitInput) {
	ctx := w.ops()
	lease := t.Lease()
	_, err := w.eng.Succeed(ctx, lease, res)
	switch {
	case err == nil:
		w.logTask(ctx, slog.LevelDebug, t, "job succeeded")
	case errors.Is(err, jobstate.ErrIncomplete):
		// The commit (and its effect) is recorded; only the succeed rule's
		// effect failed. Finish once more, else the sweep finalizes the
		// job when the lease lapses, without applying the effect again.
		if _, ferr := w.eng.Finish(ctx, lease); ferr != nil {
			w.logTask(ctx, slog.LevelWarn, t, "committed but not finished: the sweep will finalize the job", slog.Any("error", err), slog.Any("finish_error", ferr))
			return
		}
		w.logTask(ctx, slog.LevelDebug, t, "job succeeded (finished after an incomplete succeed)", slog.Any("error", err))
	case errors.Is(err, jobstate.ErrLeaseLost), errors.Is(err, jobstate.ErrAlreadyCommitted):
		w.logTask(ctx, slog.LevelWarn, t, "commit refused: nothing applied", slog.Any("error", err))
	default:
		// Nothing was written: the effect failed, the table refused, or the
		// store failed. Fail the execution with the reason.
		cause := fmt.Errorf("worker: commit refused: %w", err)
		if errors.Is(err, jobstate.ErrInvalidTransition) {
			cause = jobstate.Permanent(cause)
		}
		w.logTask(ctx, slog.LevelWarn, t, "commit refused: failing the execution", slog.Any("error", err))
		w.failWith(t, cause)
	}
}

// fail ends the execution after a handler error: a snooze or a failure.
// (A handler stopped by the shutdown has had its lease given back
// already: its outcome never comes here.)
func (w *Worker) fail(t *Task, err, cause error) {
	ctx := w.ops()
	var sn *SnoozeError
	switch {
	case errors.As(err, &sn):
		if _, serr := w.eng.Snooze(ctx, t.Lease(), sn.Delay); serr != nil {
			w.logTask(ctx, slog.LevelWarn, t, "snooze refused", slog.Any("error", serr))
			return
		}
		w.logTask(ctx, slog.LevelDebug, t, "job snoozed", slog.Duration("delay", sn.Delay))
	default:
		if cause != nil && errors.Is(err, context.Canceled) && !errors.Is(err, cause) {
			// The handler returned its context's error: record why.
			err = fmt.Errorf("%w (handler returned: %w)", cause, err)
		}
		w.failWith(t, err)
	}
}

func (w *Worker) failWith(t *Task, err error) {
	ctx := w.ops()
	job, ferr := w.eng.Fail(ctx, t.Lease(), err)
	if ferr != nil {
		w.logTask(ctx, slog.LevelWarn, t, "fail refused", slog.Any("error", err), slog.Any("fail_error", ferr))
		return
	}
	w.logTask(ctx, slog.LevelInfo, t, "job failed", slog.Any("error", err), slog.String("now", string(job.State)), slog.Int("retries", job.RetryCount))
}

// giveBack ends the task's execution without counting a failure, so that
// any worker can claim the job at once (Engine.Snooze with no delay). A
// machine whose table has neither a retry nor an abandon rule from the
// job's state cannot take it back: the lease is left to lapse, and the
// sweep then treats it as lost.
func (w *Worker) giveBack(t *Task) {
	ctx := w.ops()
	_, err := w.eng.Snooze(ctx, t.Lease(), 0)
	switch {
	case err == nil:
		w.logTask(ctx, slog.LevelInfo, t, "lease given back")
	case errors.Is(err, jobstate.ErrAlreadyCommitted):
		w.logTask(ctx, slog.LevelInfo, t, "not given back: committed; finishing", slog.Any("error", err))
		_, _ = w.eng.Finish(ctx, t.Lease())
	default:
		w.logTask(ctx, slog.LevelWarn, t, "lease not given back: it will lapse", slog.Any("error", err))
	}
}

// ops is the context of the runtime's own engine calls that must
// complete: the handlers' base context, which carries no cancellation.
func (w *Worker) ops() context.Context { return w.base }
