// Package tickmachine is the machine and the schedule of pgstore's test
// of periodic jobs across processes (TestPeriodicThreeProcesses), shared
// by the test and its worker program, pgstore/internal/periodicworker.
package tickmachine

import (
	"time"

	"github.com/jobstate/jobstate"
)

// Name is the machine's name.
const Name = "tick"

// Schedule is the name the worker processes register their periodic
// schedule under: the jobs' idempotency keys are
// worker.PeriodKey(Schedule, start).
const Schedule = "tick"

// Spec is queued → running → done, retried without limit, holding its
// idempotency keys for the job's life (so that a period has one job
// however many processes create it). Its lease outlasts the test's
// waits: a job held by a killed process comes back when the process,
// restarted under its name, recovers its leases at start.
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
		Policy: jobstate.Policy{LeaseTTL: time.Minute, Retry: jobstate.RetryPolicy{MaxRetries: jobstate.Unlimited}},
	}
}
