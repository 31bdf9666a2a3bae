package main

import (
	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
)

// The job states of the exactly-once lifecycle (the literal definition,
// internal/machines/exactlyonce). The table moves a job only when one of
// its executions moves.
const (
	// Pending: created, not yet leased.
	Pending = exactlyonce.Pending
	// Running: leased by some execution.
	Running = exactlyonce.Running
	// Succeeded: completed successfully (an execution reached DONE after
	// COMMITTED).
	Succeeded = exactlyonce.Succeeded
	// Failed: terminal failure.
	Failed = exactlyonce.Failed
)

// MachineName is the name jobs of this example record.
const MachineName = exactlyonce.Name

// LeaseTTL is how long a lease lives without a heartbeat: the execution's
// lease_expires_at is its claim (or last heartbeat) plus LeaseTTL.
const LeaseTTL = exactlyonce.LeaseTTL

// MaxRetries bounds how often a job goes back to PENDING after an aborted
// execution (a lost lease or a worker's retryable error): a job whose
// executions keep aborting ends FAILED after MaxRetries+1 executions. The
// lifecycle leaves the number open; the definition picks 3.
const MaxRetries = exactlyonce.MaxRetries

// Spec returns the exactly-once job machine, the literal definition of
// internal/machines/exactlyonce. Every rule is a lifecycle rule, fired by
// the engine when an execution moves, and Policy.DerivedState makes the
// engine refuse any other move of the job (Engine.Fire gives
// ErrInvalidArgument). Policy.RequireStart holds the executions to the
// lifecycle's own table: an execution commits only from IN_PROGRESS, so a
// LEASED one must be started (Engine.Start) first. The job's rules:
//
//   - claim (PENDING → RUNNING): an execution is LEASED;
//   - succeed (RUNNING → SUCCEEDED): the execution that COMMITTED reaches
//     DONE (Engine.Finish, or the sweep after a crash past the commit);
//   - abandon (RUNNING → PENDING): the lease expired and no execution is
//     COMMITTED (Engine.Sweep aborts the execution);
//   - retry (RUNNING → PENDING): the worker aborted its execution with a
//     retryable error before committing (Engine.Fail);
//   - fail (RUNNING → FAILED): a permanent error, or retries spent.
func Spec() jobstate.Spec { return exactlyonce.Spec() }

// Machine returns the validated Definition of Spec.
func Machine() (*jobstate.Definition, error) { return jobstate.NewDefinition(Spec()) }
