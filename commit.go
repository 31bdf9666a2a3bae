package jobstate

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CommitInput is what an execution commits: the job's result and the
// effect to apply exactly once.
type CommitInput struct {
	// Result is stored as the job's result when the commit wins.
	Result []byte
	// Effect is applied inside the commit boundary, only if the commit
	// wins, after every check that could refuse the commit, and sees the
	// job as the write leaves it; an error from it aborts the commit and
	// writes nothing (the execution stays live and may retry the commit or
	// fail). Optional.
	Effect EffectFunc
}

// Commit passes the exactly-once boundary: the execution becomes COMMITTED
// and the effect runs, in one atomic update of the job, only if the lease
// is live and no execution of the job has committed. At most one execution
// per job ever commits, whatever the interleaving of claims, expiries and
// duplicates.
//
// A duplicate gets a typed refusal and applies nothing: any commit after
// another execution won gets a *CommitError (ErrAlreadyCommitted) naming
// the winner, as does a second commit of this execution while it is still
// COMMITTED under a live lease; once it is finished or its lease has
// lapsed, a *LeaseError (ErrLeaseLost). After a
// commit, Finish ends the execution and moves the job to its success state;
// if the worker dies first, a sweep does that without re-applying the
// effect.
func (e *Engine) Commit(ctx context.Context, lease Lease, in CommitInput) (Job, error) {
	in.Result = clone(in.Result)
	return e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := checkCommit(def, &cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		p.own = in.Effect
		return commitWrite(def, &cur, x, in.Result, now), nil
	})
}

// commitWrite is the write of a commit: x COMMITTED, the job's result
// and committed execution set.
func commitWrite(def *Definition, cur *Snapshot, x Execution, result []byte, now time.Time) Write {
	w := bump(def, cur, now, x)
	w.Job.Committed, w.Job.Result = x.ID, result
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w
}

// clone copies b, so that the engine keeps nothing the caller may reuse.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// checkCommit checks the commit boundary for lease and returns its
// execution as COMMITTED, without applying anything. A commit is refused
// in a state with no succeed rule: a committed job can leave its state
// only by finishing, so it could never end.
func checkCommit(def *Definition, cur *Snapshot, lease Lease, now time.Time) (Execution, error) {
	x, err := leased(cur, lease, now)
	if err != nil {
		return Execution{}, err
	}
	if x.Status == ExecCommitted {
		return Execution{}, &CommitError{JobID: cur.Job.ID, ExecID: x.ID, Winner: x.ID}
	}
	if !def.Can(cur.Job.State, EventSucceed) {
		return Execution{}, def.refuse(&cur.Job, EventSucceed, ErrInvalidTransition, nil)
	}
	if def.policy.RequireStart && x.Status == ExecLeased {
		return Execution{}, fmt.Errorf("%w: execution %s of job %s is LEASED; its machine requires Engine.Start before a commit", ErrInvalidTransition, x.ID, cur.Job.ID)
	}
	y := *x
	y.Status = ExecCommitted
	if y.StartedAt.IsZero() {
		y.StartedAt = now
	}
	return y, nil
}

// Finish ends a committed execution: it becomes DONE and the job takes its
// succeed rule, in one atomic write. Other live executions of the job (rival
// submissions on a machine with several) are aborted in the same write. Errors: a
// *LeaseError, a *CommitError if another execution committed,
// ErrInvalidArgument if this execution has not committed, a
// *TransitionError if the table has no succeed rule from the job's state.
func (e *Engine) Finish(ctx context.Context, lease Lease) (Job, error) {
	return e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if x.Status != ExecCommitted {
			return Write{}, fmt.Errorf("%w: execution %s is %s; only a committed execution can finish", ErrInvalidArgument, x.ID, x.Status)
		}
		return finish(ctx, def, &cur, *x, lease.Owner, "", now, p)
	})
}

