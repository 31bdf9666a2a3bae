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
// grace period has ended, or a hard stop, no task may run: the job is
// given back at once (one try once stopped hard) and nil returned.
func (w *Worker) newTask(r *route, c jobstate.Claimed) *Task {
	t := &Task{w: w, r: r, job: c.Job, lease: c.Lease}
	ctx, cancel := context.WithCancelCause(w.base)
	t.cancel = cancel
	t.ctx = ctx
	w.launched.Add(1)
	w.mu.Lock()
	if w.ended || w.level >= 2 {
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
	if r.rewake.Swap(false) || w.starved.Load() || (w.batch && r.more.Load()) || w.draining() {
		w.poke()
	}
}

// next claims the next job of r for a goroutine that has just finished
// one, when r may have more and nothing stands against it. ok is false
// when there is nothing to do; t may be nil with ok true when the job
// claimed had to be given back at once.
func (w *Worker) next(r *route) (t *Task, ok bool) {
	if w.stopping() || !r.more.Load() || w.starved.Load() || !w.claimStart() {
		return nil, false
	}
	defer w.claims.Done()
	if w.take(1) == 0 {
		return nil, false
	}
	m := w.out.mark()
	c, err := w.eng.Claim(w.base, r.request(w.name))
	w.claimed(w.base, m, r, err)
	if err != nil {
		w.refund(1)
		r.more.Store(false)
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
	if !w.claimStart() {
		return nil, false
	}
	defer w.claims.Done()
	if !r.enter() {
		return nil, false
	}
	w.gather(r, 1, r.gatherDeadline(time.Now()))
	extra, _ := w.reserve(r, int64(r.limit))
	got, _, full := w.claimReserved(w.base, r, 1, extra)
	if r.rewake.Swap(false) || (full && w.hasFree(r)) {
		w.poke() // woken, or slots freed, while this claim was in flight
	}
	if len(got) == 0 {
		return nil, false
	}
	for _, c := range got[1:] {
		w.launch(r, c)
	}
	return w.newTask(r, got[0]), true
}

// claimStart marks a claim of a handler goroutine in flight (claims),
// unless the first stop signal has arrived: then it reports false and the
// goroutine claims nothing. The caller ends the mark with claims.Done once
// the jobs claimed are started or given back.
func (w *Worker) claimStart() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.level >= 1 {
		return false
	}
	w.claims.Add(1)
	return true
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
		started, err = w.start(t)
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
	case errors.As(cause, &lost) && unavailable(cause):
		// The heartbeats could not reach the store until the lease lapsed:
		// the outage is logged, and its record counts the lease.
		w.logTask(ctx, slog.LevelDebug, t, "lease lapsed while the store was unreachable: the handler's outcome is dropped", slog.Any("cause", cause), slog.Any("error", err))
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

// start starts t's execution (Engine.Start) before its handler runs, on a
// machine that requires it, trying again while the store cannot be
// reached, the lease is live and the handler's context has not ended. It
// reports whether the handler is to run, and the error to fail the
// execution with when Start was refused for another reason than a lost
// lease.
func (w *Worker) start(t *Task) (bool, error) {
	ctx := w.ops()
	for tries := 0; ; tries++ {
		lease := t.Lease() // renewed by the heartbeats meanwhile
		m := w.out.mark()
		_, err := w.eng.Start(ctx, lease)
		if !unavailable(err) {
			w.out.answered(ctx, m, err)
			switch {
			case err == nil:
				return true, nil
			case t.lost(err):
				return false, nil
			default:
				return false, fmt.Errorf("worker: start: %w", err)
			}
		}
		w.out.failed(ctx, m, "start", err, t.attrs()...)
		if t.ctx.Err() != nil {
			// Lost, cancelled or given back (the cause says so), or timed
			// out (the execution fails with it).
			return false, context.Cause(t.ctx)
		}
		if !w.eng.Now().Before(lease.ExpiresAt) {
			w.out.lapse()
			t.cancel(&LeaseLostError{Lease: lease, Err: err})
			return false, nil
		}
		d := min(w.jittered(retryDelay(tries)), lease.ExpiresAt.Sub(w.eng.Now()))
		w.out.retry()
		tm := w.clock.NewTimer(d)
		select {
		case <-tm.C():
		case <-t.ctx.Done():
			tm.Stop()
			return false, context.Cause(t.ctx)
		}
	}
}

// end makes the write that ends t's execution: in the background when
// commits ahead are allowed and the pace leaves room for one more (the
// caller's slot is then free at once), waiting for a token when as many
// are in flight as WithCommitsAhead allows; in the caller's goroutine
// when none are allowed or the pace leaves no room. t is in the
// finishing state, so shutdown never gives its lease back.
func (w *Worker) end(t *Task, write func()) {
	if cap(w.ahead) == 0 {
		write()
		return
	}
	timed := func() {
		left := t.Lease().ExpiresAt.Sub(w.eng.Now())
		began := time.Now()
		write()
		w.pace.took(began, time.Since(began), left)
	}
	if !w.pace.room(w.pending.Load()) {
		timed()
		return
	}
	w.ahead <- struct{}{}
	w.pending.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		timed()
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

// succeed commits the handler's result and effect and finishes
// (Engine.Succeed). While the store cannot be reached it tries again (see
// ending); when the outcome of a try is unknown it reads the execution:
// COMMITTED or DONE, the commit happened (it finishes if need be);
// LEASED or IN_PROGRESS, it did not (it commits again). A store that
// cannot be reached never fails the execution.
func (w *Worker) succeed(t *Task, res jobstate.CommitInput) {
	e := w.ending(t, false)
	ctx := w.ops()
	err, done := e.settle("succeed", func(ctx context.Context) error {
		_, err := w.eng.Succeed(ctx, e.lease, res)
		return err
	}, func(x *jobstate.Execution) bool {
		switch x.Status {
		case jobstate.ExecDone:
			w.logTask(ctx, slog.LevelDebug, t, "job succeeded (confirmed after the store's answer was lost)")
			return true
		case jobstate.ExecCommitted:
			w.finishCommitted(&e, "committed (confirmed after the store's answer was lost); finishing")
			return true
		}
		return false
	}, pending)
	if done {
		return
	}
	switch {
	case err == nil:
		w.logTask(ctx, slog.LevelDebug, t, "job succeeded")
	case errors.Is(err, jobstate.ErrIncomplete):
		// The commit (and its effect) is recorded; only the succeed
		// rule's effect failed. Finish once more, else the sweep
		// finalizes the job when the lease lapses, without applying the
		// effect again.
		w.finishCommitted(&e, "committed, but the succeed rule's effect failed; finishing", slog.Any("error", err))
	case errors.Is(err, jobstate.ErrLeaseLost), errors.Is(err, jobstate.ErrAlreadyCommitted), errors.Is(err, jobstate.ErrNotFound):
		w.dropped(t, err)
	default:
		// Nothing was written: the effect failed, or the table or the
		// store refused. Fail the execution with the reason.
		cause := fmt.Errorf("worker: commit refused: %w", err)
		level := slog.LevelDebug // the failure is logged next, with its reason
		if errors.Is(err, jobstate.ErrInvalidTransition) {
			// The table cannot take the job to success from its state:
			// every such job fails, until the machine is fixed.
			cause = jobstate.Permanent(cause)
			level = slog.LevelWarn
		}
		w.logTask(ctx, level, t, "commit refused: failing the execution", slog.Any("error", err))
		w.failWith(t, cause)
	}
}

// finishCommitted finishes e's committed execution (Engine.Finish), through an
// unreachable store as succeed commits. msg is logged at DEBUG first,
// with args.
func (w *Worker) finishCommitted(e *ending, msg string, args ...any) {
	ctx := w.ops()
	t := e.t
	w.logTask(ctx, slog.LevelDebug, t, msg, args...)
	err, done := e.settle("finish", func(ctx context.Context) error {
		_, err := w.eng.Finish(ctx, e.lease)
		return err
	}, func(x *jobstate.Execution) bool {
		if x.Status != jobstate.ExecDone {
			return false
		}
		w.logTask(ctx, slog.LevelDebug, t, "job succeeded (finish confirmed after the store's answer was lost)")
		return true
	}, func(x *jobstate.Execution) bool {
		return x != nil && x.Status == jobstate.ExecCommitted // not finished: finish again
	})
	if done {
		return // given up: the sweep finalizes the job when the lease lapses
	}
	switch {
	case err == nil:
		w.logTask(ctx, slog.LevelDebug, t, "job succeeded (finished after its commit)")
	case errors.Is(err, jobstate.ErrLeaseLost):
		// The commit stands; the sweep finalizes the job without
		// applying its effect again.
		w.logTask(ctx, slog.LevelDebug, t, "committed but not finished: the sweep will finalize the job", slog.Any("error", err))
	default:
		// The succeed rule's effect (or the table) refuses: the sweep's
		// finalization will meet the same refusal.
		w.logTask(ctx, slog.LevelWarn, t, "committed but not finished: the sweep will finalize the job", slog.Any("error", err))
	}
}

// dropped logs a write that ends t's execution refused because the lease
// is gone: the handler's outcome is dropped. A cancel of the job is the
// user's doing (INFO); a lost lease wasted the handler's work (WARN).
func (w *Worker) dropped(t *Task, err error) {
	ctx := w.ops()
	if errors.Is(err, jobstate.ErrCancelled) {
		w.logTask(ctx, slog.LevelInfo, t, "job cancelled while running", slog.Any("error", err))
		return
	}
	w.logTask(ctx, slog.LevelWarn, t, "lease lost: the handler's outcome is dropped", slog.Any("error", err))
}

// fail ends the execution after a handler error: a snooze or a failure.
// (A handler stopped by the shutdown has had its lease given back
// already: its outcome never comes here.)
func (w *Worker) fail(t *Task, err, cause error) {
	var sn *SnoozeError
	if errors.As(err, &sn) {
		w.snooze(t, sn.Delay)
		return
	}
	if cause != nil && errors.Is(err, context.Canceled) && !errors.Is(err, cause) {
		// The handler returned its context's error: record why.
		err = fmt.Errorf("%w (handler returned: %w)", cause, err)
	}
	w.failWith(t, err)
}

// failWith fails the execution with err (Engine.Fail), through an
// unreachable store as succeed commits: after a try of unknown outcome,
// an execution ABORTED with err's message (as the engine records it) was
// failed by it, a LEASED or
// IN_PROGRESS one was not (it fails it again).
func (w *Worker) failWith(t *Task, err error) {
	e := w.ending(t, false)
	ctx := w.ops()
	msg := jobstate.CleanErrorText(err.Error()) // the text the engine records
	var job jobstate.Job
	ferr, done := e.settle("fail", func(ctx context.Context) error {
		var ferr error
		job, ferr = w.eng.Fail(ctx, e.lease, err)
		return ferr
	}, func(x *jobstate.Execution) bool {
		if x.Status != jobstate.ExecAborted || x.Error != msg {
			return false
		}
		w.logTask(ctx, slog.LevelInfo, t, "job failed", slog.Any("error", err), slog.Bool("confirmed", true))
		return true
	}, pending)
	if done {
		return
	}
	if ferr != nil {
		w.refused(t, "fail refused", ferr, slog.Any("cause", err))
		return
	}
	w.logTask(ctx, slog.LevelInfo, t, "job failed", slog.Any("error", err), slog.String("now", string(job.State)), slog.Int("retries", job.RetryCount))
}

// snooze gives the job back to run again after d (Engine.Snooze), through
// an unreachable store as failWith fails.
func (w *Worker) snooze(t *Task, d time.Duration) {
	e := w.ending(t, false)
	ctx := w.ops()
	err, done := e.settle("snooze", func(ctx context.Context) error {
		_, err := w.eng.Snooze(ctx, e.lease, d)
		return err
	}, func(x *jobstate.Execution) bool {
		if x.Status != jobstate.ExecAborted {
			return false
		}
		w.logTask(ctx, slog.LevelDebug, t, "execution ended (confirmed after the store's answer was lost)", slog.String("reason", x.Error))
		return true
	}, pending)
	if done {
		return
	}
	if err != nil {
		w.refused(t, "snooze refused", err)
		return
	}
	w.logTask(ctx, slog.LevelDebug, t, "job snoozed", slog.Duration("delay", d))
}

// refused logs a Fail or Snooze of t refused by the engine: a lease lost
// or a cancel as dropped does; any other refusal (the table has no rule
// for it) at WARN under msg, since it repeats until the machine is fixed.
func (w *Worker) refused(t *Task, msg string, err error, args ...any) {
	if errors.Is(err, jobstate.ErrLeaseLost) || errors.Is(err, jobstate.ErrAlreadyCommitted) || errors.Is(err, jobstate.ErrNotFound) {
		w.dropped(t, err)
		return
	}
	w.logTask(w.ops(), slog.LevelWarn, t, msg, append([]any{slog.Any("error", err)}, args...)...)
}

// giveBack ends the task's execution without counting a failure, so that
// any worker can claim the job at once (Engine.Snooze with no delay),
// trying again while the store cannot be reached, the lease is live and
// the worker has not been stopped hard. A machine whose table has neither
// a retry nor an abandon rule from the job's state cannot take it back:
// the lease is left to lapse, and the sweep then treats it as lost.
func (w *Worker) giveBack(t *Task) {
	e := w.ending(t, true)
	ctx := w.ops()
	err, done := e.settle("give back", func(ctx context.Context) error {
		_, err := w.eng.Snooze(ctx, e.lease, 0)
		return err
	}, func(x *jobstate.Execution) bool {
		switch x.Status {
		case jobstate.ExecAborted:
			w.logTask(ctx, slog.LevelDebug, t, "execution ended (confirmed after the store's answer was lost)", slog.String("reason", x.Error))
			return true
		case jobstate.ExecCommitted:
			w.finishCommitted(&e, "not given back: committed; finishing")
			return true
		}
		return false
	}, pending)
	if done {
		return
	}
	var ce *jobstate.CommitError
	switch {
	case err == nil:
		w.logTask(ctx, slog.LevelInfo, t, "lease given back")
	case errors.As(err, &ce) && ce.Winner == e.lease.ExecID:
		w.finishCommitted(&e, "not given back: committed; finishing", slog.Any("error", err))
	default:
		// The lease is gone already, or the table cannot take the job
		// back: either way the sweep recovers it, as the table says.
		w.logTask(ctx, slog.LevelInfo, t, "lease not given back: it will lapse", slog.Any("error", err))
	}
}

// settle makes the write op (call) through an unreachable store (try),
// and settles a try whose outcome is unknown, or a refusal that may be
// the trace of such an earlier try of its own (mayBeOwn), by reading the
// execution: confirmed is given the execution, when there is one, and
// returns true when it shows the write applied, having acted on it;
// after an unknown outcome, the write is made again when again reports
// that the execution shows it not applied, and otherwise the execution
// was ended by another write (endedElsewhere). done is true when the runtime gave up, the read did,
// the write was confirmed or the execution ended elsewhere: the caller
// has nothing more to do. Otherwise err is the store's answer to the last
// try (nil, or a refusal that stands), for the caller to act on.
func (e *ending) settle(op string, call func(context.Context) error, confirmed, again func(x *jobstate.Execution) bool) (err error, done bool) {
	for {
		err, r := e.try(op, call)
		if r == gaveUp {
			return err, true
		}
		if r == unknown || (e.unsure && mayBeOwn(err)) {
			x, ok := e.read()
			switch {
			case !ok:
				return err, true
			case x != nil && confirmed(x):
				return err, true
			case r == unknown && again(x):
				continue
			case r == unknown:
				e.endedElsewhere(op, x, err)
				return err, true
			}
			// The refusal stands: the try it answered applied nothing.
		}
		return err, false
	}
}

// ops is the context of the runtime's own engine calls that must
// complete: the handlers' base context, which carries no cancellation.
func (w *Worker) ops() context.Context { return w.base }
