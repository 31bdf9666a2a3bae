package jobstate

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Sentinel errors. Every error the engine returns wraps one of these, so
// callers branch with errors.Is; the richer types below add details for
// errors.As. An operation that returns an error has changed nothing: the
// stored job, its executions and its history are as they were. (The one
// write that may precede it is lazy expiry, which any access to an overdue
// job of a lazily expiring machine applies first; and an error matching
// ErrIncomplete says which part of the operation was written.)
var (
	// ErrNotFound: no job with that id.
	ErrNotFound = errors.New("jobstate: job not found")
	// ErrUnknownMachine: no registered Definition has that name.
	ErrUnknownMachine = errors.New("jobstate: unknown machine")
	// ErrInvalidDefinition: a Definition failed validation; the message lists
	// every problem found.
	ErrInvalidDefinition = errors.New("jobstate: invalid definition")
	// ErrInvalidTransition: the table has no rule for this event from the
	// job's current state.
	ErrInvalidTransition = errors.New("jobstate: invalid transition")
	// ErrTerminal: the job is in a terminal state; nothing may leave it.
	ErrTerminal = errors.New("jobstate: job is in a terminal state")
	// ErrGuardRefused: a rule exists but its guard refused. The guard's own
	// error is wrapped too, so errors.Is finds both.
	ErrGuardRefused = errors.New("jobstate: guard refused")
	// ErrVersionConflict: a write was based on a version that is no longer
	// current. Stores return it; the engine never lets it reach a caller
	// except when the caller supplied a stale expected version.
	ErrVersionConflict = errors.New("jobstate: version conflict")
	// ErrInvalidArgument: an argument is malformed (empty machine name,
	// negative duration, nil callback, ...).
	ErrInvalidArgument = errors.New("jobstate: invalid argument")
	// ErrDuplicateJob: a store was asked to insert a job whose id exists.
	ErrDuplicateJob = errors.New("jobstate: duplicate job id")
	// ErrUnavailable: the store could not be reached (a refused or lost
	// connection, a server shutting down or restarting). Every such error
	// is an *UnavailableError, which says whether the operation surely did
	// not happen (retry it) or may have happened (ErrOutcomeUnknown: read
	// the job to learn which).
	ErrUnavailable = errors.New("jobstate: store unavailable")
	// ErrOutcomeUnknown: matched together with ErrUnavailable when the
	// connection was lost after the operation reached the store, so that it
	// may have been applied (a COMMIT whose answer never came).
	ErrOutcomeUnknown = errors.New("jobstate: outcome unknown")
)

// UnavailableError reports that the store could not be reached during an
// operation. errors.Is(err, ErrUnavailable) holds for it, and
// errors.Is(err, ErrOutcomeUnknown) too when MayHaveApplied is set; the
// driver's own error is wrapped as well.
//
// What a caller does:
//   - MayHaveApplied false: nothing was written; the same operation may be
//     retried as it is once the store answers again.
//   - MayHaveApplied true: the write may or may not have been applied.
//     Read the job (Engine.Get, Engine.Executions) before retrying: a
//     commit that was applied shows its execution COMMITTED or DONE, a
//     creation under a key is found by creating again with the same key.
type UnavailableError struct {
	// Op names the store operation that could not complete ("update",
	// "claim", "create", ...).
	Op string
	// MayHaveApplied is set when the connection was lost after the request
	// was sent, so that the store may have applied it.
	MayHaveApplied bool
	// Err is the driver's error.
	Err error
}

// Error names the operation, whether it may have been applied, and the
// driver's error.
func (e *UnavailableError) Error() string {
	if e.MayHaveApplied {
		return fmt.Sprintf("jobstate: store unavailable during %s (it may have been applied): %v", e.Op, e.Err)
	}
	return fmt.Sprintf("jobstate: store unavailable during %s (nothing was applied): %v", e.Op, e.Err)
}

