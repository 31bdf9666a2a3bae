package jobstate_test

import (
	"context"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// TestDefinitionsNeverPanic feeds random, mostly invalid specs to
// NewDefinition: each gives a definition or an ErrInvalidDefinition, never
// a panic, and a definition it accepts passes its own checks.
func TestDefinitionsNeverPanic(t *testing.T) {
	names := []string{"", "a", "b", "c", "d", "e", "a b", "x:y"}
	rapid.Check(t, func(rt *rapid.T) {
		var spec jobstate.Spec
		spec.Name = rapid.SampledFrom([]string{"", "m", "  "}).Draw(rt, "name")
		n := rapid.IntRange(0, 6).Draw(rt, "states")
		for i := 0; i < n; i++ {
			spec.States = append(spec.States, jobstate.StateSpec{
				Name:    jobstate.State(rapid.SampledFrom(names).Draw(rt, "state")),
				Kind:    jobstate.Kind(rapid.IntRange(0, 7).Draw(rt, "kind")),
				Outcome: jobstate.Outcome(rapid.SampledFrom([]string{"", "succeeded", "failed", "cancelled", "weird"}).Draw(rt, "outcome")),
			})
		}
		r := rapid.IntRange(0, 8).Draw(rt, "rules")
		events := []jobstate.Event{"", "go", jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry, jobstate.EventRequeue, jobstate.EventExhaust, jobstate.EventCancel, jobstate.EventExpire, jobstate.EventAbandon}
		for i := 0; i < r; i++ {
			var from []jobstate.State
			for _, f := range rapid.SliceOfN(rapid.SampledFrom(names), 0, 3).Draw(rt, "from") {
				from = append(from, jobstate.State(f))
			}
			rule := jobstate.Rule{From: from, Event: rapid.SampledFrom(events).Draw(rt, "event"), To: jobstate.State(rapid.SampledFrom(names).Draw(rt, "to"))}
			if rapid.Bool().Draw(rt, "guarded") {
				rule.Guard = func(context.Context, jobstate.GuardInput) error { return nil }
			}
			spec.Rules = append(spec.Rules, rule)
		}
		spec.Initial = jobstate.State(rapid.SampledFrom(names).Draw(rt, "initial"))
		spec.Policy.MaxExecutions = rapid.IntRange(-1, 3).Draw(rt, "maxExec")
		spec.Policy.Retry.MaxRetries = rapid.IntRange(-2, 3).Draw(rt, "maxRetries")
		spec.Policy.DerivedState = rapid.Bool().Draw(rt, "derived")

		d, err := jobstate.NewDefinition(spec)
		if err != nil {
			if !errors.Is(err, jobstate.ErrInvalidDefinition) || d != nil {
				rt.Fatalf("bad error shape: %v", err)
			}
			var de *jobstate.DefinitionError
			if !errors.As(err, &de) || len(de.Problems) == 0 {
				rt.Fatalf("no problems listed: %v", err)
			}
			return
		}
		// An accepted definition: the initial state exists and is initial or ready.
		st, ok := d.State(d.Initial())
		if !ok || (st.Kind != jobstate.KindInitial && st.Kind != jobstate.KindReady) {
			rt.Fatalf("accepted definition with bad initial state %q", d.Initial())
		}
		for _, s := range d.States() {
			if s.Kind == jobstate.KindTerminal && len(d.Events(s.Name)) > 0 {
				rt.Fatalf("accepted terminal state %q with outgoing rules", s.Name)
			}
		}
		_ = d.Mermaid()
	})
}
