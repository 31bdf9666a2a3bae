package jobstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// EventCreate is the event of the first record of every history: from the
// empty state to the machine's initial state. It is no rule of the table;
// Definition.Replay expects it first.
const EventCreate Event = "create"

// ErrKeyConflict: an idempotency key is held by a job created from a
// different fingerprint (payload). The error is a *KeyConflictError.
var ErrKeyConflict = errors.New("jobstate: idempotency key conflict")

// KeyConflictError names the job holding a key that was reused with a
// different fingerprint.
type KeyConflictError struct {
	Key    string
	Holder uuid.UUID
}

// Error names the key and its holder.
func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("jobstate: idempotency key %q is held by job %s, created from a different payload", e.Key, e.Holder)
}

// Unwrap returns ErrKeyConflict.
func (e *KeyConflictError) Unwrap() error { return ErrKeyConflict }

// NewJob describes a job to create.
type NewJob struct {
	// Machine names the registered Definition to run the job on.
	Machine string
	Payload []byte
	// Owner is who the job belongs to, for guards.
	Owner string
	// ConcurrencyKey groups the job with the machine's other jobs of the
	// same key, whose live executions Policy.MaxPerKey limits. Empty: not
	// limited. At most MaxKeyBytes of valid UTF-8 without NUL; refused
	// with ErrUnsupported on a store that is not a KeyLimiter.
	ConcurrencyKey string
	Priority       int
	// NotBefore schedules the job: it cannot be claimed earlier.
	NotBefore time.Time
	// Deadline expires the job at that time if it is unfinished; TTL, when
	// Deadline is zero, sets it to creation time + TTL.
	Deadline time.Time
	TTL      time.Duration
	// Retry overrides the machine's retry policy for this job, field by
	// field. The engine copies what it keeps.
	Retry *RetryOverride
	// Key is the idempotency key (see Key and KeyAt). Empty means none.
	Key string
	// Fingerprint identifies what is created under Key; empty means
	// Fingerprint(Payload).
	Fingerprint string
	// Actor, Reason and Args are given to the creation guard and recorded.
	Actor  string
	Reason string
	Args   any
}

// Created is the result of a creation: of Engine.Create, of each job of
// Engine.CreateMany and of BatchCreator.CreateBatch.
type Created struct {
	// Job is the job created, or the job holding the key.
	Job Job
	// Existing is true when the key was held by a job already, which is
	// returned instead of a new one; no guard or effect ran.
	Existing bool
}

// Create creates a job in its machine's initial state, with a first
// history record (EventCreate). The creation guard runs first and may
// refuse (a *TransitionError with ErrGuardRefused and the guard's error);
// the creation effect then runs once, atomically with the insert.
//
// With a Key, concurrent creates serialize on it: while a job holds the key
// (see IdempotencyPolicy) it is returned with Existing set, and no guard or
// effect runs; the same key with another fingerprint is a
// *KeyConflictError. Errors: ErrUnknownMachine, ErrInvalidArgument (a TTL
// negative or above MaxDuration, a not-before or deadline outside
// [MinTime, MaxTime], an invalid Retry override), ErrKeyConflict, guard
// refusals, the effect's error. No error leaves anything written. The
// engine keeps a copy of the payload: the caller may reuse its buffer.
func (e *Engine) Create(ctx context.Context, nj NewJob) (Created, error) {
	if err := e.ready(); err != nil {
		return Created{}, err
	}
	c, rec, err := e.create(ctx, nj)
	if err != nil {
		return Created{}, err
	}
	if !c.Existing {
		e.notify(ctx, c.Job, []Transition{rec})
	}
	return c, nil
}

// create is Create without telling the observers; it returns the creation
// record for the caller to tell them.
func (e *Engine) create(ctx context.Context, nj NewJob) (Created, Transition, error) {
	c := &creation{e: e, nj: nj}
	if err := e.planCreate(&c.p, &c.nj); err != nil {
		return Created{}, Transition{}, err
	}
	job, created, err := e.store.Create(ctx, nj.Machine, nj.Key, c.decide)
	if err != nil {
		return Created{}, Transition{}, err
	}
	return Created{Job: job, Existing: !created}, c.rec, nil
}

