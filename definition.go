package jobstate

import (
	"context"
	"time"
)

// StateSpec declares one state of a machine.
type StateSpec struct {
	Name State
	Kind Kind
	// Outcome is required for a terminal state and must be empty otherwise.
	Outcome Outcome
	// Description is free text for documentation and diagrams.
	Description string
}

// Guard decides whether a rule may fire. It returns nil to allow the move or
// an error of its own to refuse it; the engine wraps that error in a
// *TransitionError with ErrGuardRefused, so callers can match either.
//
// A guard must be a function of its input: it runs inside the store's
// atomic update of the job, so it must be quick and must not call the engine
// for the same job (that would wait on itself). It must not keep in.Job or
// in.Executions after it returns.
type Guard func(ctx context.Context, in GuardInput) error

// GuardInput is what a guard may read: the job as it is before the move, the
// event, who fires it and with which arguments, the engine's clock reading,
// and the job's executions (so that claim guards can count submissions per
// worker, or cancel can see that one is being judged).
type GuardInput struct {
	Job        Job
	Event      Event
	From, To   State
	Actor      string
	Args       any
	Now        time.Time
	Executions []Execution
}

// Rule is one row of a machine's table: the event moves a job from any of
// the From states to To, if the Guard (when set) allows it.
//
// Several rules may share a From state and an Event when all but the last
// are guarded: they are tried in table order and the first whose guard
// allows the move wins.
type Rule struct {
	From  []State
	Event Event
	To    State
	Guard Guard
	// GuardName names the guard in diagrams, errors and the JSON form of a
	// definition. Optional.
	GuardName string
	// Effect, when set, is the rule's action: it runs each time the engine
	// fires the rule, inside the same atomic write as the move (an audit
	// record of the move). It sees the job as the
	// write leaves it (when one write holds several moves, after all of
	// them), and FiringOf(ctx) tells it which move it runs for. An error aborts the whole operation: nothing is
	// written and the error is returned. Definition.Step, being pure,
	// does not run it.
	Effect EffectFunc
	// EffectName names the effect in diagrams and the JSON form. Optional.
	EffectName string
	// Description is free text for documentation and diagrams.
	Description string
}

// Spec is the declaration of a machine, validated by NewDefinition.
type Spec struct {
	// Name identifies the machine; jobs record it.
	Name string
	// States lists every state; order is kept in diagrams and listings.
	States []StateSpec
	// Initial is the state new jobs start in. It may be of kind initial or
	// ready (jobs may be created straight into a queue). When empty, the
	// one state of kind initial is used.
	Initial State
	// Rules is the transition table.
	Rules []Rule
	// Policy holds the lifecycle settings (leases, retries, concurrency,
	// expiry, idempotency) that the engine applies.
	Policy Policy
	// Create declares the guard and effect of job creation.
	Create CreateSpec
	// Effects declares named once-only effects (Engine.Apply).
	Effects []EffectSpec
}

// EffectFunc is a side effect run inside an atomic update of the job (in a
// SQL store, inside its transaction, reachable through ctx). An error
// aborts the update: nothing is written and the error is returned.
type EffectFunc func(ctx context.Context, job Job) error

// CreateSpec declares what runs when a job is created: a guard that may
// refuse creation (input validation, a quota) and an effect run
// once, atomically with the insert (reserving credit). An
// idempotent create that returns an existing job runs neither. FiringOf
// gives the effect the creation record (actor, reason) and NewJob.Args.
type CreateSpec struct {
	Guard      Guard
	GuardName  string
	Effect     EffectFunc
	EffectName string
}

// EffectSpec declares a named effect that runs at most once per job,
// however often it is requested, and that is not a state (a
// refund). It may run only while the job is in one of the In states (any
// state when In is empty) and when its guard allows.
type EffectSpec struct {
	Name      string
	In        []State
	Guard     Guard
	GuardName string
	Run       EffectFunc
	// RunName names Run in the JSON form. Optional.
	RunName string
}

// Definition is a validated, immutable machine: a Spec that passed every
// check of NewDefinition. It is safe for concurrent use.
type Definition struct {
	name   string
	states []stateInfo
	byName map[State]int
	// ruleEffects is set when some rule has an Effect: only then can a
	// write be cut back (see plan).
	ruleEffects bool
	rules       []Rule
	start       int
	policy      Policy
	initial     State
	create      CreateSpec
	effects     []EffectSpec
	// moves and expiringStates are what a claim plan of the machine
	// covers (claimMoves, expiring).
	moves          []ClaimMove
	expiringStates []State
}

type stateInfo struct {
	spec StateSpec
	// out lists the rules leaving the state, in table order.
	out []edge
}

// edge is one rule as seen from one of its From states.
type edge struct {
	event Event
	to    int // index of the target state
	rule  int // index into Definition.rules
	guard Guard
}

// Firing is what made a rule's effect run: the transition being written
// (its event, actor, reason, execution, time) and the caller's arguments.
type Firing struct {
	Transition Transition
	Args       any
}

type firingKey struct{}

