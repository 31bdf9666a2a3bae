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

// Step is the pure core of the library: it applies one rule of the table
// to *job, moving it in place to its next version, and returns the
// transition record. It touches no store and reads no clock, and it is
// deterministic for deterministic guards. To keep the current version,
// step a copy: next := job; rec, err := def.Step(ctx, &next, in).
//
// The moved job has the rule's target state with its kind and outcome,
// Version+1, UpdatedAt = in.Now, StartedAt set on first entering an active
// state and CompletedAt on entering a terminal one. Lifecycle bookkeeping
// (attempts, retries, leases, backoff) is the engine's and is not done here.
//
// Errors: a *TransitionError wrapping ErrTerminal when the job is terminal,
// ErrInvalidTransition when no rule matches, ErrGuardRefused (and the
// guard's error) when every matching rule's guard refused;
// ErrInvalidArgument for a nil job, or one that belongs to another machine
// or is in a state the machine does not declare. On error *job is left unchanged.
func (d *Definition) Step(ctx context.Context, job *Job, in Input) (Transition, error) {
	rec, _, err := d.step(ctx, job, in)
	return rec, err
}

// step is Step, also returning the index of the rule that fired (several
// rules may share a state, an event and a target, with different guards
// and effects).
func (d *Definition) step(ctx context.Context, job *Job, in Input) (Transition, int, error) {
	e, err := d.fires(ctx, job, &in)
	if err != nil {
		return Transition{}, -1, err
	}
	to := &d.states[e.to].spec
	rec := Transition{
		JobID: job.ID, Version: job.Version + 1, From: job.State, Event: in.Event, To: to.Name,
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
	return rec, e.rule, nil
}

// fires returns the edge that fires for in from job's state: the first
// rule for the event whose guard (if any) allows the move, in table order.
func (d *Definition) fires(ctx context.Context, job *Job, in *Input) (*edge, error) {
	if job == nil {
		return nil, fmt.Errorf("%w: nil job", ErrInvalidArgument)
	}
	if job.Machine != d.name {
		return nil, fmt.Errorf("%w: job %s runs on machine %q, not %q", ErrInvalidArgument, job.ID, job.Machine, d.name)
	}
	si := d.stateIndex(job.State)
	if si < 0 {
		return nil, fmt.Errorf("%w: job %s is in state %q, which machine %q does not declare", ErrInvalidArgument, job.ID, job.State, d.name)
	}
	st := &d.states[si]
	if st.spec.Kind == KindTerminal {
		return nil, d.refuse(job, in.Event, ErrTerminal, nil)
	}
	found := false
	var refusal error
	for i := range st.out {
		e := &st.out[i]
		if e.event != in.Event {
			continue
		}
		found = true
		if e.guard == nil {
			return e, nil
		}
		err := e.guard(ctx, GuardInput{
			Job: *job, Event: in.Event, From: job.State, To: d.states[e.to].spec.Name,
			Actor: in.Actor, Args: in.Args, Now: in.Now, Executions: in.Executions,
		})
		if err == nil {
			return e, nil
		}
		refusal = err
	}
	if !found {
		return nil, d.refuse(job, in.Event, ErrInvalidTransition, nil)
	}
	return nil, d.refuse(job, in.Event, ErrGuardRefused, refusal)
}

// refuse is the error for a refused step.
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
		for _, e := range d.states[si].out {
			if e.event == t.Event && d.states[e.to].spec.Name == t.To {
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