// Unwrap returns ErrUnavailable, ErrOutcomeUnknown when MayHaveApplied is
// set, and the driver's error.
func (e *UnavailableError) Unwrap() []error {
	errs := []error{ErrUnavailable}
	if e.MayHaveApplied {
		errs = append(errs, ErrOutcomeUnknown)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// TransitionError reports a refused move: which job, from which state, by
// which event, and why. errors.Is finds its sentinel (Err) and, for a guard
// refusal, the guard's own error (Cause).
type TransitionError struct {
	JobID   uuid.UUID
	Machine string
	From    State
	Event   Event
	// Err is the sentinel: ErrInvalidTransition, ErrTerminal or
	// ErrGuardRefused.
	Err error
	// Cause is the guard's error when Err is ErrGuardRefused, else nil.
	Cause error
}

// Error names the job, the event, the state and the reason.
func (e *TransitionError) Error() string {
	if e.Err == ErrInvalidTransition && e.Cause == nil && e.From != "" && e.Event != "" {
		return fmt.Sprintf("jobstate: %s job %s: invalid transition: machine %q has no %s rule from state %q", e.Machine, e.JobID, e.Machine, e.Event, e.From)
	}
	msg := fmt.Sprintf("jobstate: %s job %s: event %q from state %q: %v", e.Machine, e.JobID, e.Event, e.From, trimPrefix(e.Err))
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns the sentinel and, when set, the guard's error. A move
// refused because the job is terminal unwraps to ErrInvalidTransition as
// well as ErrTerminal, so that errors.Is(err, ErrInvalidTransition) holds
// for every move the table does not allow.
func (e *TransitionError) Unwrap() []error {
	errs := []error{e.Err}
	if e.Err == ErrTerminal {
		errs = append(errs, ErrInvalidTransition)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// DefinitionError lists every problem found while validating a Definition.
// errors.Is(err, ErrInvalidDefinition) holds for it.
type DefinitionError struct {
	Machine  string
	Problems []string
}

// Error lists the problems, one per line after the first.
func (e *DefinitionError) Error() string {
	msg := fmt.Sprintf("jobstate: invalid definition %q: %d problem(s)", e.Machine, len(e.Problems))
	for _, p := range e.Problems {
		msg += "\n  - " + p
	}
	return msg
}

// Unwrap returns ErrInvalidDefinition.
func (e *DefinitionError) Unwrap() error { return ErrInvalidDefinition }

func trimPrefix(err error) string {
	s := err.Error()
	const p = "jobstate: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// ErrorClass says how a failure is to be treated. Jobs record the class of
// their last failure (Job.ErrorClass).
type ErrorClass string

// The error classes.
const (
	// ClassNone: no failure recorded.
	ClassNone ErrorClass = ""
	// ClassRetryable: the failure may pass; retry while retries remain.
	ClassRetryable ErrorClass = "retryable"
	// ClassPermanent: retrying cannot help; the job fails at once.
	ClassPermanent ErrorClass = "permanent"
)

// CommitError reports a refused commit because another execution of the job
// committed first. errors.Is(err, ErrAlreadyCommitted) holds for it.
type CommitError struct {
	JobID uuid.UUID
	// ExecID is the execution that was refused.
	ExecID uuid.UUID
	// Winner is the execution that committed.
	Winner uuid.UUID
}

// Error names the job, the refused execution and the winner.
func (e *CommitError) Error() string {
	return fmt.Sprintf("jobstate: job %s: execution %s refused: execution %s already committed", e.JobID, e.ExecID, e.Winner)
}

// Unwrap returns ErrAlreadyCommitted.
func (e *CommitError) Unwrap() error { return ErrAlreadyCommitted }

// codes maps each sentinel to its stable code, most specific first.
var codes = []struct {
	err  error
	code string
}{
	{ErrIncomplete, "incomplete"},
	{ErrOutcomeUnknown, "outcome_unknown"},
	{ErrUnavailable, "unavailable"},
	{ErrCancelled, "cancelled"},
	{ErrLeaseLost, "lease_lost"},
	{ErrAlreadyCommitted, "already_committed"},
	{ErrEffectApplied, "effect_applied"},
	{ErrKeyConflict, "key_conflict"},
	{ErrUnknownEffect, "unknown_effect"},
	{ErrKeyLimit, "key_limit"},
	{ErrNotClaimable, "not_claimable"},
	{ErrGuardRefused, "guard_refused"},
	{ErrTerminal, "terminal"},
	{ErrInvalidTransition, "invalid_transition"},
	{ErrNoJob, "no_job"},
	{ErrNotFound, "not_found"},
	{ErrUnknownMachine, "unknown_machine"},
	{ErrInvalidDefinition, "invalid_definition"},
	{ErrVersionConflict, "version_conflict"},
	{ErrDuplicateJob, "duplicate_job"},
	{ErrUnsupported, "unsupported"},
	{ErrInvalidArgument, "invalid_argument"},
}

// Code returns the stable, language-neutral code of an error from this
// package ("invalid_transition", "lease_lost", "already_committed", ...),
// for APIs, logs and the conformance vectors; "" for nil and "unknown"
// for an error that wraps no sentinel of this package. Where an error
// wraps several sentinels the most specific wins (a lease lost to a
// cancel is "cancelled").
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "unknown"
}
