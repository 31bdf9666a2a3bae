package jobstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// SweepActor is the actor recorded for moves made by Engine.Sweep and by
// lazy expiry.
const SweepActor = "jobstate"

// SweepReport counts what one sweep did.
type SweepReport struct {
	// Jobs is how many due jobs were examined.
	Jobs int
	// Finalized: executions found COMMITTED under an expired lease, finished
	// (job to success) without re-applying their effect.
	Finalized int
	// Aborted: executions whose lease expired before a commit.
	Aborted int
	// Retried: jobs sent back (abandon or retry rule) after a lost lease.
	Retried int
	// Failed: jobs failed after a lost lease (retries spent, or
	// Policy.FailOnLeaseLoss).
	Failed int
	// Requeued: waiting jobs made ready because their not-before passed.
	Requeued int
	// Expired: jobs past their deadline moved by their expire rule.
	Expired int
}

// sweepBatch bounds how many due jobs one store query returns.
const sweepBatch = 256

// Sweep does the engine's timed work for every job due at the clock's
// current reading, each job in its own atomic write:
//
//   - an execution whose lease expired after it COMMITTED is finalized:
//     DONE, and the job takes its succeed rule; the effect is not applied
//     again;
//   - an execution whose lease expired before a commit is ABORTED; the job
//     is retried (abandon rule, else retry rule; RetryCount+1) while
//     retries remain, else failed (fail rule, then exhaust) — or failed at
//     once under Policy.FailOnLeaseLoss; on a machine running several
//     executions in a ready state, only the execution ends;
//   - a job past its deadline takes its expire rule (aborting live
//     executions);
//   - a waiting job whose not-before passed takes its requeue rule.
//
// Run it periodically and at worker start. After a sweep at a time past
// every lease and deadline, no job is active under a dead lease. A job
// whose write fails is left for the next sweep; the first such error is
// returned with the report of everything done.
func (e *Engine) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := e.clock.Now()
	seen := make(map[uuid.UUID]bool)
	var firstErr error
	for {
		ids, err := e.store.Due(ctx, now, sweepBatch)
		if err != nil {
			return rep, err
		}
		fresh := 0
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			rep.Jobs++
			if err := e.sweepJob(ctx, id, now, &rep); err != nil && !errors.Is(err, ErrNotFound) && firstErr == nil {
				firstErr = err
			}
		}
		if fresh == 0 || len(ids) < sweepBatch {
			return rep, firstErr
		}
	}
}

// sweepJob applies the timed rules to one job at now.
func (e *Engine) sweepJob(ctx context.Context, id uuid.UUID, now time.Time, rep *SweepReport) error {
	var r SweepReport
	_, err := e.run(ctx, id, nil, func(ctx context.Context, def *Definition, cur Snapshot, _ time.Time) (Write, error) {
		r = SweepReport{}
		return e.sweepWrite(ctx, def, &cur, now, &r)
	})
	if err == nil {
		rep.add(r)
	}
	return err
}

// sweepWrite chains the timed rules that apply to cur at now into one
// write. It writes nothing when none applies.
func (e *Engine) sweepWrite(ctx context.Context, def *Definition, cur *Snapshot, now time.Time, r *SweepReport) (Write, error) {
	c := chain{cur: *cur, w: Write{Job: cur.Job}}
	if c.cur.Job.Terminal() {
		return c.w, nil
	}
	// 1. Expired leases: finalize past the commit, else abort and recover.
	expired := func(x *Execution) bool { return !now.Before(x.LeaseExpiresAt) }
	if err := e.loseLeases(ctx, def, &c, now, expired, "lease expired", r); err != nil {
		return Write{}, err
	}
	// 2. Due waiting job.
	if job := &c.cur.Job; job.Kind == KindWaiting && !job.NotBefore.After(now) {
		if err := e.chainMove(ctx, def, &c, EventRequeue, "not-before passed", now); err != nil {
			return Write{}, err
		}
		r.Requeued++
	}
	// 3. Deadline, also of a job just requeued into a state that can expire.
	if def.overdue(&c.cur.Job, now) {
		if err := e.chainMove(ctx, def, &c, EventExpire, "deadline passed", now); err != nil {
			return Write{}, err
		}
		r.Expired++
	}
	if c.w.Job.Version == cur.Job.Version && !c.w.Job.WakeAt.Equal(def.wakeAt(&c.w.Job)) {
		// Nothing to do, but the stored wake time is stale: refresh it so
		// the job stops coming back.
		c.w.Job.Version++
		c.w.Job.WakeAt = def.wakeAt(&c.w.Job)
	}
	return c.w, nil
}

