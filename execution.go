package jobstate

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ExecStatus is the status of one execution (one attempt to run a job).
// An execution moves LEASED → IN_PROGRESS → COMMITTED → DONE, or to ABORTED
// from LEASED or IN_PROGRESS; DONE and ABORTED are final.
type ExecStatus string

// The execution statuses.
const (
	// ExecLeased: a worker holds the lease until LeaseExpiresAt.
	ExecLeased ExecStatus = "LEASED"
	// ExecInProgress: the worker has started the work.
	ExecInProgress ExecStatus = "IN_PROGRESS"
	// ExecCommitted: the effect was applied; at most one execution per job
	// ever reaches this status.
	ExecCommitted ExecStatus = "COMMITTED"
	// ExecDone: the execution finished after its commit.
	ExecDone ExecStatus = "DONE"
	// ExecAborted: the lease expired, the worker failed or crashed, or the
	// job moved on, before a commit.
	ExecAborted ExecStatus = "ABORTED"
)

// Live reports whether an execution in this status holds its lease:
// LEASED, IN_PROGRESS or COMMITTED.
func (s ExecStatus) Live() bool {
	return s == ExecLeased || s == ExecInProgress || s == ExecCommitted
}

// Final reports whether the status is DONE or ABORTED.
func (s ExecStatus) Final() bool { return s == ExecDone || s == ExecAborted }

// Execution is the durable record of one attempt to run a job.
type Execution struct {
	ID    uuid.UUID
	JobID uuid.UUID
	// Attempt is the job's attempt number at claim time. It is also the
	// lease's fencing token: strictly increasing per job, never reused.
	Attempt int
	// Owner is the worker holding (or that held) the lease.
	Owner  string
	Status ExecStatus
	// LeaseExpiresAt is when the lease lapses unless a heartbeat extends it;
	// HeartbeatAt is the last claim or heartbeat.
	LeaseExpiresAt time.Time
	HeartbeatAt    time.Time
	// ClaimedAt is when the lease was granted; StartedAt when the worker
	// started work (zero until then); FinishedAt when the execution became
	// DONE or ABORTED.
	ClaimedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Error says why an ABORTED execution ended (lease expired, the
	// worker's error, lost to another execution, job cancelled).
	Error string
}

// CheckProjection reports whether job's state is the projection of its
// executions, as a machine with Policy.DerivedState requires (invariant 7
// of the specification). It returns nil or an error saying which clause
// fails:
//
//   - at most one execution is DONE, and a DONE execution ⇔ the job
//     succeeded through that execution (outcome succeeded, Committed that
//     execution), with no execution still live;
//   - otherwise a live execution ⇔ the job is in an active state;
//   - otherwise the job is neither active nor succeeded;
//   - and always, RetryCount is at most the number of ABORTED executions:
//     every retried failure ended one execution.
//
// What the executions decide is whether the job is active, whether it
// succeeded, and through which execution. They do not decide which of its
// other states a job is in, and CheckProjection cannot tell them apart: in
// the exactly-once lifecycle, PENDING (waiting for its next execution) from
// FAILED. An ABORTED execution records when it ended and a text, not
// whether the retry policy retried its failure, which depended on the
// error's class and on the job's retry count at the time. A job whose one
// execution aborted is PENDING if the failure was retried or the execution
// snoozed, and FAILED if the failure was permanent or no retry was left:
// the same executions, and, after a snooze or a permanent failure, the same
// RetryCount (0). That decision is made once, at the failure, and stored
// with the job (State, RetryCount, ErrorClass, LastError); CheckProjection
// checks the stored state against the executions by the clauses above.
func CheckProjection(job Job, execs []Execution) error {
	var done *Execution
	live, aborted := 0, 0
	for i := range execs {
		switch {
		case execs[i].Status == ExecAborted:
			aborted++
		case execs[i].Status == ExecDone:
			if done != nil {
				return fmt.Errorf("job %s: executions %s and %s are both DONE", job.ID, done.ID, execs[i].ID)
			}
			done = &execs[i]
		case execs[i].Status.Live():
			live++
		}
	}
	switch {
	case done != nil:
		if job.Outcome != OutcomeSucceeded || job.Committed != done.ID {
			return fmt.Errorf("job %s: execution %s is DONE but the job is %q (committed %s)", job.ID, done.ID, job.State, job.Committed)
		}
		if live > 0 {
			return fmt.Errorf("job %s: succeeded with %d execution(s) still live", job.ID, live)
		}
	case live > 0:
		if job.Kind != KindActive {
			return fmt.Errorf("job %s: %d live execution(s) but the job is in %s state %q", job.ID, live, job.Kind, job.State)
		}
	default:
		if job.Kind == KindActive || job.Outcome == OutcomeSucceeded {
			return fmt.Errorf("job %s: no live or done execution but the job is in %s state %q", job.ID, job.Kind, job.State)
		}
	}
	if job.RetryCount > aborted {
		return fmt.Errorf("job %s: %d retried failures but %d aborted execution(s)", job.ID, job.RetryCount, aborted)
	}
	return nil
}
