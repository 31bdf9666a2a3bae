package machines

import (
	"context"
	"errors"
	"time"

	"github.com/jobstate/jobstate"
)

// States converts names to states.
func States(names ...string) []jobstate.State {
	out := make([]jobstate.State, len(names))
	for i, n := range names {
		out[i] = jobstate.State(n)
	}
	return out
}

// SmallSpec is a small valid machine named "base", which the validation
// tests break one rule at a time: new --submit--> ready --claim--> run,
// which succeeds to ok or fails to bad.
func SmallSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "base",
		States: []jobstate.StateSpec{
			{Name: "new", Kind: jobstate.KindInitial},
			{Name: "ready", Kind: jobstate.KindReady},
			{Name: "run", Kind: jobstate.KindActive},
			{Name: "ok", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "bad", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: States("new"), Event: "submit", To: "ready"},
			{From: States("ready"), Event: jobstate.EventClaim, To: "run"},
			{From: States("run"), Event: jobstate.EventSucceed, To: "ok"},
			{From: States("run"), Event: jobstate.EventFail, To: "bad"},
		},
	}
}

// GuardedSpec is SmallSpec with two rules for the same event from the
// same state, the first guarded (only the actor "vip" passes it), so that
// a test can check that rules are tried in table order; with a ready
// state "vip", cancels, a retry rule and two retries a second apart.
func GuardedSpec() jobstate.Spec {
	spec := SmallSpec()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "vip", Kind: jobstate.KindReady})
	spec.Rules = append([]jobstate.Rule{{
		From: States("new"), Event: "submit", To: "vip", GuardName: "is vip",
		Guard: func(_ context.Context, in jobstate.GuardInput) error {
			if in.Actor != "vip" {
				return errors.New("not a vip")
			}
			return nil
		},
	}}, spec.Rules...)
	spec.Rules = append(spec.Rules,
		jobstate.Rule{From: States("vip"), Event: jobstate.EventClaim, To: "run"},
		jobstate.Rule{From: States("ready", "vip"), Event: jobstate.EventCancel, To: "bad"},
		jobstate.Rule{From: States("run"), Event: jobstate.EventRetry, To: "ready"},
	)
	spec.Policy.Retry = jobstate.RetryPolicy{MaxRetries: 2, Backoff: jobstate.FixedBackoff(time.Second)}
	return spec
}
