// Package docproc is the literal definition of the document processing
// lifecycle: a job is CREATED, submitted to the QUEUED state, RUNNING while
// processed, and ends SUCCEEDED or FAILED. A retryable error while retries
// remain (retryCount < maxRetries = 3) sends it to RETRYING, back to QUEUED
// after a fixed one-second delay; a non-retryable error, or a retryable one
// with retries spent, fails it. QUEUED may also fail on resource
// exhaustion. Cancellation is out of band and ends in FAILED. Every other
// move is invalid, and SUCCEEDED and FAILED are final.
//
// The example program examples/docproc, the quickstart, the library's
// tests, the store suite, the benchmarks and the conformance vectors run
// this definition.
package docproc

import (
	"context"
	"errors"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// Name is the machine's name.
const Name = "docproc"

// The states.
const (
	Created   jobstate.State = "CREATED"
	Queued    jobstate.State = "QUEUED"
	Running   jobstate.State = "RUNNING"
	Succeeded jobstate.State = "SUCCEEDED"
	Failed    jobstate.State = "FAILED"
	Retrying  jobstate.State = "RETRYING"
)

// The events a caller fires by name. The others are the engine's lifecycle
// events: claim (processing begins), succeed, retry, fail, requeue (retry
// delay elapsed), and cancel (the out-of-band cancellation,
// Engine.Cancel).
const (
	// Submit is the job submission, CREATED → QUEUED.
	Submit jobstate.Event = "submit"
	// ResourceExhaustion is QUEUED → FAILED for resource exhaustion, which
	// the lifecycle allows from QUEUED only.
	ResourceExhaustion jobstate.Event = "resource_exhaustion"
)

const (
	// MaxRetries is the lifecycle's maxRetries: always 3.
	MaxRetries = 3
	// RetryDelay is the lifecycle's fixed backoff.
	RetryDelay = time.Second
	// LeaseTTL is how long a worker may hold a job without a heartbeat.
	LeaseTTL = 30 * time.Second
)

// kindError is an error with a message of its own that belongs to a wider
// kind: errors.Is finds the kind.
type kindError struct {
	msg  string
	kind error
}

// Error returns the error's own message.
func (e *kindError) Error() string { return e.msg }

// Unwrap returns the kind.
func (e *kindError) Unwrap() error { return e.kind }

// Retryable failures ("Retryable Failures"): they may succeed on retry.
var (
	// ErrTransient: a transient system error (temporary resource
	// unavailable).
	ErrTransient = errors.New("transient system error")
	// ErrResourceUnavailable is the transient error of the third example
	// trace.
	ErrResourceUnavailable error = &kindError{"temporary unavailable", ErrTransient}
	// ErrTimeout: a timeout or deadline exceeded (context.DeadlineExceeded
	// is one too).
	ErrTimeout = errors.New("timeout")
	// ErrQueueOverload: the queue is overloaded.
	ErrQueueOverload = errors.New("queue overload")
	// ErrDependencyUnavailable: a temporary external dependency is
	// unavailable.
	ErrDependencyUnavailable = errors.New("external dependency temporarily unavailable")
)

// Non-retryable failures ("Non-Retryable Failures"): retrying cannot help;
// the job fails at once.
var (
	// ErrInvalidDocument: invalid input document.
	ErrInvalidDocument = errors.New("invalid input document")
	// ErrCorruptDocument and ErrUnsupportedFormat are the two invalid
	// documents the lifecycle names; the second is the error of the fourth
	// example trace.
	ErrCorruptDocument   error = &kindError{"corrupted document", ErrInvalidDocument}
	ErrUnsupportedFormat error = &kindError{"invalid document format", ErrInvalidDocument}
	// ErrValidation: job validation failure.
	ErrValidation = errors.New("job validation failure")
	// ErrProcessingTimeout: a processing timeout that is permanent, not
	// transient (unlike ErrTimeout).
	ErrProcessingTimeout = errors.New("processing timeout (permanent)")
	// ErrConfiguration: a configuration error.
	ErrConfiguration = errors.New("configuration error")
	// ErrResourceLimit: a resource limit exceeded.
	ErrResourceLimit = errors.New("resource limit exceeded")
	// ErrQuotaExceeded, ErrFileTooLarge and ErrTooComplex are the three
	// resource limits the lifecycle names.
	ErrQuotaExceeded error = &kindError{"quota exceeded", ErrResourceLimit}
	ErrFileTooLarge  error = &kindError{"file size limit exceeded", ErrResourceLimit}
	ErrTooComplex    error = &kindError{"complexity limit exceeded", ErrResourceLimit}
)

// RetryableErrors and NonRetryableErrors are the lifecycle's two lists, as
// Classify reads them.
var (
	RetryableErrors    = []error{ErrTransient, ErrTimeout, context.DeadlineExceeded, ErrQueueOverload, ErrDependencyUnavailable}
	NonRetryableErrors = []error{ErrInvalidDocument, ErrValidation, ErrProcessingTimeout, ErrConfiguration, ErrResourceLimit}
)

// Classify is the lifecycle's error taxonomy as a classifier: its
// non-retryable failures are permanent, its retryable ones retryable. Any
// other error is left to the library's default, retryable. A worker may
// also mark an error itself with jobstate.Permanent or jobstate.Retryable,
// which wins over the classifier.
func Classify(err error) (jobstate.ErrorClass, time.Duration) {
	for _, e := range NonRetryableErrors {
		if errors.Is(err, e) {
			return jobstate.ClassPermanent, 0
		}
	}
	for _, e := range RetryableErrors {
		if errors.Is(err, e) {
			return jobstate.ClassRetryable, 0
		}
	}
	return jobstate.ClassNone, 0
}

// Hooks are the functions the definition leaves to the program that runs
// it. Every one is required.
type Hooks struct {
	// Classify sorts errors into retryable and non-retryable.
	Classify hook.Classifier
}

// Plain returns the lifecycle's own hooks, which need no application:
// Classify.
func Plain() Hooks {
	return Hooks{Classify: hook.Classifier{Name: "Classify", Func: Classify}}
}

// Spec returns the document processing machine with h bound: its states,
// its seven valid transitions, cancellation from every non-terminal state
// (every other move is refused), and its retry policy.
func Spec(h Hooks) jobstate.Spec {
	return jobstate.Spec{
		Name: Name,
		States: []jobstate.StateSpec{
			{Name: Created, Kind: jobstate.KindInitial, Description: "created, not yet submitted to the queue"},
			{Name: Queued, Kind: jobstate.KindReady, Description: "waiting in the processing queue"},
			{Name: Running, Kind: jobstate.KindActive, Description: "actively being processed"},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "completed successfully"},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed, Description: "failed permanently"},
			{Name: Retrying, Kind: jobstate.KindWaiting, Description: "scheduled for retry after a transient failure"},
		},
		Initial: Created,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Created}, Event: Submit, To: Queued, Description: "job submission"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running, Description: "processing begins"},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded, Description: "processing completed successfully"},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed, Description: "unrecoverable error or max retries exceeded"},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Retrying, Description: "transient error and retries remaining"},
			{From: []jobstate.State{Retrying}, Event: jobstate.EventRequeue, To: Queued, Description: "retry delay elapsed"},
			{From: []jobstate.State{Queued}, Event: ResourceExhaustion, To: Failed, Description: "resource exhaustion"},
			// Cancellation is out of band: from every non-terminal state
			// to FAILED (the QUEUED → FAILED of the valid transitions is
			// one of these). A live execution is aborted, and its worker
			// learns it (jobstate.ErrCancelled) at its next report.
			{From: []jobstate.State{Created, Queued, Running, Retrying}, Event: jobstate.EventCancel, To: Failed, Description: "cancellation (out of band)"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:     LeaseTTL,
			Retry:        jobstate.RetryPolicy{MaxRetries: MaxRetries, Backoff: jobstate.FixedBackoff(RetryDelay)},
			Classify:     h.Classify.Func,
			ClassifyName: h.Classify.Name,
		},
	}
}
