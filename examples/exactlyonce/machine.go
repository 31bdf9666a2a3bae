package main

import (
	"time"

	"github.com/jobstate/jobstate"
)

// The job states of the exactly-once lifecycle. They are a projection of the executions:
// the table below moves a job only when one of its executions moves.
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

// MachineName is the name jobs of this example record.
const MachineName = "payouts"

// LeaseTTL is how long a lease lives without a heartbeat: the execution's
// lease_expires_at is its claim (or last heartbeat) plus LeaseTTL.
const LeaseTTL = 10 * time.Second

// MaxRetries bounds how often a job goes back to PENDING after an aborted
// execution (a lost lease or a worker's retryable error): a job whose
// executions keep aborting ends FAILED after MaxRetries+1 executions. The
// lifecycle leaves the number open; this example picks 3.
const MaxRetries = 3

// Spec declares the exactly-once job machine as a table. Every rule is a
// lifecycle rule, fired by the engine when an execution moves, and
// Policy.DerivedState makes the engine refuse any other move of the job
// (Engine.Fire gives ErrInvalidArgument). Policy.RequireStart holds the
// executions to the lifecycle's own table: an execution commits only from
// IN_PROGRESS, so a LEASED one must be started (Engine.Start) first.
// The job's rules:
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
		Name: MachineName,
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

// Machine returns the validated Definition of Spec.
func Machine() (*jobstate.Definition, error) { return jobstate.NewDefinition(Spec()) }
