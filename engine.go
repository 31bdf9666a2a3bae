package jobstate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate/internal/typednil"
)

// Engine runs jobs on their machines. It is the only place rules are
// applied: every operation loads the job inside one atomic Store update,
// checks the table, its guards and the lifecycle policy, writes the new
// version together with its transition records, then tells the observers.
// An operation that returns an error has written nothing.
//
// An Engine is safe for concurrent use and holds no state of its own beyond
// its configuration: several engines (in one process or many) may share a
// store.
type Engine struct {
	store     Store
	clock     Clock
	machines  map[string]*Definition
	observers []Observer
	newID     func() (uuid.UUID, error)
	// finishMoves are the succeed rules of every machine a commit plan
	// covers.
	finishMoves []FinishMove
	random      func() float64
	// names lists the machines' names, sorted: the sweep asks the store
	// for their jobs only.
	names []string
	// lazy is set when some machine expires its jobs lazily.
	lazy bool
	// limitsKeys is set when the store enforces Policy.MaxPerKey
	// (KeyLimiter): only then may a job carry a concurrency key.
	limitsKeys bool
}

// Observer is told of every committed transition, after the write, in
// version order. It runs synchronously in the caller's goroutine, so it
// should be quick; its outcome cannot undo the write.
type Observer func(ctx context.Context, job Job, t Transition)

// Option configures an Engine.
type Option func(*Engine) error

// WithMachines registers definitions. Two machines may not share a name.
func WithMachines(defs ...*Definition) Option {
	return func(e *Engine) error {
		for _, d := range defs {
			if d == nil || d.states == nil {
				return fmt.Errorf("%w: nil or zero definition: make definitions with NewDefinition", ErrInvalidArgument)
			}
			if _, dup := e.machines[d.name]; dup {
				return fmt.Errorf("%w: machine %q registered twice", ErrInvalidArgument, d.name)
			}
			e.machines[d.name] = d
			e.finishMoves = append(e.finishMoves, d.finishMoves()...)
		}
		return nil
	}
}

// WithClock sets the clock (SystemClock by default).
func WithClock(c Clock) Option {
	return func(e *Engine) error {
		if typednil.Is(c) {
			return fmt.Errorf("%w: nil clock", ErrInvalidArgument)
		}
		e.clock = c
		return nil
	}
}

// WithObserver adds an observer of committed transitions.
func WithObserver(o Observer) Option {
	return func(e *Engine) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidArgument)
		}
		e.observers = append(e.observers, o)
		return nil
	}
}

// WithIDs replaces the id source (by default uuid.NewV7: UUIDv7 ids,
// strictly increasing within the process), for reproducible runs such as
// conformance vectors. Ids must be unique.
func WithIDs(gen func() (uuid.UUID, error)) Option {
	return func(e *Engine) error {
		if gen == nil {
			return fmt.Errorf("%w: nil id source", ErrInvalidArgument)
		}
		e.newID = gen
		return nil
	}
}

// WithRandom replaces the source of jitter draws (math/rand/v2's Float64
// by default). It must return values in [0, 1) and be safe for concurrent
// use.
func WithRandom(r func() float64) Option {
	return func(e *Engine) error {
		if r == nil {
			return fmt.Errorf("%w: nil random source", ErrInvalidArgument)
		}
		e.random = r
		return nil
	}
}

// New returns an engine over store. Errors: ErrInvalidArgument for a nil
// store (a typed nil too), a nil option or a bad option; ErrUnsupported for
// a machine with Policy.MaxPerKey on a store that does not enforce it (not
// a KeyLimiter).
func New(store Store, opts ...Option) (*Engine, error) {
	if typednil.Is(store) {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidArgument)
	}
	e := &Engine{store: store, clock: SystemClock{}, machines: make(map[string]*Definition), newID: uuid.NewV7, random: rand.Float64}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option #%d is nil", ErrInvalidArgument, i+1)
		}
		if err := o(e); err != nil {
			return nil, err
		}
	}
	kl, ok := store.(KeyLimiter)
	e.limitsKeys = ok && kl.LimitsKeys()
	for name, d := range e.machines {
		if d.policy.MaxPerKey > 0 && !e.limitsKeys {
			return nil, fmt.Errorf("%w: machine %q limits executions per concurrency key (Policy.MaxPerKey), which the store does not enforce (KeyLimiter)", ErrUnsupported, name)
		}
		e.lazy = e.lazy || d.policy.LazyExpiry
		e.names = append(e.names, name)
	}
	sort.Strings(e.names)
	return e, nil
}

