package jobstate

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Transition is one record of a job's history: the move from From to To by
// Event, which produced Version. A job's history is append-only, its
// versions strictly increase, and it replays to the job's current state
// (see Definition.Replay).
type Transition struct {
	JobID   uuid.UUID
	Version int64
	From    State
	Event   Event
	To      State
	// Actor is who fired the event: a user, a worker, or "jobstate" for the
	// engine's own sweeps.
	Actor string
	// Reason is free text: the caller's reason, or the error that caused a
	// retry or failure.
	Reason string
	// ExecID is the execution the move was made through, if any.
	ExecID uuid.UUID
	At     time.Time
}

// Input is an event with its context, as given to Definition.Step.
type Input struct {
	Event  Event
	Actor  string
	Reason string
	// Args are the caller's arguments, passed to guards as they are.
	Args any
	// Now is the time recorded for the move (the pure core reads no clock).
	Now time.Time
	// Executions are the job's executions, for guards that read them.
	Executions []Execution
	// ExecID is recorded in the transition as the execution that made it.
	ExecID uuid.UUID
}

// Step is the pure core of the library: it applies one rule of the table to
// job and returns the next version of the job and the transition record,
// touching no store and reading no clock. It is deterministic for
// deterministic guards.
//
// The next job has the rule's target state with its kind and outcome,
// Version+1, UpdatedAt = in.Now, StartedAt set on first entering an active
// state and CompletedAt on entering a terminal one. Lifecycle bookkeeping
// (attempts, retries, leases, backoff) is the engine's and is not done here.
//
// Errors: a *TransitionError wrapping ErrTerminal when the job is terminal,
// ErrInvalidTransition when no rule matches, ErrGuardRefused (and the
// guard's error) when every matching rule's guard refused;
// ErrInvalidArgument when the job belongs to another machine or is in a
// state the machine does not declare. On error the returned job is the zero
// Job and job itself is untouched (it is passed by value).
func (d *Definition) Step(ctx context.Context, job Job, in Input) (Job, Transition, error) {
	if job.Machine != d.name {
		return Job{}, Transition{}, fmt.Errorf("%w: job %s runs on machine %q, not %q", ErrInvalidArgument, job.ID, job.Machine, d.name)
	}
	si := d.stateIndex(job.State)
	if si < 0 {
		return Job{}, Transition{}, fmt.Errorf("%w: job %s is in state %q, which machine %q does not declare", ErrInvalidArgument, job.ID, job.State, d.name)
	}
	if d.states[si].spec.Kind == KindTerminal {
		return Job{}, Transition{}, d.refuse(&job, in.Event, ErrTerminal, nil)
	}
	ri, err := d.pick(ctx, &job, si, &in)
	if err != nil {
		return Job{}, Transition{}, err
	}
	return d.advance(job, ri, &in)
}

// pick returns the index of the rule that fires for in.Event from state si:
// the first whose guard allows the move.
func (d *Definition) pick(ctx context.Context, job *Job, si int, in *Input) (int, error) {
	var refusal error
	found := false
	for _, ri := range d.states[si].out {
		r := &d.rules[ri]
		if r.Event != in.Event {
			continue
		}
		found = true
		if r.Guard == nil {
			return ri, nil
		}
		err := r.Guard(ctx, GuardInput{
			Job: *job, Event: in.Event, From: job.State, To: r.To,
			Actor: in.Actor, Args: in.Args, Now: in.Now, Executions: in.Executions,
		})
		if err == nil {
			return ri, nil
		}
		refusal = err
	}
	if !found {
		return -1, d.refuse(job, in.Event, ErrInvalidTransition, nil)
	}
	return -1, d.refuse(job, in.Event, ErrGuardRefused, refusal)
}

// advance applies rule ri to job; the rule is known to fire.
func (d *Definition) advance(job Job, ri int, in *Input) (Job, Transition, error) {
	r := &d.rules[ri]
	to := &d.states[d.stateIndex(r.To)].spec
	rec := Transition{
		JobID: job.ID, From: job.State, Event: in.Event, To: r.To,
		Actor: in.Actor, Reason: in.Reason, ExecID: in.ExecID, At: in.Now,
	}
	job.State, job.Kind, job.Outcome = to.Name, to.Kind, to.Outcome
	job.Version++
	job.UpdatedAt = in.Now
	switch to.Kind {
	case KindActive:
		if job.StartedAt.IsZero() {
			job.StartedAt = in.Now
		}
	case KindTerminal:
		job.CompletedAt = in.Now
	}
	rec.Version = job.Version
	return job, rec, nil
}

func (d *Definition) refuse(job *Job, ev Event, sentinel, cause error) error {
	return &TransitionError{JobID: job.ID, Machine: d.name, From: job.State, Event: ev, Err: sentinel, Cause: cause}
}

// Replay checks that history is a valid history of a job of this machine
// and returns the state it leads to: the first record must be the creation
// (EventCreate, from the empty state to the initial state); every later
// record must be a rule of the table from the state the previous one left,
// no record may leave a terminal state, and versions must strictly
// increase. Guards are not evaluated (they judged the moves when they were
// made). An error names the first record at fault.
func (d *Definition) Replay(history []Transition) (State, error) {
	if len(history) == 0 {
		return "", fmt.Errorf("%w: empty history", ErrInvalidTransition)
	}
	if c := history[0]; c.Event != EventCreate || c.From != "" || c.To != d.initial {
		return "", fmt.Errorf("%w: record 0 (%q --%s--> %q) is not the creation into %q", ErrInvalidTransition, c.From, c.Event, c.To, d.initial)
	}
	cur, last := d.initial, history[0].Version
	for i, t := range history[1:] {
		i++
		if t.From != cur {
			return cur, fmt.Errorf("%w: record %d (version %d) leaves %q but the job was in %q", ErrInvalidTransition, i, t.Version, t.From, cur)
		}
		if t.Version <= last {
			return cur, fmt.Errorf("%w: record %d has version %d, not above %d", ErrInvalidTransition, i, t.Version, last)
		}
		si := d.stateIndex(cur)
		if si < 0 {
			return cur, fmt.Errorf("%w: record %d leaves undeclared state %q", ErrInvalidTransition, i, cur)
		}
		if d.states[si].spec.Kind == KindTerminal {
			return cur, fmt.Errorf("%w: record %d leaves terminal state %q", ErrTerminal, i, cur)
		}
		ok := false
		for _, ri := range d.states[si].out {
			if d.rules[ri].Event == t.Event && d.rules[ri].To == t.To {
				ok = true
				break
			}
		}
		if !ok {
			return cur, fmt.Errorf("%w: record %d (%s --%s--> %s) is no rule of machine %q", ErrInvalidTransition, i, t.From, t.Event, t.To, d.name)
		}
		cur, last = t.To, t.Version
	}
	return cur, nil
}
