package jobstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// ErrIncomplete: an operation's write was recorded only in part, because a
// user effect failed after another effect of the same write had already
// run and could not be undone. The error is an *IncompleteError; the job
// the operation returns beside it is the job as written.
var ErrIncomplete = errors.New("jobstate: operation recorded in part")

// IncompleteError reports an operation recorded in part: the moves up to
// Kept were written, with every effect that had run for them, and the
// effect of the move Failed returned Err. The rest of the operation was
// not written: it can be asked for again (Engine.Finish after Succeed; the
// sweep tries its remaining moves at its next pass).
type IncompleteError struct {
	JobID uuid.UUID
	// Kept is how many transition records of the operation were written
	// (zero for a Succeed that recorded its commit alone).
	Kept int
	// Failed is the move whose rule effect failed.
	Failed Transition
	// Err is the effect's error.
	Err error
}

// Error says what was kept and which effect failed.
func (e *IncompleteError) Error() string {
	kept := fmt.Sprintf("%d move(s) recorded", e.Kept)
	if e.Kept == 0 {
		kept = "the commit recorded"
	}
	return fmt.Sprintf("jobstate: job %s: %s; the effect of %q (%s to %s) failed: %v", e.JobID, kept, e.Failed.Event, e.Failed.From, e.Failed.To, e.Err)
}

// Unwrap returns ErrIncomplete and the effect's error.
func (e *IncompleteError) Unwrap() []error { return []error{ErrIncomplete, e.Err} }

// plan holds the users' effects of one write. They run after the
// operation has made every check that could refuse the write, so that
// nothing but another effect can fail after an effect has run:
//
//  1. the operation's own effect (a commit's effect, a once-only effect),
//     with the job as the whole write leaves it;
//  2. the rule effects of the write's transition records, in record
//     order, each with the job as the whole write leaves it and its firing
//     in its context.
//
// The first effect to fail drops the whole write when no effect ran
// before it. When one did (it cannot be undone on a store without a
// transaction), the write is cut back to the last point recorded in
// stages at or before the failing record, if there is one: Succeed keeps
// its commit, the sweep keeps the moves it chained before the failing one.
// Without such a point the whole write is dropped: the effects that ran
// before the failing one in the same move are undone only by a store whose
// transaction they wrote in.
type plan struct {
	// own is the operation's own effect, run first.
	own EffectFunc
	// stages lists the points a write can be cut back to.
	stages []stage
	// one holds the record of a single move, so that the write's slice of
	// records needs no allocation of its own.
	one [1]Transition
	// ex holds the one execution of a write (a claim's, a finish's), for
	// the same reason.
	ex [1]Execution
}

// recsOf returns rec as a write's records, in p's buffer when p is not
// nil. The buffer holds one record: one write per plan uses it.
func (p *plan) recsOf(rec Transition) []Transition {
	if p == nil {
		return []Transition{rec}
	}
	p.one[0] = rec
	return p.one[:1:1]
}

// execsOf returns x followed by more as a write's executions, in p's
// buffer when p is not nil and there is no more.
func (p *plan) execsOf(x Execution, more []Execution) []Execution {
	if p == nil || len(more) > 0 {
		return append([]Execution{x}, more...)
	}
	p.ex[0] = x
	return p.ex[:1:1]
}

// stage is a point a write can be cut back to: after its first recs
// transition records, the write w.
type stage struct {
	recs int
	w    Write
}

// keep records a point the write can be cut back to. w must be a
// complete write; its executions are copied, since later moves may change
// them in place.
func (p *plan) keep(recs int, w Write) {
	w.Executions = append([]Execution(nil), w.Executions...)
	w.Transitions = w.Transitions[:len(w.Transitions):len(w.Transitions)]
	w.Effects = w.Effects[:len(w.Effects):len(w.Effects)]
	p.stages = append(p.stages, stage{recs: recs, w: w})
}

// run runs the effects of w and returns the write to apply: w, or a part
// of it with an *IncompleteError, or an error that drops it.
func (p *plan) run(ctx context.Context, def *Definition, w Write, args any) (Write, error, error) {
	defer clearRules(w.Transitions)
	ran := false
	if p.own != nil {
		if err := runEffect(ctx, p.own, w.Job); err != nil {
			return Write{}, nil, err
		}
		ran = true
	}
	if !def.ruleFx {
		return w, nil, nil
	}
	for i, t := range w.Transitions {
		fx := def.ruleEffect(t)
		if fx == nil {
			continue
		}
		shown := t
		shown.rule = 0
		err := runEffect(context.WithValue(ctx, firingKey{}, Firing{Transition: shown, Args: args}), fx, w.Job)
		if err == nil {
			ran = true
			continue
		}
		if !ran {
			return Write{}, nil, err
		}
		for k := len(p.stages) - 1; k >= 0; k-- {
			if st := p.stages[k]; st.recs <= i {
				return st.w, &IncompleteError{JobID: w.Job.ID, Kept: st.recs, Failed: shown, Err: err}, nil
			}
		}
		return Write{}, nil, err
	}
	return w, nil, nil
}

// clearRules forgets which rules fired, before the records leave the
// engine.
func clearRules(recs []Transition) {
	for i := range recs {
		recs[i].rule = 0
	}
}

// ruleEffect returns the effect of the rule behind record t, if any.
func (d *Definition) ruleEffect(t Transition) EffectFunc {
	if t.rule > 0 {
		return d.rules[t.rule-1].Effect
	}
	si := d.stateIndex(t.From)
	if si < 0 {
		return nil // the creation record
	}
	for _, e := range d.states[si].out {
		if e.event == t.Event && d.states[e.to].spec.Name == t.To {
			return d.rules[e.rule].Effect
		}
	}
	return nil
}
