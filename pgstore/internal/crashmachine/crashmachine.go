// Package crashmachine is the machine of pgstore's crash tests, shared by
// the test and its worker processes.
package crashmachine

import (
	"time"

	"github.com/jobstate/jobstate"
)

// Name is the machine's name.
const Name = "crash"

// Spec is queued → running → done, retried without limit, with a short
// lease so that the jobs of killed workers come back soon.
func Spec() jobstate.Spec {
	return jobstate.Spec{
		Name:    Name,
		Initial: "queued",
		States: []jobstate.StateSpec{
			{Name: "queued", Kind: jobstate.KindReady},
			{Name: "running", Kind: jobstate.KindActive},
			{Name: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"queued"}, Event: jobstate.EventClaim, To: "running"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventSucceed, To: "done"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventRetry, To: "queued"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventAbandon, To: "queued"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventFail, To: "failed"},
		},
		Policy: jobstate.Policy{LeaseTTL: time.Second, Retry: jobstate.RetryPolicy{MaxRetries: jobstate.Unlimited}},
	}
}

// RuntimeName is the name of RuntimeSpec's machine.
const RuntimeName = "crash_runtime"

// RuntimeSpec is Spec with a lease of a minute, for the crash test of the
// worker runtime: a job held by a killed worker comes back only when the
// worker, restarted under its name, recovers its leases at start, and a
// job held by a stopped worker only when the worker gives it back, not
// by its lease lapsing during the test.
func RuntimeSpec() jobstate.Spec {
	s := Spec()
	s.Name = RuntimeName
	s.Policy.LeaseTTL = time.Minute
	return s
}
