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
	// fired lists the effects of the rules that made the write's records,
	// by the version each record produced.
	fired []firedRule
	// stages lists the points a write can be cut back to.
	stages []stage
}

// firedRule is the effect of the rule that produced a version.
type firedRule struct {
	version int64
	effect  EffectFunc
}

// next steps a copy of job by def's table and returns it with the record;
// the effect of the rule that fired, if any, is kept for the record.
func (p *plan) next(ctx context.Context, def *Definition, job Job, in Input) (Job, Transition, error) {
	rec, rule, err := def.step(ctx, &job, in)
	if err != nil {
		return Job{}, Transition{}, err
	}
	if fx := def.rules[rule].Effect; fx != nil {
		p.fired = append(p.fired, firedRule{version: rec.Version, effect: fx})
	}
	return job, rec, nil
}

// effectOf returns the effect of the rule that produced version, if any.
// When a version was stepped to more than once (a candidate tried, then
// another), the last step is the one written.
func (p *plan) effectOf(version int64) EffectFunc {
	for i := len(p.fired) - 1; i >= 0; i-- {
		if p.fired[i].version == version {
			return p.fired[i].effect
		}
	}
	return nil
}

// stage is a point a write can be cut back to: after its first recs
// transition records, the write w.
type stage struct {
	recs int
	w    Write
}

// keep records a point the write can be cut back to. w must be a
// complete write that nothing changes afterwards.
func (p *plan) keep(recs int, w Write) {
	p.stages = append(p.stages, stage{recs: recs, w: w})
}

// outcome is what the effects of a write leave to apply: the write, or,
// when an effect failed after another had run, the part of it recorded
// before that effect's move, with the error that says so.
type outcome struct {
	w          Write
	incomplete *IncompleteError
}

// run runs the effects of w and returns what to apply, or the error that
// drops the whole write.
func (p *plan) run(ctx context.Context, w Write, args any) (outcome, error) {
	ran := false
	if p.own != nil {
		if err := runEffect(ctx, p.own, w.Job); err != nil {
			return outcome{}, err
		}
		ran = true
	}
	for i, t := range w.Transitions {
		fx := p.effectOf(t.Version)
		if fx == nil {
			continue
		}
		err := runEffect(context.WithValue(ctx, firingKey{}, Firing{Transition: t, Args: args}), fx, w.Job)
		if err == nil {
			ran = true
			continue
		}
		if !ran {
			return outcome{}, err
		}
		for k := len(p.stages) - 1; k >= 0; k-- {
			if st := p.stages[k]; st.recs <= i {
				cut := st.w
				cut.MaxPerKey = w.MaxPerKey
				return outcome{w: cut, incomplete: &IncompleteError{JobID: w.Job.ID, Kept: st.recs, Failed: t, Err: err}}, nil
			}
		}
		return outcome{}, err
	}
	return outcome{w: w}, nil
}