// Succeed commits and finishes in one atomic write: the effect runs, the
// execution becomes DONE and the job takes its succeed rule. Errors are
// those of Commit and Finish. The commit's effect runs first, then the
// succeed rule's effect: if that one fails, the commit, which cannot be
// undone, is recorded alone (the job stays active, its execution
// COMMITTED), and Succeed returns the job so written with an
// *IncompleteError (ErrIncomplete and the rule effect's error): finish it
// with Finish, or let the sweep finalize it when the lease lapses.
func (e *Engine) Succeed(ctx context.Context, lease Lease, in CommitInput) (Job, error) {
	in.Result = clone(in.Result)
	fn := func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := checkCommit(def, &cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		// The commit alone is the write kept if the succeed rule's effect
		// fails after the commit's effect ran (see plan.run); a machine
		// without rule effects never needs it.
		if def.ruleEffects {
			p.keep(0, commitWrite(def, &cur, x, in.Result, now))
		}
		cur.Job.Result = in.Result
		w, err := finish(ctx, def, &cur, x, lease.Owner, "", now, p)
		if err != nil {
			return Write{}, err
		}
		p.own = in.Effect
		return w, nil
	}
	if job, ok, err := e.succeedPlanned(ctx, lease, in, fn); ok {
		return job, err
	}
	return e.update(ctx, lease.JobID, nil, fn)
}

// finish writes x as DONE and fires the succeed rule; every other live
// execution is aborted, having lost to x.
func finish(ctx context.Context, def *Definition, cur *Snapshot, x Execution, actor, reason string, now time.Time, p *plan) (Write, error) {
	next, rec, err := p.next(ctx, def, cur.Job, Input{
		Event: EventSucceed, Actor: actor, Reason: reason, Now: now, Executions: cur.Executions, ExecID: x.ID,
	})
	if err != nil {
		return Write{}, err
	}
	next.Committed, next.Result = x.ID, cur.Job.Result
	next.LastError, next.ErrorClass = "", ClassNone
	x.Status, x.FinishedAt = ExecDone, now
	lost := abortLive(cur.Executions, x.ID, now, func() string { return fmt.Sprintf("execution %s won", x.ID) })
	w := Write{Job: next, Transitions: []Transition{rec}, Executions: append([]Execution{x}, lost...)}
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w, nil
}

// ErrUnknownEffect: the machine declares no once-only effect of that name.
var ErrUnknownEffect = fmt.Errorf("%w: unknown effect", ErrInvalidArgument)

// Apply runs the machine's named once-only effect for the job (a refund, a
// notification): at most once per job, however often and however concurrently it
// is requested, and only in the states and under the guard its EffectSpec
// declares. The effect is not a state: the job's state does not change,
// its version does, and the store records who ran it and when
// (Store.Effects). Errors: ErrEffectApplied on any later request,
// ErrUnknownEffect, a *TransitionError (ErrInvalidTransition outside the
// allowed states, ErrGuardRefused), the effect's own error (nothing
// recorded, so it may be requested again).
func (e *Engine) Apply(ctx context.Context, id uuid.UUID, name string, c Call) (Job, error) {
	if err := c.check(); err != nil {
		return Job{}, err
	}
	return e.update(ctx, id, c.Args, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		if err := checkVersion(&cur.Job, c.IfVersion); err != nil {
			return Write{}, err
		}
		ef := def.effect(name)
		if ef == nil {
			return Write{}, fmt.Errorf("%w %q on machine %q", ErrUnknownEffect, name, def.name)
		}
		ev := Event("effect:" + name)
		if len(ef.In) > 0 && !containsState(ef.In, cur.Job.State) {
			return Write{}, def.refuse(&cur.Job, ev, ErrInvalidTransition, nil)
		}
		if ef.Guard != nil {
			err := ef.Guard(ctx, GuardInput{Job: cur.Job, Event: ev, From: cur.Job.State, To: cur.Job.State, Actor: c.Actor, Args: c.Args, Now: now, Executions: cur.Executions})
			if err != nil {
				return Write{}, def.refuse(&cur.Job, ev, ErrGuardRefused, err)
			}
		}
		// Refusals that depend on the caller come first, so that a caller
		// who may not run the effect does not learn whether it ran.
		for _, r := range cur.Effects {
			if r.Name == name {
				return Write{}, fmt.Errorf("%w: %q ran for job %s at %s", ErrEffectApplied, name, id, r.At.Format(time.RFC3339Nano))
			}
		}
		w := bump(def, &cur, now)
		w.Effects = []EffectRecord{{Name: name, Actor: c.Actor, At: now}}
		p.own = ef.Run
		return w, nil
	})
}

func containsState(list []State, s State) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
