package jobstate

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Fail ends the lease's execution with err and applies the retry policy,
// in one atomic write:
//
//   - err is classified (ClassOf with the machine's classifier);
//   - retryable with retries left: RetryCount+1, the job takes its retry
//     rule with NotBefore = now + backoff (or the RetryAfter delay);
//   - otherwise (permanent, or retries spent): the job takes its fail rule,
//     and, when that lands in a waiting state, its exhaust rule too (image
//     generation: running → failed → dead_letter).
//
// On a machine running several executions of a job in its ready state
// (Policy.MaxExecutions above 1) only the execution fails; the job does not move. The job
// records LastError and ErrorClass either way. Errors: a *LeaseError, a
// *CommitError (a committed execution cannot fail: finish it),
// ErrInvalidArgument for a nil err, a *TransitionError when the table lacks
// the rule.
func (e *Engine) Fail(ctx context.Context, lease Lease, cause error) (Job, error) {
	if cause == nil {
		return Job{}, fmt.Errorf("%w: Fail needs an error", ErrInvalidArgument)
	}
	return e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if x.Status == ExecCommitted {
			return Write{}, &CommitError{JobID: cur.Job.ID, ExecID: x.ID, Winner: x.ID}
		}
		class, after := ClassOf(cause, def.policy.Classify)
		return e.failure(ctx, def, &cur, x, failure{class: class, after: after, msg: CleanErrorText(cause.Error()), actor: lease.Owner}, now, p)
	})
}

// Snooze gives the job back to be retried after d without counting a
// failure (RetryCount is unchanged): the execution ends and the job takes
// its retry rule (or, lacking one, its abandon rule) with NotBefore = now +
// d. Errors as for Fail, and ErrInvalidArgument for d negative or above
// MaxDuration.
func (e *Engine) Snooze(ctx context.Context, lease Lease, d time.Duration) (Job, error) {
	if err := checkDuration("snooze", d); err != nil {
		return Job{}, err
	}
	return e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if x.Status == ExecCommitted {
			return Write{}, &CommitError{JobID: cur.Job.ID, ExecID: x.ID, Winner: x.ID}
		}
		ev := EventRetry
		if !def.Can(cur.Job.State, ev) && def.Can(cur.Job.State, EventAbandon) {
			ev = EventAbandon
		}
		reason := "snoozed for " + d.String()
		y := endExec(*x, now, reason)
		if cur.Job.Kind != KindActive {
			return bump(def, &cur, now, y), nil
		}
		next, rec, err := p.next(ctx, def, cur.Job, Input{Event: ev, Actor: lease.Owner, Reason: reason, Now: now, Executions: cur.Executions, ExecID: x.ID})
		if err != nil {
			return Write{}, err
		}
		next.NotBefore = after(now, d)
		return finishWrite(def, &cur, next, []Transition{rec}, []Execution{y}, now), nil
	})
}

// Cancel fires the table's cancel rule (EventCancel) on the job. Its guards
// may refuse (only the owner may cancel, say, or not while
// a result is being judged). Cancelling a job with live executions aborts them: each lease
// holder's next operation fails with ErrLeaseLost and ErrCancelled. Errors
// as for Fire.
func (e *Engine) Cancel(ctx context.Context, id uuid.UUID, c Call) (Job, error) {
	return e.Fire(ctx, id, EventCancel, c)
}

// failure describes one failed attempt.
type failure struct {
	class ErrorClass
	after time.Duration
	msg   string
	actor string
	// lost is set when the failure is a lease that expired: the abandon
	// rule is preferred and no backoff applies.
	lost bool
}

func endExec(x Execution, now time.Time, reason string) Execution {
	x.Status, x.FinishedAt, x.Error = ExecAborted, now, reason
	return x
}

// failure ends execution x (nil when none) with f and moves the job as the
// retry policy says.
func (e *Engine) failure(ctx context.Context, def *Definition, cur *Snapshot, x *Execution, f failure, now time.Time, p *plan) (Write, error) {
	var ended []Execution
	var execID uuid.UUID
	if x != nil {
		ended, execID = []Execution{endExec(*x, now, f.msg)}, x.ID
	}
	job := cur.Job
	if job.Kind != KindActive {
		// Several executions share a ready job: only this one failed.
		w := bump(def, cur, now, ended...)
		w.Job.LastError, w.Job.ErrorClass = f.msg, f.class
		return w, nil
	}
	in := Input{Actor: f.actor, Reason: f.msg, Now: now, Executions: cur.Executions, ExecID: execID}
	var recs []Transition
	var next Job
	retriesLeft := job.MaxRetries == Unlimited || job.RetryCount < job.MaxRetries
	// A job whose retry override allows retries its table has no route for
	// (no retry or abandon rule from this state) fails instead of sticking.
	canRetry := def.Can(job.State, EventRetry) || def.Can(job.State, EventAbandon)
	if f.class == ClassRetryable && retriesLeft && canRetry {
		in.Event = EventRetry
		if (f.lost || !def.Can(job.State, EventRetry)) && def.Can(job.State, EventAbandon) {
			in.Event = EventAbandon
		}
		n, rec, err := p.next(ctx, def, job, in)
		if err != nil {
			return Write{}, err
		}
		next, recs = n, []Transition{rec}
		next.RetryCount++
		delay := f.after
		if delay == 0 && !(f.lost && in.Event == EventAbandon) {
			delay = e.backoff(def, &job).Delay(next.RetryCount, e.random())
		}
		next.NotBefore = after(now, delay)
	} else {
		in.Event = EventFail
		n, rec, err := p.next(ctx, def, job, in)
		if err != nil {
			return Write{}, err
		}
		next, recs = n, []Transition{rec}
		if next.Kind == KindWaiting {
			in.Event = EventExhaust
			n, rec, err := p.next(ctx, def, next, in)
			if err != nil {
				return Write{}, err
			}
			next, recs = n, append(recs, rec)
		}
	}
	next.LastError, next.ErrorClass = f.msg, f.class
	return finishWrite(def, cur, next, recs, ended, now), nil
}

// finishWrite assembles the write of a job that moved while the ended
// executions ended: any other live execution that cannot survive the new
// state is aborted with them.
func finishWrite(def *Definition, cur *Snapshot, next Job, recs []Transition, ended []Execution, now time.Time) Write {
	execs := ended
	if !def.leasesSurvive(&next) {
		for _, o := range abortLive(cur.Executions, uuid.Nil, now, func() string { return fmt.Sprintf("job moved to %q", next.State) }) {
			if findExec(ended, o.ID) == nil {
				execs = append(execs, o)
			}
		}
	}
	w := Write{Job: next, Transitions: recs, Executions: execs}
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w
}

func (e *Engine) backoff(def *Definition, job *Job) Backoff {
	if job.OwnBackoff {
		return job.Backoff
	}
	return def.policy.Retry.Backoff
}