// ready refuses the zero Engine (or a nil one): every method of an engine
// not made by New returns ErrInvalidArgument instead of panicking.
func (e *Engine) ready() error {
	if e == nil || e.store == nil || e.clock == nil || e.machines == nil {
		return fmt.Errorf("%w: engine not made by jobstate.New", ErrInvalidArgument)
	}
	return nil
}

// now reads the clock, refusing a reading outside [MinTime, MaxTime].
func (e *Engine) now() (time.Time, error) {
	now := e.clock.Now()
	return now, checkNow(now)
}

// Machine returns the registered definition with that name.
func (e *Engine) Machine(name string) (*Definition, bool) {
	if e.ready() != nil {
		return nil, false
	}
	d, ok := e.machines[name]
	return d, ok
}

// Store returns the engine's store (nil for an engine not made by New).
func (e *Engine) Store() Store {
	if e.ready() != nil {
		return nil
	}
	return e.store
}

// Now returns the engine clock's reading (the system clock's for an
// engine not made by New).
func (e *Engine) Now() time.Time {
	if e.ready() != nil {
		return time.Now()
	}
	return e.clock.Now()
}

func (e *Engine) machine(name string) (*Definition, error) {
	d, ok := e.machines[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMachine, name)
	}
	return d, nil
}

// Call says who fires an event, why, and with which arguments.
type Call struct {
	// Actor is who fires the event; guards read it (only the job's owner
	// may move it, say).
	Actor string
	// Reason is recorded in the transition.
	Reason string
	// Args are passed to guards as they are.
	Args any
	// IfVersion, when non-zero, makes the operation fail with
	// ErrVersionConflict unless the job is at exactly that version.
	IfVersion int64
}

// Get returns the job. On a machine whose policy asks for lazy expiry, a
// job found past its deadline is expired first (and the expired job
// returned). Errors: ErrNotFound.
func (e *Engine) Get(ctx context.Context, id uuid.UUID) (Job, error) {
	if err := e.ready(); err != nil {
		return Job{}, err
	}
	job, err := e.store.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return e.expireOnRead(ctx, job)
}

// History returns the job's transition records in version order.
func (e *Engine) History(ctx context.Context, id uuid.UUID) ([]Transition, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	return e.store.History(ctx, id)
}

// Executions returns the job's executions in claim order.
func (e *Engine) Executions(ctx context.Context, id uuid.UUID) ([]Execution, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	return e.store.Executions(ctx, id)
}

// Effects returns the once-only effects recorded for the job (Engine.Apply,
// Engine.Redrive), in the order they ran.
func (e *Engine) Effects(ctx context.Context, id uuid.UUID) ([]EffectRecord, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	return e.store.Effects(ctx, id)
}

// Fire applies a user event from the table to the job and returns the job
// as written. Lifecycle events (claim, succeed, retry, ...) belong to the
// engine's own operations and are refused with ErrInvalidArgument; cancel
// may be fired here or through Cancel.
//
// Moving a job out of its active states aborts its live executions: their
// holders' next lease operation fails. A move between active states belongs
// to the lease holder and is refused here (ErrInvalidArgument): use
// Engine.Advance with the lease. A job whose execution has committed
// can only be finished (Engine.Finish); other moves out of its active
// states are refused with a *CommitError.
//
// Errors: ErrNotFound, ErrUnknownMachine, a *TransitionError
// (ErrInvalidTransition, ErrTerminal, ErrGuardRefused and the guard's
// error), ErrVersionConflict when Call.IfVersion does not match.
func (e *Engine) Fire(ctx context.Context, id uuid.UUID, ev Event, c Call) (Job, error) {
	if ev == "" {
		return Job{}, fmt.Errorf("%w: empty event", ErrInvalidArgument)
	}
	if IsLifecycle(ev) {
		return Job{}, fmt.Errorf("%w: event %q is fired by the engine's own operations, not by Fire", ErrInvalidArgument, ev)
	}
	if err := c.check(); err != nil {
		return Job{}, err
	}
	return e.update(ctx, id, c.Args, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		if def.policy.DerivedState {
			return Write{}, fmt.Errorf("%w: machine %q derives its state from its executions; it has no user events", ErrInvalidArgument, def.name)
		}
		if err := checkVersion(&cur.Job, c.IfVersion); err != nil {
			return Write{}, err
		}
		return e.move(ctx, def, &cur, ev, c, now, uuid.Nil, p)
	})
}

func checkVersion(job *Job, want int64) error {
	if want != 0 && job.Version != want {
		return fmt.Errorf("%w: job %s is at version %d, not %d", ErrVersionConflict, job.ID, job.Version, want)
	}
	return nil
}

