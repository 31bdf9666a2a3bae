package jobstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/require"
)

// cloned returns spec with every state and event name in a string of its
// own, so that no name shares its bytes with a constant.
func cloned(spec jobstate.Spec) jobstate.Spec {
	st := func(s jobstate.State) jobstate.State { return jobstate.State(strings.Clone(string(s))) }
	out := spec
	out.Name = strings.Clone(spec.Name)
	out.States = make([]jobstate.StateSpec, len(spec.States))
	for i, s := range spec.States {
		s.Name = st(s.Name)
		out.States[i] = s
	}
	out.Rules = make([]jobstate.Rule, len(spec.Rules))
	for i, r := range spec.Rules {
		from := make([]jobstate.State, len(r.From))
		for j, f := range r.From {
			from[j] = st(f)
		}
		r.From, r.To, r.Event = from, st(r.To), jobstate.Event(strings.Clone(string(r.Event)))
		out.Rules[i] = r
	}
	return out
}

// TestStepIgnoresWhereNamesLive checks that Step's result depends on the
// names' text only, never on which string holds it: a definition built
// from constants and one built from copies, stepping jobs whose states and
// events are constants or copies, agree on every step (state, version,
// record, error).
func TestStepIgnoresWhereNamesLive(t *testing.T) {
	ctx := context.Background()
	constDef, err := jobstate.NewDefinition(guardedSpec())
	require.NoError(t, err)
	copyDef, err := jobstate.NewDefinition(cloned(guardedSpec()))
	require.NoError(t, err)
	events := []jobstate.Event{"submit", jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventFail,
		jobstate.EventRetry, jobstate.EventCancel, "nope", "claim2", ""}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		newJob := func() jobstate.Job {
			m := "base"
			if rapid.Bool().Draw(t, "clone machine") {
				m = strings.Clone(m)
			}
			return jobstate.Job{Machine: m, State: "new", Kind: jobstate.KindInitial, Version: 1}
		}
		a, b := newJob(), newJob()
		for i := range rapid.IntRange(1, 12).Draw(t, "steps") {
			ev := rapid.SampledFrom(events).Draw(t, "event")
			if rapid.Bool().Draw(t, "clone event") {
				ev = jobstate.Event(strings.Clone(string(ev)))
			}
			if rapid.Bool().Draw(t, "clone state") {
				b.State = jobstate.State(strings.Clone(string(b.State)))
			}
			actor := rapid.SampledFrom([]string{"vip", "joe"}).Draw(t, "actor")
			in := jobstate.Input{Event: ev, Actor: actor, Now: at.Add(time.Duration(i) * time.Second)}
			ra, errA := constDef.Step(ctx, &a, in)
			rb, errB := copyDef.Step(ctx, &b, in)
			require.Equal(t, errA == nil, errB == nil, "step %d (%s): %v / %v", i, ev, errA, errB)
			for _, sentinel := range []error{jobstate.ErrInvalidTransition, jobstate.ErrTerminal, jobstate.ErrGuardRefused, jobstate.ErrInvalidArgument} {
				require.Equal(t, errors.Is(errA, sentinel), errors.Is(errB, sentinel), "step %d: %v / %v", i, errA, errB)
			}
			require.Equal(t, a, b)
			require.Equal(t, ra, rb)
		}
	})
}
