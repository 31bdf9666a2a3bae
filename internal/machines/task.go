package machines

import (
	"errors"
	"time"

	"github.com/jobstate/jobstate"
)

// The task machine's states.
const (
	TaskQueued    jobstate.State = "QUEUED"
	TaskRunning   jobstate.State = "RUNNING"
	TaskFetching  jobstate.State = "FETCHING"
	TaskDone      jobstate.State = "DONE"
	TaskFailed    jobstate.State = "FAILED"
	TaskCancelled jobstate.State = "CANCELLED"
	TaskRejected  jobstate.State = "REJECTED"
)

// ErrTaskBadInput is the error the task machine classifies as permanent.
var ErrTaskBadInput = errors.New("bad input")

// TaskSpec returns the task machine named name, on which the worker
// runtime's tests run: QUEUED → RUNNING (→ FETCHING) → DONE, retried back
// to QUEUED after a 1 s backoff up to three times, then FAILED;
// cancellable in every live state; "reject" out of RUNNING to REJECTED.
// Its lease is 30 s; ErrTaskBadInput fails a job permanently.
func TaskSpec(name string) jobstate.Spec {
	from := func(s ...jobstate.State) []jobstate.State { return s }
	return jobstate.Spec{
		Name: name,
		States: []jobstate.StateSpec{
			{Name: TaskQueued, Kind: jobstate.KindReady},
			{Name: TaskRunning, Kind: jobstate.KindActive},
			{Name: TaskFetching, Kind: jobstate.KindActive},
			{Name: TaskDone, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: TaskFailed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: TaskCancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: TaskRejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
		},
		Initial: TaskQueued,
		Rules: []jobstate.Rule{
			{From: from(TaskQueued), Event: jobstate.EventClaim, To: TaskRunning},
			{From: from(TaskRunning), Event: "fetch", To: TaskFetching},
			{From: from(TaskRunning), Event: "reject", To: TaskRejected},
			{From: from(TaskRunning, TaskFetching), Event: jobstate.EventSucceed, To: TaskDone},
			{From: from(TaskRunning, TaskFetching), Event: jobstate.EventRetry, To: TaskQueued},
			{From: from(TaskRunning, TaskFetching), Event: jobstate.EventFail, To: TaskFailed},
			{From: from(TaskQueued, TaskRunning, TaskFetching), Event: jobstate.EventCancel, To: TaskCancelled},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
			Classify: func(err error) (jobstate.ErrorClass, time.Duration) {
				if errors.Is(err, ErrTaskBadInput) {
					return jobstate.ClassPermanent, 0
				}
				return jobstate.ClassNone, 0
			},
		},
	}
}
