package machines

import (
	"time"

	"github.com/jobstate/jobstate"
)

// The work machine's states.
const (
	WQueued  jobstate.State = "queued"
	WRunning jobstate.State = "running"
	WDone    jobstate.State = "done"
	WFailed  jobstate.State = "failed"
)

// WorkOption changes one property of WorkSpec's machine.
type WorkOption func(*jobstate.Spec)

// WorkLease sets the machine's lease (Policy.LeaseTTL); d must be positive
// for the machine to validate.
func WorkLease(d time.Duration) WorkOption {
	return func(s *jobstate.Spec) { s.Policy.LeaseTTL = d }
}

// WorkRetries sets the machine's retry budget (Policy.Retry.MaxRetries):
// a count, or jobstate.Unlimited.
func WorkRetries(n int) WorkOption {
	return func(s *jobstate.Spec) { s.Policy.Retry.MaxRetries = n }
}

// WorkAbandoning adds the rule running → queued on abandon, so that a job
// whose lease is lost goes back to queued by abandon (which the
// specification prefers over retry for a lost lease) rather than by retry.
func WorkAbandoning() WorkOption {
	return func(s *jobstate.Spec) {
		rules := make([]jobstate.Rule, 0, len(s.Rules)+1)
		for _, r := range s.Rules {
			rules = append(rules, r)
			if r.Event == jobstate.EventRetry {
				rules = append(rules, jobstate.Rule{From: []jobstate.State{WRunning}, Event: jobstate.EventAbandon, To: WQueued})
			}
		}
		s.Rules = rules
	}
}

// WorkSpec is the work machine, named name: queued → running → done, a
// retry from running back to queued, a failure from running to failed.
// Unless options say otherwise its lease is a minute, it allows three
// retries with no backoff, and it has no abandon rule. It has no guards,
// effects or classifier. The options apply in order.
func WorkSpec(name string, opts ...WorkOption) jobstate.Spec {
	s := jobstate.Spec{
		Name:    name,
		Initial: WQueued,
		States: []jobstate.StateSpec{
			{Name: WQueued, Kind: jobstate.KindReady},
			{Name: WRunning, Kind: jobstate.KindActive},
			{Name: WDone, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: WFailed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{WQueued}, Event: jobstate.EventClaim, To: WRunning},
			{From: []jobstate.State{WRunning}, Event: jobstate.EventSucceed, To: WDone},
			{From: []jobstate.State{WRunning}, Event: jobstate.EventRetry, To: WQueued},
			{From: []jobstate.State{WRunning}, Event: jobstate.EventFail, To: WFailed},
		},
		Policy: jobstate.Policy{LeaseTTL: time.Minute, Retry: jobstate.RetryPolicy{MaxRetries: 3}},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}