// move fires one table rule on cur and keeps the executions in step: live
// executions that cannot survive the new state are aborted.
func (e *Engine) move(ctx context.Context, def *Definition, cur *Snapshot, ev Event, c Call, now time.Time, exec uuid.UUID, p *plan) (Write, error) {
	in := Input{
		Event: ev, Actor: c.Actor, Reason: c.Reason, Args: c.Args, Now: now,
		Executions: cur.Executions, ExecID: exec,
	}
	job, rec, err := p.next(ctx, def, cur.Job, in)
	if err != nil {
		return Write{}, err
	}
	w := Write{Job: job, Transitions: []Transition{rec}}
	next := &w.Job
	if exec == uuid.Nil && cur.Job.Kind == KindActive && next.Kind == KindActive && cur.Job.Leases > 0 {
		return Write{}, fmt.Errorf("%w: job %s is held under a lease: a move between its active states (%q to %q) is the lease holder's, through Engine.Advance", ErrInvalidArgument, cur.Job.ID, cur.Job.State, next.State)
	}
	if next.Leases > 0 && !def.leasesSurvive(next) {
		if cur.Job.Committed != uuid.Nil {
			return Write{}, &CommitError{JobID: cur.Job.ID, Winner: cur.Job.Committed}
		}
		to := next.State
		w.Executions = abortLive(cur.Executions, uuid.Nil, now, func() string { return fmt.Sprintf("job moved to %q by %q", to, ev) })
		if ev == EventCancel {
			next.CancelRequested = true
		}
	}
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w, nil
}

// leasesSurvive reports whether live executions may go on holding their
// leases in job's state: an active state, or on a machine allowing several
// executions, a ready state (several submissions to one open job).
func (d *Definition) leasesSurvive(job *Job) bool {
	return job.Kind == KindActive || (job.Kind == KindReady && d.policy.MaxExecutions > 1)
}

// abortLive returns the uncommitted live executions of execs other than
// except, aborted at now with the reason made by why (called only when
// there is one to abort).
func abortLive(execs []Execution, except uuid.UUID, now time.Time, why func() string) []Execution {
	var out []Execution
	var reason string
	for _, x := range execs {
		if (x.Status == ExecLeased || x.Status == ExecInProgress) && x.ID != except {
			if out == nil {
				reason = why()
			}
			x.Status, x.FinishedAt, x.Error = ExecAborted, now, reason
			out = append(out, x)
		}
	}
	return out
}

// settle recomputes the fields of job derived from its executions (the
// stored ones overlaid with the updated ones) and its WakeAt.
func (d *Definition) settle(job *Job, stored, updated []Execution) {
	job.Leases, job.LeaseExpiresAt, job.HeartbeatAt = 0, time.Time{}, time.Time{}
	job.SweepFailures, job.SweepRetryAt = 0, time.Time{}
	visit := func(x *Execution) {
		if !x.Status.Live() {
			return
		}
		job.Leases++
		if job.LeaseExpiresAt.IsZero() || x.LeaseExpiresAt.Before(job.LeaseExpiresAt) {
			job.LeaseExpiresAt = x.LeaseExpiresAt
		}
		if job.HeartbeatAt.IsZero() || x.HeartbeatAt.Before(job.HeartbeatAt) {
			job.HeartbeatAt = x.HeartbeatAt
		}
	}
	for i := range stored {
		if u := findExec(updated, stored[i].ID); u != nil {
			visit(u)
		} else {
			visit(&stored[i])
		}
	}
	for i := range updated {
		if findExec(stored, updated[i].ID) == nil {
			visit(&updated[i])
		}
	}
	job.WakeAt = d.wakeAt(job)
}