// loseLeases ends, as lost, every live execution of the chained job for
// which lost holds: one that had committed is finalized (DONE, the job to
// its success state, the effect not applied again); any other is aborted
// and the job recovered as a retryable failure (permanent under
// Policy.FailOnLeaseLoss).
func (e *Engine) loseLeases(ctx context.Context, def *Definition, c *chain, now time.Time, lost func(*Execution) bool, reason string, r *SweepReport) error {
	for i := 0; i < len(c.cur.Executions); i++ {
		x := c.cur.Executions[i]
		if !x.Status.Live() || !lost(&x) {
			continue
		}
		if c.cur.Job.Terminal() {
			return nil
		}
		snap := c.snapshot()
		var w Write
		var err error
		if x.Status == ExecCommitted {
			w, err = finish(ctx, def, &snap, x, SweepActor, reason+" after commit: finalized", now)
			r.Finalized++
		} else {
			class := ClassRetryable
			if def.policy.FailOnLeaseLoss {
				class = ClassPermanent
			}
			before := snap.Job.Kind
			w, err = e.failure(ctx, def, &snap, &x, failure{class: class, msg: reason, actor: SweepActor, lost: true}, now)
			r.Aborted++
			if before == KindActive && err == nil {
				if w.Job.Kind == KindTerminal {
					r.Failed++
				} else {
					r.Retried++
				}
			}
		}
		if err != nil {
			return err
		}
		c.add(w)
	}
	return nil
}

// RecoverWorker ends at once every live execution held by worker, as if
// its leases had expired: for a process that restarts under the same
// worker name and knows that whatever it held before is dead (seed 003:
// stuck judging is failed at start-up, without waiting for the leases to
// lapse). Executions past their commit are finalized without re-applying
// their effect; the others are aborted and their jobs retried or failed by
// the retry policy. It returns what it did; a job whose write fails is
// left for the sweep and the first such error returned.
func (e *Engine) RecoverWorker(ctx context.Context, worker string) (SweepReport, error) {
	var rep SweepReport
	if worker == "" {
		return rep, fmt.Errorf("%w: empty worker name", ErrInvalidArgument)
	}
	// Every job holding a lease has a heartbeat before the end of time.
	jobs, err := e.store.Stale(ctx, "", time.Unix(1<<62, 0), 0)
	if err != nil {
		return rep, err
	}
	held := func(x *Execution) bool { return x.Owner == worker }
	var firstErr error
	for _, j := range jobs {
		var r SweepReport
		_, err := e.run(ctx, j.ID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time) (Write, error) {
			r = SweepReport{}
			c := chain{cur: cur, w: Write{Job: cur.Job}}
			if err := e.loseLeases(ctx, def, &c, now, held, "worker "+worker+" restarted", &r); err != nil {
				return Write{}, err
			}
			return c.w, nil
		})
		if err != nil {
			if firstErr == nil && !errors.Is(err, ErrNotFound) {
				firstErr = err
			}
			continue
		}
		if r != (SweepReport{}) {
			rep.Jobs++
		}
		rep.add(r)
	}
	return rep, firstErr
}

func (r *SweepReport) add(o SweepReport) {
	r.Finalized += o.Finalized
	r.Aborted += o.Aborted
	r.Retried += o.Retried
	r.Failed += o.Failed
	r.Requeued += o.Requeued
	r.Expired += o.Expired
}

// chainMove fires ev, as the sweep, on the job as c leaves it, and adds the
// move to c.
func (e *Engine) chainMove(ctx context.Context, def *Definition, c *chain, ev Event, reason string, now time.Time) error {
	snap := c.snapshot()
	w, err := e.move(ctx, def, &snap, ev, Call{Actor: SweepActor, Reason: reason}, now, uuid.Nil)
	if err != nil {
		return err
	}
	c.add(w)
	return nil
}

// chain accumulates several writes to one job into one.
type chain struct {
	cur Snapshot
	w   Write
}

// snapshot returns the job as the writes so far leave it.
func (c *chain) snapshot() Snapshot { return c.cur }

func (c *chain) add(w Write) {
	c.w.Job = w.Job
	c.w.Transitions = append(c.w.Transitions, w.Transitions...)
	c.w.Effects = append(c.w.Effects, w.Effects...)
	for _, x := range w.Executions {
		if p := findExec(c.w.Executions, x.ID); p != nil {
			*p = x
		} else {
			c.w.Executions = append(c.w.Executions, x)
		}
	}
	c.cur.Job = w.Job
	execs := make([]Execution, len(c.cur.Executions))
	copy(execs, c.cur.Executions)
	for _, x := range w.Executions {
		if p := findExec(execs, x.ID); p != nil {
			*p = x
		} else {
			execs = append(execs, x)
		}
	}
	c.cur.Executions = execs
}

// expire applies lazy expiry to one job: its expire rule if its deadline
// has passed, nothing otherwise. It returns the job as it then is.
func (e *Engine) expire(ctx context.Context, id uuid.UUID) (Job, error) {
	return e.run(ctx, id, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time) (Write, error) {
		if !def.overdue(&cur.Job, now) {
			return Write{Job: cur.Job}, nil
		}
		return e.move(ctx, def, &cur, EventExpire, Call{Actor: SweepActor, Reason: "deadline passed (read)"}, now, uuid.Nil)
	})
}
