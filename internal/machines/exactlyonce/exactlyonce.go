// Package exactlyonce is the literal definition of the exactly-once
// execution model: a job is PENDING until an execution is LEASED, RUNNING
// while one is, SUCCEEDED once an execution reaches DONE after COMMITTED,
// and back to PENDING when its lease expires with nothing COMMITTED. An
// execution goes LEASED → IN_PROGRESS → COMMITTED → DONE, or to ABORTED
// before its commit; at most one execution of a job commits.
//
// The job's moves are all lifecycle rules, fired by the engine when an
// execution moves (Policy.DerivedState refuses every other move), and an
// execution commits only from IN_PROGRESS (Policy.RequireStart). Which
// execution is live, committed or done is read from the executions; whether
// a job that is neither running nor succeeded waits for its next execution
// (PENDING) or has failed (FAILED) is decided by the retry policy when an
// execution aborts, and stored with the job (see jobstate.CheckProjection).
//
// The example program examples/exactlyonce, the library's tests, the store
// suite and the conformance vectors run this definition.
package exactlyonce

import (
	"time"

	"github.com/jobstate/jobstate"
)

// Name is the machine's name.
const Name = "exactlyonce"

// The job states.
const (
	// Pending: created, not yet leased.
	Pending jobstate.State = "PENDING"
	// Running: leased by some execution.
	Running jobstate.State = "RUNNING"
	// Succeeded: completed successfully (an execution reached DONE after
	// COMMITTED).
	Succeeded jobstate.State = "SUCCEEDED"
	// Failed: terminal failure.
	Failed jobstate.State = "FAILED"
)

// LeaseTTL is how long a lease lives without a heartbeat: an execution's
// lease_expires_at is its claim (or last heartbeat) plus LeaseTTL.
const LeaseTTL = 10 * time.Second

// MaxRetries bounds how often a job goes back to PENDING after an aborted
// execution (a lost lease or a worker's retryable error): a job whose
// executions keep aborting ends FAILED after MaxRetries+1 executions. The
// lifecycle leaves the number open; this definition picks 3.
const MaxRetries = 3

// Spec returns the exactly-once job machine. Its rules:
//
//   - claim (PENDING → RUNNING): an execution is LEASED;
//   - succeed (RUNNING → SUCCEEDED): the execution that COMMITTED reaches
//     DONE (Engine.Finish, or the sweep after a crash past the commit);
//   - abandon (RUNNING → PENDING): the lease expired and no execution is
//     COMMITTED (Engine.Sweep aborts the execution);
//   - retry (RUNNING → PENDING): the worker aborted its execution with a
//     retryable error before committing (Engine.Fail);
//   - fail (RUNNING → FAILED): a permanent error, or retries spent.
func Spec() jobstate.Spec {
	return jobstate.Spec{
		Name: Name,
		States: []jobstate.StateSpec{
			{Name: Pending, Kind: jobstate.KindReady, Description: "created, not yet leased"},
			{Name: Running, Kind: jobstate.KindActive, Description: "leased by some execution"},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "completed successfully"},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed, Description: "terminal failure"},
		},
		Initial: Pending,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Pending}, Event: jobstate.EventClaim, To: Running,
				Description: "an execution is LEASED"},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded,
				Description: "an execution reaches DONE after COMMITTED"},
			{From: []jobstate.State{Running}, Event: jobstate.EventAbandon, To: Pending,
				Description: "the lease expired and no execution is COMMITTED"},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Pending,
				Description: "the execution was ABORTED by a retryable error before its commit"},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed,
				Description: "a permanent error, or retries spent"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:     LeaseTTL,
			DerivedState: true,
			RequireStart: true,
			Retry:        jobstate.RetryPolicy{MaxRetries: MaxRetries},
		},
	}
}