func findExec(list []Execution, id uuid.UUID) *Execution {
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// WakeAt returns the wake time the engine writes for job (Job.WakeAt): the
// earliest time the sweep has work with it, or the zero time for never,
// computed from the job alone by the formula of the specification
// (§4.23). After every write of the engine, a stored job's WakeAt equals
// it; other implementations and tests can check theirs against it.
func (d *Definition) WakeAt(job Job) time.Time { return d.wakeAt(&job) }

// wakeAt returns the earliest time the sweep has work with job: a waiting
// job's not-before, the earliest lease expiry, or a deadline that a rule of
// the current state can act on.
func (d *Definition) wakeAt(job *Job) time.Time {
	if job.Kind == KindTerminal {
		return time.Time{}
	}
	var t time.Time
	earliest := func(c time.Time) {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	if job.Kind == KindWaiting {
		if job.NotBefore.IsZero() {
			earliest(job.UpdatedAt)
		} else {
			earliest(job.NotBefore)
		}
	}
	if job.Leases > 0 {
		earliest(job.LeaseExpiresAt)
	}
	if d.expires(job) {
		earliest(job.Deadline)
	}
	if !t.IsZero() && job.SweepRetryAt.After(t) {
		// The sweep failed to write the job: it waits for its retry.
		t = job.SweepRetryAt
	}
	return t
}

// expires reports whether the job's deadline can act on it: it has one, it
// is not terminal, nothing committed (a commit wins over a deadline), and
// its state has an expire rule.
func (d *Definition) expires(job *Job) bool {
	return !job.Deadline.IsZero() && !job.Terminal() && job.Committed == uuid.Nil && d.Can(job.State, EventExpire)
}

// overdue reports whether the job's deadline acts on it at now.
func (d *Definition) overdue(job *Job, now time.Time) bool {
	return d.expires(job) && !now.Before(job.Deadline)
}

// update runs one atomic engine operation on a job and tells the
// observers. args are the caller's arguments, shown to rule effects. On an
// engine with a lazily expiring machine, a job found past its deadline is
// expired first, in its own write, so that no operation acts on an overdue
// job as if it were still live.
func (e *Engine) update(ctx context.Context, id uuid.UUID, args any, fn opFunc) (Job, error) {
	if err := e.ready(); err != nil {
		return Job{}, err
	}
	if e.lazy {
		if job, err := e.store.Get(ctx, id); err == nil {
			if _, err := e.expireOnRead(ctx, job); err != nil {
				return Job{}, err
			}
		}
	}
	return e.run(ctx, id, args, fn)
}

// run is update without the lazy expiry. When an effect failed after
// another effect of the same write had run, the part of the write those
// effects belong to is recorded and returned with an *IncompleteError.
func (e *Engine) run(ctx context.Context, id uuid.UUID, args any, fn opFunc) (Job, error) {
	u := &updating{e: e, args: args, fn: fn}
	job, err := e.store.Update(ctx, id, u.decide)
	if err != nil {
		return Job{}, err
	}
	e.notify(ctx, job, u.recs)
	if u.incomplete != nil {
		return job, u.incomplete
	}
	return job, nil
}

// updating is one run of an operation: what it decides its write with,
// its plan, and what the write leaves for after it (its records, for the
// observers, and whether it was recorded in part).
type updating struct {
	e          *Engine
	args       any
	fn         opFunc
	p          plan
	recs       []Transition
	incomplete *IncompleteError
}

// decide is the operation's UpdateFunc: it runs fn on the job's machine,
// then the write's effects (see plan), and returns what to apply, or the
// error that refuses the write.
func (u *updating) decide(ctx context.Context, cur Snapshot) (Write, error) {
	u.p, u.recs, u.incomplete = plan{}, nil, nil
	def, err := u.e.machine(cur.Job.Machine)
	if err != nil {
		return Write{}, err
	}
	now, err := u.e.now()
	if err != nil {
		return Write{}, err
	}
	w, err := u.fn(ctx, def, cur, now, &u.p)
	if err != nil {
		return Write{}, err
	}
	done, err := u.p.run(ctx, w, u.args)
	u.recs, u.incomplete = done.w.Transitions, done.incomplete
	return done.w, err
}

// opFunc is one engine operation, run inside a store update. It decides
// the write, making every check that could refuse it, and leaves the
// users' effects to p, which runs them after it returns.
type opFunc func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error)

func (e *Engine) notify(ctx context.Context, job Job, recs []Transition) {
	for _, o := range e.observers {
		for _, r := range recs {
			o(ctx, job, r)
		}
	}
}

// expireOnRead applies lazy expiry (Policy.LazyExpiry) to a job just read.
func (e *Engine) expireOnRead(ctx context.Context, job Job) (Job, error) {
	def, ok := e.machines[job.Machine]
	if !ok || !def.policy.LazyExpiry || !def.overdue(&job, e.clock.Now()) {
		return job, nil
	}
	return e.expire(ctx, job.ID)
}

// Prune deletes up to limit (all when limit <= 0) terminal jobs completed
// more than olderThan ago, if the store offers the Pruner capability
// (ErrUnsupported otherwise). It returns how many were deleted.
func (e *Engine) Prune(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	if err := e.ready(); err != nil {
		return 0, err
	}
	p, ok := e.store.(Pruner)
	if !ok {
		return 0, ErrUnsupported
	}
	if err := checkDuration("age", olderThan); err != nil {
		return 0, err
	}
	now, err := e.now()
	if err != nil {
		return 0, err
	}
	return p.Prune(ctx, now.Add(-olderThan), limit)
}

// Counts returns the number of jobs of machine per state, if the store
// offers the Counter capability (ErrUnsupported otherwise).
func (e *Engine) Counts(ctx context.Context, machine string) (map[State]int, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if _, err := e.machine(machine); err != nil {
		return nil, err
	}
	c, ok := e.store.(Counter)
	if !ok {
		return nil, ErrUnsupported
	}
	return c.Count(ctx, machine)
}
