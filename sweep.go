package jobstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Failures lists the jobs whose write failed, with the error, in the
	// order met. Each such job was pushed back (Job.SweepRetryAt) unless
	// even that write failed.
	Failures []SweepFailure
}

// SweepFailure is one job the sweep could not write, and why.
type SweepFailure struct {
	JobID uuid.UUID
	Err   error
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
// Run it periodically and at worker start. One pass pages through every
// due job of the engine's machines (jobs of machines it does not know are
// left to the engines that do), however many of them fail: a job whose
// write fails (a guard refusing its requeue, a rule effect failing) is
// listed in the report's Failures and pushed back by a delay that grows
// with its consecutive failures (Job.SweepFailures), so that it is tried
// again later without hiding the others. After a sweep at a time past
// every lease and deadline, no job is active under a dead lease, except
// jobs listed in Failures. The error is nil when every job was written;
// otherwise it counts the failures and wraps the first.
func (e *Engine) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	if err := e.ready(); err != nil {
		return rep, err
	}
	now := e.clock.Now()
	if err := checkNow(now); err != nil {
		return rep, err
	}
	seen := make(map[uuid.UUID]bool)
	q := DueQuery{Now: now, Machines: e.names, Limit: sweepBatch}
	for {
		due, err := e.store.Due(ctx, q)
		if err != nil {
			return rep, err
		}
		for _, d := range due {
			if seen[d.ID] {
				continue
			}
			seen[d.ID] = true
			rep.Jobs++
			if err := e.sweepJob(ctx, d.ID, now, &rep); err != nil && !errors.Is(err, ErrNotFound) {
				rep.Failures = append(rep.Failures, SweepFailure{JobID: d.ID, Err: err})
				e.pushBack(ctx, d.ID, now)
			}
		}
		if len(due) < sweepBatch {
			break
		}
		last := due[len(due)-1]
		q.AfterWake, q.AfterID = last.WakeAt, last.ID
	}
	if n := len(rep.Failures); n > 0 {
		return rep, fmt.Errorf("jobstate: sweep: %d job(s) could not be written; the first, job %s: %w", n, rep.Failures[0].JobID, rep.Failures[0].Err)
	}
	return rep, nil
}

// sweepBackoff spaces the sweep's attempts at a job whose write keeps
// failing: 1 s, doubling with each consecutive failure, up to 1 h.
var sweepBackoff = Backoff{Kind: BackoffExponential, Initial: time.Second, Factor: 2, Max: time.Hour}

// pushBack records a failed sweep of the job: SweepFailures+1, and a wake
// time pushed back by sweepBackoff. A failure of this write too leaves
// the job as it is, for the next pass.
func (e *Engine) pushBack(ctx context.Context, id uuid.UUID, now time.Time) {
	_, _ = e.store.Update(ctx, id, func(ctx context.Context, cur Snapshot) (Write, error) {
		def, err := e.machine(cur.Job.Machine)
		if err != nil {
			return Write{}, err
		}
		job := cur.Job
		if job.Terminal() {
			return Write{Job: job}, nil
		}
		job.Version++
		job.SweepFailures++
		job.SweepRetryAt = after(now, sweepBackoff.Delay(job.SweepFailures, 0))
		job.WakeAt = def.wakeAt(&job)
		return Write{Job: job}, nil
	})
}

// sweepJob applies the timed rules to one job at now.
func (e *Engine) sweepJob(ctx context.Context, id uuid.UUID, now time.Time, rep *SweepReport) error {
	var r SweepReport
	var marks []reportMark
	_, err := e.run(ctx, id, nil, func(ctx context.Context, def *Definition, cur Snapshot, _ time.Time, p *plan) (Write, error) {
		r, marks = SweepReport{}, nil
		return e.sweepWrite(ctx, def, &cur, now, &r, &marks, p)
	})
	rep.add(written(r, marks, err))
	return err
}

// reportMark is what a chained write had counted once its first recs
// records were made.
type reportMark struct {
	recs int
	rep  SweepReport
}

// written returns the counts of what a chained write recorded: all of r
// when it was written whole, the counts of the part kept when it was cut
// back (an *IncompleteError), nothing when it failed.
func written(r SweepReport, marks []reportMark, err error) SweepReport {
	var inc *IncompleteError
	switch {
	case err == nil:
		return r
	case errors.As(err, &inc):
		var kept SweepReport
		for _, m := range marks {
			if m.recs <= inc.Kept {
				kept = m.rep
			}
		}
		return kept
	}
	return SweepReport{}
}