// FiringOf returns the firing that a rule's effect runs for, from the
// context the effect receives; false outside a rule effect.
func FiringOf(ctx context.Context) (Firing, bool) {
	f, ok := ctx.Value(firingKey{}).(Firing)
	return f, ok
}

// NewDefinition validates spec and returns the immutable Definition built
// from it. On failure the error is a *DefinitionError (errors.Is
// ErrInvalidDefinition) listing every problem, each naming the state or
// rule at fault. It never panics, whatever the spec holds.
func NewDefinition(spec Spec) (*Definition, error) {
	if problems := validate(&spec); len(problems) > 0 {
		return nil, &DefinitionError{Machine: spec.Name, Problems: problems}
	}
	d := &Definition{
		name:   spec.Name,
		byName: make(map[State]int, len(spec.States)),
		policy: spec.Policy.withDefaults(),
	}
	d.states = make([]stateInfo, len(spec.States))
	for i, s := range spec.States {
		d.states[i].spec = s
		d.byName[s.Name] = i
	}
	d.rules = make([]Rule, len(spec.Rules))
	for i, r := range spec.Rules {
		r.From = append([]State(nil), r.From...)
		d.rules[i] = r
		d.ruleEffects = d.ruleEffects || r.Effect != nil
		for _, f := range r.From {
			si := d.byName[f]
			d.states[si].out = append(d.states[si].out, edge{event: r.Event, to: d.byName[r.To], rule: i, guard: r.Guard})
		}
	}
	d.create = spec.Create
	for _, ef := range spec.Effects {
		ef.In = append([]State(nil), ef.In...)
		d.effects = append(d.effects, ef)
	}
	d.policy.Idempotency.ReleaseIn = append([]State(nil), spec.Policy.Idempotency.ReleaseIn...)
	d.policy.RedriveFrom = append([]State(nil), spec.Policy.RedriveFrom...)
	d.initial = startState(&spec)
	d.start = d.byName[d.initial]
	d.moves, d.expiringStates = d.claimMoves(), d.expiring()
	return d, nil
}

// Name returns the machine's name.
func (d *Definition) Name() string { return d.name }

// Initial returns the state new jobs start in.
func (d *Definition) Initial() State { return d.initial }

// Policy returns the machine's lifecycle policy, with defaults filled in.
func (d *Definition) Policy() Policy {
	p := d.policy
	p.Idempotency.ReleaseIn = append([]State(nil), p.Idempotency.ReleaseIn...)
	p.RedriveFrom = append([]State(nil), p.RedriveFrom...)
	return p
}

// Create returns the creation guard and effect.
func (d *Definition) Create() CreateSpec { return d.create }

// Effects returns the declared once-only effects.
func (d *Definition) Effects() []EffectSpec {
	out := make([]EffectSpec, len(d.effects))
	for i, ef := range d.effects {
		ef.In = append([]State(nil), ef.In...)
		out[i] = ef
	}
	return out
}

func (d *Definition) effect(name string) *EffectSpec {
	for i := range d.effects {
		if d.effects[i].Name == name {
			return &d.effects[i]
		}
	}
	return nil
}

// States returns a copy of the declared states, in declaration order.
func (d *Definition) States() []StateSpec {
	out := make([]StateSpec, len(d.states))
	for i := range d.states {
		out[i] = d.states[i].spec
	}
	return out
}

// Rules returns a copy of the table, in declaration order.
func (d *Definition) Rules() []Rule {
	out := make([]Rule, len(d.rules))
	for i, r := range d.rules {
		r.From = append([]State(nil), r.From...)
		out[i] = r
	}
	return out
}

// State returns the declaration of s and whether s is a state of the machine.
func (d *Definition) State(s State) (StateSpec, bool) {
	i := d.stateIndex(s)
	if i < 0 {
		return StateSpec{}, false
	}
	return d.states[i].spec, true
}

// Can reports whether the table has a rule for ev from state s (guards are
// not evaluated).
func (d *Definition) Can(s State, ev Event) bool {
	i := d.stateIndex(s)
	return i >= 0 && d.ruleFor(i, ev) >= 0
}

// Events returns the events that have a rule from state s, in table order
// and without repeats.
func (d *Definition) Events(s State) []Event {
	i := d.stateIndex(s)
	if i < 0 {
		return nil
	}
	var out []Event
	for _, e := range d.states[i].out {
		if !containsEvent(out, e.event) {
			out = append(out, e.event)
		}
	}
	return out
}

// stateIndex finds a state, -1 when the machine does not declare it. A
// machine of a few states is scanned, which costs less than hashing the
// name.
func (d *Definition) stateIndex(s State) int {
	if len(d.states) <= 8 {
		for i := range d.states {
			if d.states[i].spec.Name == s {
				return i
			}
		}
		return -1
	}
	if i, ok := d.byName[s]; ok {
		return i
	}
	return -1
}

// ruleFor returns the index of the first rule for ev leaving state index
// si, or -1.
func (d *Definition) ruleFor(si int, ev Event) int {
	for _, e := range d.states[si].out {
		if e.event == ev {
			return e.rule
		}
	}
	return -1
}

func containsEvent(list []Event, ev Event) bool {
	for _, e := range list {
		if e == ev {
			return true
		}
	}
	return false
}