// creation is one Create: what it decides its write from, and the record
// it made.
type creation struct {
	e   *Engine
	nj  NewJob
	p   createPlan
	rec Transition
}

// decide is the creation's CreateFunc.
func (c *creation) decide(ctx context.Context, existing *Job) (Write, error) {
	now, err := c.e.now()
	if err != nil {
		return Write{}, err
	}
	if existing != nil && c.p.def.policy.Idempotency.holdsKey(existing, now) {
		if existing.Fingerprint != c.p.fp {
			return Write{}, &KeyConflictError{Key: c.nj.Key, Holder: existing.ID}
		}
		return Write{}, nil
	}
	w, err := c.e.buildJob(ctx, &c.p, now)
	if err != nil {
		return Write{}, err
	}
	c.rec = w.Transitions[0]
	return w, nil
}

// createPlan is what a creation checks and prepares before the store is
// called: the machine, the retry settings, the fingerprint and the
// engine's copy of the payload.
type createPlan struct {
	nj      *NewJob
	def     *Definition
	retry   RetryPolicy
	own     bool
	fp      string
	payload []byte
}

// planCreate checks nj (steps 1-4 of Create) and prepares its creation.
func (e *Engine) planCreate(p *createPlan, nj *NewJob) error {
	def, err := e.machine(nj.Machine)
	if err != nil {
		return err
	}
	if err := nj.checkTexts(); err != nil {
		return err
	}
	if nj.ConcurrencyKey != "" && !e.limitsKeys {
		return fmt.Errorf("%w: a concurrency key needs a store that enforces Policy.MaxPerKey (KeyLimiter)", ErrUnsupported)
	}
	if err := checkDuration("TTL", nj.TTL); err != nil {
		return err
	}
	if err := checkTime("not-before", nj.NotBefore); err != nil {
		return err
	}
	if err := checkTime("deadline", nj.Deadline); err != nil {
		return err
	}
	retry, own, err := override(def.policy.Retry, nj.Retry)
	if err != nil {
		return err
	}
	fp := nj.Fingerprint
	if nj.Key != "" && fp == "" {
		fp = Fingerprint(nj.Payload)
	}
	*p = createPlan{nj: nj, def: def, retry: retry, own: own, fp: fp, payload: clone(nj.Payload)}
	return nil
}

// buildJob is the inside of a creation once the key (if any) is free: a
// new id, the job, the creation guard, the creation effect, and the write
// with its creation record.
func (e *Engine) buildJob(ctx context.Context, p *createPlan, now time.Time) (Write, error) {
	def, nj := p.def, p.nj
	id, err := e.newID()
	if err != nil {
		return Write{}, fmt.Errorf("jobstate: new job id: %w", err)
	}
	init := def.states[def.start].spec
	job := Job{
		ID: id, Machine: def.name, State: init.Name, Kind: init.Kind,
		Payload: p.payload, Version: 1, MaxRetries: p.retry.MaxRetries,
		IdempotencyKey: nj.Key, Fingerprint: p.fp, Owner: nj.Owner, ConcurrencyKey: nj.ConcurrencyKey, Priority: nj.Priority,
		CreatedAt: now, UpdatedAt: now, NotBefore: nj.NotBefore, Deadline: nj.Deadline,
	}
	if p.own {
		job.Backoff, job.OwnBackoff = p.retry.Backoff, true
	}
	if job.Deadline.IsZero() && nj.TTL > 0 {
		job.Deadline = after(now, nj.TTL)
	}
	if g := def.create.Guard; g != nil {
		err := g(ctx, GuardInput{Job: job, Event: EventCreate, To: init.Name, Actor: nj.Actor, Args: nj.Args, Now: now})
		if err != nil {
			return Write{}, &TransitionError{Machine: def.name, Event: EventCreate, Err: ErrGuardRefused, Cause: err}
		}
	}
	job.WakeAt = def.wakeAt(&job)
	rec := Transition{JobID: id, Version: 1, Event: EventCreate, To: init.Name, Actor: nj.Actor, Reason: nj.Reason, At: now}
	if fx := def.create.Effect; fx != nil {
		if err := runEffect(context.WithValue(ctx, firingKey{}, Firing{Transition: rec, Args: nj.Args}), fx, job); err != nil {
			return Write{}, err
		}
	}
	return Write{Job: job, Transitions: []Transition{rec}}, nil
}

