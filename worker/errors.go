package worker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// ErrRunning is returned by Run and Drain while the worker is already
// running (Run and Drain exclude each other).
var ErrRunning = errors.New("worker: already running")

// ErrStopped is returned by Run when the worker has already run, or was
// stopped before it started: a Worker runs once.
var ErrStopped = errors.New("worker: stopped")

// ErrDrainLimit is returned by Drain when it stopped claiming because it
// had run as many jobs as its limit allowed. Jobs may remain due.
var ErrDrainLimit = errors.New("worker: drain limit reached")

// ErrShutdown is the sentinel every *ShutdownError matches: the handler's
// context was cancelled because the worker is stopping.
var ErrShutdown = errors.New("worker: shutting down")

// ConfigError lists every problem found in a worker's configuration by New.
// errors.Is(err, jobstate.ErrInvalidArgument) holds for it.
type ConfigError struct {
	Problems []string
}

// Error lists the problems, one per line after the first.
func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker: invalid configuration: %d problem(s)", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// Unwrap returns jobstate.ErrInvalidArgument.
func (e *ConfigError) Unwrap() error { return jobstate.ErrInvalidArgument }

// LeaseLostError is the cause (context.Cause) of a handler's context
// cancelled because the worker found its lease lost: a heartbeat or an
// Advance was refused (expired lease, execution aborted by a sweep or a
// RecoverWorker, another execution committed), or the lease expired on
// the engine's clock while the store could not be reached. Err is the
// engine's error, so errors.Is(cause, jobstate.ErrLeaseLost) (or
// jobstate.ErrAlreadyCommitted) holds.
type LeaseLostError struct {
	Lease jobstate.Lease
	Err   error
}

// Error names the job and the engine's reason.
func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("worker: job %s: lease lost: %v", e.Lease.JobID, e.Err)
}

// Unwrap returns the engine's error.
func (e *LeaseLostError) Unwrap() error { return e.Err }

// JobCancelledError is the cause of a handler's context cancelled because
// the job was cancelled (Engine.Cancel, or a cancel fired through a rule)
// while the handler held its lease. errors.Is(cause, jobstate.ErrCancelled)
// holds.
type JobCancelledError struct {
	JobID uuid.UUID
	Err   error
}

// Error names the job.
func (e *JobCancelledError) Error() string {
	return fmt.Sprintf("worker: job %s cancelled: %v", e.JobID, e.Err)
}

// Unwrap returns the engine's error.
func (e *JobCancelledError) Unwrap() error { return e.Err }

// ShutdownError is the cause of a handler's context cancelled because the
// worker is stopping: its grace period ended (Hard false) or it was told
// to stop at once (Hard true). The lease has been given back by then.
// errors.Is(cause, ErrShutdown) holds.
type ShutdownError struct {
	// Grace is the grace period the handler was given.
	Grace time.Duration
	// Hard is set for a hard stop (a second stop signal).
	Hard bool
}

// Error says why the handler was stopped.
func (e *ShutdownError) Error() string {
	if e.Hard {
		return "worker: shutting down: hard stop"
	}
	return fmt.Sprintf("worker: shutting down: grace period of %s ended", e.Grace)
}

// Is reports whether target is ErrShutdown.
func (e *ShutdownError) Is(target error) bool { return target == ErrShutdown }

// TimeoutError is the cause of a handler's context cancelled because the
// handler ran longer than its machine's timeout (see Timeout). An
// execution stopped this way fails with this error, retryable unless the
// machine's classifier says otherwise.
type TimeoutError struct {
	JobID   uuid.UUID
	Timeout time.Duration
}

// Error names the job and the timeout.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("worker: job %s: handler timed out after %s", e.JobID, e.Timeout)
}

// PanicError is the error an execution fails with when its handler
// panicked: the panic value and the goroutine's stack, both recorded in
// the job's LastError. It is classified like any other error (the
// machine's classifier may look for it with errors.As; unclassified, it
// is retryable).
type PanicError struct {
	Value any
	Stack []byte
}

// Error gives the panic value, then the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("worker: handler panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error, so that errors.Is
// and errors.As see it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// SnoozeError is what Snooze returns: a handler returning it gives the job
// back to run again after Delay without counting a failure
// (Engine.Snooze).
type SnoozeError struct {
	Delay time.Duration
}

// Error gives the delay.
func (e *SnoozeError) Error() string { return "worker: snoozed for " + e.Delay.String() }

// Snooze returns the error a handler returns to give its job back to be
// run again after d, without counting a failure: the runtime calls
// Engine.Snooze (the machine's retry rule, else its abandon rule, with
// NotBefore = now + d). A negative d counts as zero.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &SnoozeError{Delay: d}
}