// sweepWrite chains the timed rules that apply to cur at now into one
// write. It writes nothing when none applies.
func (e *Engine) sweepWrite(ctx context.Context, def *Definition, cur *Snapshot, now time.Time, r *SweepReport, marks *[]reportMark, p *plan) (Write, error) {
	c := chain{cur: *cur, w: Write{Job: cur.Job}, p: p, marks: marks}
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
		c.mark(r)
	}
	// 3. Deadline, also of a job just requeued into a state that can expire.
	if def.overdue(&c.cur.Job, now) {
		if err := e.chainMove(ctx, def, &c, EventExpire, "deadline passed", now); err != nil {
			return Write{}, err
		}
		r.Expired++
		c.mark(r)
	}
	if c.w.Job.Version == cur.Job.Version && !c.w.Job.WakeAt.Equal(def.wakeAt(&c.w.Job)) {
		// Nothing to do, but the stored wake time is stale: refresh it so
		// the job stops coming back.
		c.w.Job.Version++
		c.w.Job.UpdatedAt = now
		def.settle(&c.w.Job, cur.Executions, nil)
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
			w, err = finish(ctx, def, &snap, x, SweepActor, reason+" after commit: finalized", now, c.p)
			r.Finalized++
		} else {
			class := ClassRetryable
			if def.policy.FailOnLeaseLoss {
				class = ClassPermanent
			}
			before := snap.Job.Kind
			w, err = e.failure(ctx, def, &snap, &x, failure{class: class, msg: reason, actor: SweepActor, lost: true}, now, c.p)
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
		c.mark(r)
	}
	return nil
}

// RecoverWorker ends at once every live execution held by worker, as if
// its leases had expired: for a process that restarts under the same
// worker name and knows that whatever it held before is dead (its work
// is failed at start-up, without waiting for the leases to lapse).
// Executions past their commit are finalized without re-applying their
// effect; the others are aborted and their jobs retried or failed by the
// retry policy. It returns what it did; a job whose write fails is
// left for the sweep and the first such error returned.
func (e *Engine) RecoverWorker(ctx context.Context, worker string) (SweepReport, error) {
	var rep SweepReport
	if err := e.ready(); err != nil {
		return rep, err
	}
	if worker == "" {
		return rep, fmt.Errorf("%w: empty worker name", ErrInvalidArgument)
	}
	if err := checkText("worker name", worker, MaxKeyBytes); err != nil {
		return rep, err
	}
	// Every job holding a lease has a heartbeat at or before MaxTime.
	jobs, err := e.store.Stale(ctx, "", MaxTime.Add(time.Nanosecond), 0)
	if err != nil {
		return rep, err
	}
	held := func(x *Execution) bool { return x.Owner == worker }
	for _, j := range jobs {
		if _, ok := e.machines[j.Machine]; !ok {
			continue // another engine's machine
		}
		var r SweepReport
		var marks []reportMark
		_, err := e.run(ctx, j.ID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
			r, marks = SweepReport{}, nil
			c := chain{cur: cur, w: Write{Job: cur.Job}, p: p, marks: &marks}
			if err := e.loseLeases(ctx, def, &c, now, held, "worker "+worker+" restarted", &r); err != nil {
				return Write{}, err
			}
			return c.w, nil
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			rep.Failures = append(rep.Failures, SweepFailure{JobID: j.ID, Err: err})
		}
		if err != nil && !errors.Is(err, ErrIncomplete) {
			continue
		}
		done := written(r, marks, err)
		if done.Aborted+done.Finalized > 0 {
			rep.Jobs++
		}
		rep.add(done)
	}
	if n := len(rep.Failures); n > 0 {
		return rep, fmt.Errorf("jobstate: recover worker %q: %d job(s) could not be written; the first, job %s: %w", worker, n, rep.Failures[0].JobID, rep.Failures[0].Err)
	}
	return rep, nil
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
	w, err := e.move(ctx, def, &snap, ev, Call{Actor: SweepActor, Reason: reason}, now, uuid.Nil, c.p)
	if err != nil {
		return err
	}
	c.add(w)
	return nil
}

// chain accumulates several writes to one job into one. Each write added
// is a point the plan may cut the chain back to when a later move's effect
// fails.
type chain struct {
	cur Snapshot
	w   Write
	p   *plan
	// marks, when set, receives the report's counts after each step.
	marks *[]reportMark
}

// mark notes the report's counts as of the records chained so far.
func (c *chain) mark(r *SweepReport) {
	if c.marks != nil {
		*c.marks = append(*c.marks, reportMark{recs: len(c.w.Transitions), rep: *r})
	}
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
	// The chain extends its write in place: the point kept is a copy.
	kept := c.w
	kept.Transitions = slices.Clone(c.w.Transitions)
	kept.Executions = slices.Clone(c.w.Executions)
	kept.Effects = slices.Clone(c.w.Effects)
	c.p.keep(len(kept.Transitions), kept)
}

// expire applies lazy expiry to one job: its expire rule if its deadline
// has passed, nothing otherwise. It returns the job as it then is.
func (e *Engine) expire(ctx context.Context, id uuid.UUID) (Job, error) {
	return e.run(ctx, id, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		if !def.overdue(&cur.Job, now) {
			return Write{Job: cur.Job}, nil
		}
		return e.move(ctx, def, &cur, EventExpire, Call{Actor: SweepActor, Reason: "deadline passed (read)"}, now, uuid.Nil, p)
	})
}
