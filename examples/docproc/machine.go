package main

import (
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/docproc"
)

// The states of document processing (the literal definition,
// internal/machines/docproc).
const (
	Created   = docproc.Created
	Queued    = docproc.Queued
	Running   = docproc.Running
	Succeeded = docproc.Succeeded
	Failed    = docproc.Failed
	Retrying  = docproc.Retrying
)

// The events a caller fires by name. The others are the engine's lifecycle
// events: claim (processing begins), succeed, retry, fail, requeue (retry
// delay elapsed), and cancel (the out-of-band cancellation, fired by
// Engine.Cancel).
const (
	// EventSubmit is the job submission, CREATED → QUEUED.
	EventSubmit = docproc.Submit
	// EventResourceExhaustion is QUEUED → FAILED for resource exhaustion,
	// which the lifecycle allows from QUEUED only.
	EventResourceExhaustion = docproc.ResourceExhaustion
)

// The example's settings.
const (
	// Machine is the name the definition is registered under.
	Machine = docproc.Name
	// MaxRetries is the lifecycle's maxRetries: always 3.
	MaxRetries = docproc.MaxRetries
	// RetryDelay is the lifecycle's fixed backoff.
	RetryDelay = docproc.RetryDelay
	// LeaseTTL is how long a worker may hold a job without a heartbeat.
	LeaseTTL = docproc.LeaseTTL
	// WorkTime is how long one processing attempt takes in the
	// demonstration.
	WorkTime = 250 * time.Millisecond
	// IdleWait is how long an idle worker waits before looking again.
	IdleWait = 250 * time.Millisecond
)

// Retryable failures (document processing, "Retryable Failures"): they may
// succeed on retry.
var (
	// ErrTransient: a transient system error (temporary resource
	// unavailable).
	ErrTransient = docproc.ErrTransient
	// ErrResourceUnavailable is the transient error of the third example
	// trace.
	ErrResourceUnavailable = docproc.ErrResourceUnavailable
	// ErrTimeout: a timeout or deadline exceeded (context.DeadlineExceeded
	// is one too).
	ErrTimeout = docproc.ErrTimeout
	// ErrQueueOverload: the queue is overloaded.
	ErrQueueOverload = docproc.ErrQueueOverload
	// ErrDependencyUnavailable: a temporary external dependency is
	// unavailable.
	ErrDependencyUnavailable = docproc.ErrDependencyUnavailable
)

// Non-retryable failures (document processing, "Non-Retryable Failures"):
// retrying cannot help; the job fails at once.
var (
	// ErrInvalidDocument: invalid input document.
	ErrInvalidDocument = docproc.ErrInvalidDocument
	// ErrCorruptDocument and ErrUnsupportedFormat are the two invalid
	// documents the lifecycle names; the second is the error of the fourth
	// example trace.
	ErrCorruptDocument   = docproc.ErrCorruptDocument
	ErrUnsupportedFormat = docproc.ErrUnsupportedFormat
	// ErrValidation: job validation failure.
	ErrValidation = docproc.ErrValidation
	// ErrProcessingTimeout: a processing timeout that is permanent, not
	// transient (unlike ErrTimeout).
	ErrProcessingTimeout = docproc.ErrProcessingTimeout
	// ErrConfiguration: a configuration error.
	ErrConfiguration = docproc.ErrConfiguration
	// ErrResourceLimit: a resource limit exceeded.
	ErrResourceLimit = docproc.ErrResourceLimit
	// ErrQuotaExceeded, ErrFileTooLarge and ErrTooComplex are the three
	// resource limits the lifecycle names.
	ErrQuotaExceeded = docproc.ErrQuotaExceeded
	ErrFileTooLarge  = docproc.ErrFileTooLarge
	ErrTooComplex    = docproc.ErrTooComplex
)

// RetryableErrors and NonRetryableErrors are the lifecycle's two lists, as
// the classifier reads them.
var (
	RetryableErrors    = docproc.RetryableErrors
	NonRetryableErrors = docproc.NonRetryableErrors
)

// Classify is the machine's error classifier (Policy.Classify,
// docproc.Classify): the lifecycle's non-retryable failures are permanent,
// its retryable ones retryable. Any other error is left to the library's
// default, retryable. A worker may also mark an error itself with
// jobstate.Permanent or jobstate.Retryable, which wins over the classifier.
func Classify(err error) (jobstate.ErrorClass, time.Duration) { return docproc.Classify(err) }

// NewDefinition returns the document processing machine, the literal
// definition of internal/machines/docproc: its states, its seven valid
// transitions, cancellation from every non-terminal state (every other
// move is refused), its retry policy and its classifier.
func NewDefinition() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(docproc.Spec(docproc.Plain()))
}
