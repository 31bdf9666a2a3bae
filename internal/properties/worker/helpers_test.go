// Property tests of package worker (periodic schedules, the runtime's
// outcomes) drawn with pgregory.net/rapid, in a module that is never
// released so that rapid never reaches the library's users. The test
// machine below is that of the worker package's tests.
package worker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/require"
)

// The test machine: QUEUED → RUNNING (→ FETCHING) → DONE, retries back to
// QUEUED after a 1 s backoff, three retries, cancellable everywhere, and a
// "reject" out of the active states.
const (
	queued    jobstate.State = "QUEUED"
	running   jobstate.State = "RUNNING"
	fetching  jobstate.State = "FETCHING"
	done      jobstate.State = "DONE"
	failed    jobstate.State = "FAILED"
	cancelled jobstate.State = "CANCELLED"
	rejected  jobstate.State = "REJECTED"
)

var errBadInput = errors.New("bad input")

func taskSpec(name string) jobstate.Spec {
	from := func(s ...jobstate.State) []jobstate.State { return s }
	return jobstate.Spec{
		Name: name,
		States: []jobstate.StateSpec{
			{Name: queued, Kind: jobstate.KindReady},
			{Name: running, Kind: jobstate.KindActive},
			{Name: fetching, Kind: jobstate.KindActive},
			{Name: done, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: cancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: rejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
		},
		Initial: queued,
		Rules: []jobstate.Rule{
			{From: from(queued), Event: jobstate.EventClaim, To: running},
			{From: from(running), Event: "fetch", To: fetching},
			{From: from(running), Event: "reject", To: rejected},
			{From: from(running, fetching), Event: jobstate.EventSucceed, To: done},
			{From: from(running, fetching), Event: jobstate.EventRetry, To: queued},
			{From: from(running, fetching), Event: jobstate.EventFail, To: failed},
			{From: from(queued, running, fetching), Event: jobstate.EventCancel, To: cancelled},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
			Classify: func(err error) (jobstate.ErrorClass, time.Duration) {
				if errors.Is(err, errBadInput) {
					return jobstate.ClassPermanent, 0
				}
				return jobstate.ClassNone, 0
			},
		},
	}
}

func taskMachine(t testing.TB, name string) *jobstate.Definition {
	t.Helper()
	def, err := jobstate.NewDefinition(taskSpec(name))
	require.NoError(t, err)
	return def
}