// override applies a job's retry override to the machine's policy and
// says whether the job has a backoff of its own.
func override(p RetryPolicy, o *RetryOverride) (RetryPolicy, bool, error) {
	if o == nil {
		return p, false, nil
	}
	if o.MaxRetries != nil {
		p.MaxRetries = *o.MaxRetries
	}
	if o.Backoff != nil {
		p.Backoff = *o.Backoff
	}
	if err := p.validate(); err != nil {
		return p, false, fmt.Errorf("%w: retry override: %v", ErrInvalidArgument, err)
	}
	return p, o.Backoff != nil, nil
}

// EventRedrive is the event named in refusals of Engine.Redrive; it is no
// rule of any table.
const EventRedrive Event = "redrive"

// RedriveEffect is the name of the once-only effect Engine.Redrive records
// on the job it runs again.
const RedriveEffect = "redrive"

// Redrive runs a finished job again, as an explicit, recorded operator
// action, where the machine allows it (Policy.RedriveFrom, typically a
// dead-letter state). Terminal states stay final: the job itself does not move.
// Instead a new job is created, on the same machine, with the same payload,
// owner and priority, and with the job's retry settings, through the
// machine's creation guard and effect; its creation record names the
// operator (Call.Actor) and the job it redrives. The old job records the
// once-only effect RedriveEffect, so a job is redriven at most once.
//
// Errors: ErrNotFound; a *TransitionError with ErrInvalidTransition when
// the job's state is not one the machine redrives from; ErrEffectApplied
// when it was redriven already; the creation guard's refusal or effect's
// error. The new job is created inside the old job's atomic update: on an
// error nothing is written (in a store whose Create does not share the
// update's transaction, a store failure between the two writes can leave
// the new job without the old job's record).
func (e *Engine) Redrive(ctx context.Context, id uuid.UUID, c Call) (Job, error) {
	if err := c.check(); err != nil {
		return Job{}, err
	}
	var created Created
	var rec Transition
	_, err := e.update(ctx, id, c.Args, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, _ *plan) (Write, error) {
		if err := checkVersion(&cur.Job, c.IfVersion); err != nil {
			return Write{}, err
		}
		if !containsState(def.policy.RedriveFrom, cur.Job.State) {
			return Write{}, def.refuse(&cur.Job, EventRedrive, ErrInvalidTransition, nil)
		}
		for _, r := range cur.Effects {
			if r.Name == RedriveEffect {
				return Write{}, fmt.Errorf("%w: job %s was redriven at %s", ErrEffectApplied, id, r.At.Format(time.RFC3339Nano))
			}
		}
		old := cur.Job
		nj := NewJob{
			Machine: old.Machine, Payload: old.Payload, Owner: old.Owner, ConcurrencyKey: old.ConcurrencyKey, Priority: old.Priority,
			Retry: &RetryOverride{MaxRetries: Retries(old.MaxRetries)},
			Actor: c.Actor, Reason: fmt.Sprintf("redrive of job %s", old.ID), Args: c.Args,
		}
		if old.OwnBackoff {
			b := old.Backoff
			nj.Retry.Backoff = &b
		}
		if c.Reason != "" {
			nj.Reason += ": " + c.Reason
		}
		var err error
		if created, rec, err = e.create(ctx, nj); err != nil {
			return Write{}, err
		}
		w := bump(def, &cur, now)
		w.Effects = []EffectRecord{{Name: RedriveEffect, Actor: c.Actor, At: now}}
		return w, nil
	})
	if err != nil {
		return Job{}, err
	}
	// Told only now, so that an observer acting on the old job does not
	// wait on the update that created the new one.
	e.notify(ctx, created.Job, []Transition{rec})
	return created.Job, nil
}
