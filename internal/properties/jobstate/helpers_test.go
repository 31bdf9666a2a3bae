// Property tests of package jobstate (definitions, the JSON forms of
// definitions and jobs, Step) drawn with pgregory.net/rapid, in a module
// that is never released so that rapid never reaches the library's
// users. The functions below are those of the root package's tests that
// the properties use.
package jobstate_test

import (
	"context"
	"errors"
	"time"

	"github.com/jobstate/jobstate"
)

// states converts names to states.
func states(names ...string) []jobstate.State {
	out := make([]jobstate.State, len(names))
	for i, n := range names {
		out[i] = jobstate.State(n)
	}
	return out
}

// base is a small valid machine that the validation cases break.
func base() jobstate.Spec {
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
			{From: states("new"), Event: "submit", To: "ready"},
			{From: states("ready"), Event: jobstate.EventClaim, To: "run"},
			{From: states("run"), Event: jobstate.EventSucceed, To: "ok"},
			{From: states("run"), Event: jobstate.EventFail, To: "bad"},
		},
	}
}

// guardedSpec is base with two rules for the same event from the same
// state, the first guarded: the lookups that compare names by address must
// still try them in table order.
func guardedSpec() jobstate.Spec {
	spec := base()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "vip", Kind: jobstate.KindReady})
	spec.Rules = append([]jobstate.Rule{{
		From: states("new"), Event: "submit", To: "vip", GuardName: "is vip",
		Guard: func(_ context.Context, in jobstate.GuardInput) error {
			if in.Actor != "vip" {
				return errors.New("not a vip")
			}
			return nil
		},
	}}, spec.Rules...)
	spec.Rules = append(spec.Rules,
		jobstate.Rule{From: states("vip"), Event: jobstate.EventClaim, To: "run"},
		jobstate.Rule{From: states("ready", "vip"), Event: jobstate.EventCancel, To: "bad"},
		jobstate.Rule{From: states("run"), Event: jobstate.EventRetry, To: "ready"},
	)
	spec.Policy.Retry = jobstate.RetryPolicy{MaxRetries: 2, Backoff: jobstate.FixedBackoff(time.Second)}
	return spec
}

// normalJob is j as UnmarshalJSON gives it back: times in UTC, empty byte
// slices nil.
func normalJob(j jobstate.Job) jobstate.Job {
	for _, t := range []*time.Time{
		&j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.CompletedAt, &j.NotBefore, &j.Deadline,
		&j.LeaseExpiresAt, &j.HeartbeatAt, &j.WakeAt, &j.SweepRetryAt,
	} {
		*t = t.UTC()
	}
	if len(j.Payload) == 0 {
		j.Payload = nil
	}
	if len(j.Result) == 0 {
		j.Result = nil
	}
	return j
}
