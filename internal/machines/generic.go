package machines

import (
	"time"

	"github.com/jobstate/jobstate"
)

// The queue machine's states and its submission event.
const (
	Created   jobstate.State = "CREATED"
	Queued    jobstate.State = "QUEUED"
	Running   jobstate.State = "RUNNING"
	Retrying  jobstate.State = "RETRYING"
	Succeeded jobstate.State = "SUCCEEDED"
	Failed    jobstate.State = "FAILED"

	// Submit moves a created job to QUEUED.
	Submit jobstate.Event = "submit"
)

// QueueSpec is the queue machine: a job is CREATED, submitted to QUEUED,
// RUNNING while claimed, RETRYING after a retryable failure (three
// retries, a fixed one-second backoff), and ends SUCCEEDED or FAILED; a
// cancel is allowed from QUEUED only, and ends in FAILED.
func QueueSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: Created, Kind: jobstate.KindInitial, Description: "created, not yet submitted"},
			{Name: Queued, Kind: jobstate.KindReady, Description: "waiting in the processing queue"},
			{Name: Running, Kind: jobstate.KindActive, Description: "being processed"},
			{Name: Retrying, Kind: jobstate.KindWaiting, Description: "scheduled for retry"},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Created}, Event: Submit, To: Queued},
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Retrying},
			{From: []jobstate.State{Retrying}, Event: jobstate.EventRequeue, To: Queued},
			{From: []jobstate.State{Queued}, Event: jobstate.EventCancel, To: Failed},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
		},
	}
}

// Queue returns QueueSpec as a validated Definition.
func Queue() *jobstate.Definition { return Must(QueueSpec()) }

// The transfer machine's states and events.
const (
	TQueued      jobstate.State = "QUEUED"
	TClaimed     jobstate.State = "CLAIMED"
	TDownloading jobstate.State = "DOWNLOADING"
	TStreaming   jobstate.State = "STREAMING"
	TDelivered   jobstate.State = "DELIVERED"
	TFailed      jobstate.State = "FAILED"
	TCancelled   jobstate.State = "CANCELLED"
	TExpired     jobstate.State = "EXPIRED"

	// StartDownload moves a claimed job to DOWNLOADING.
	StartDownload jobstate.Event = "start_download"
	// Stream moves a downloading job to STREAMING.
	Stream jobstate.Event = "stream"
)

// TransferSpec is the transfer machine: three active states under one
// lease (CLAIMED, DOWNLOADING, STREAMING), unguarded; a retryable error
// goes straight back to QUEUED (two retries, exponential backoff from one
// second); a lost lease in CLAIMED is abandoned to QUEUED; a queued job may
// be cancelled or expire. It has no guards, effects or classifier.
func TransferSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "transfer",
		States: []jobstate.StateSpec{
			{Name: TQueued, Kind: jobstate.KindReady},
			{Name: TClaimed, Kind: jobstate.KindActive},
			{Name: TDownloading, Kind: jobstate.KindActive},
			{Name: TStreaming, Kind: jobstate.KindActive},
			{Name: TDelivered, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: TFailed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: TCancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: TExpired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired},
		},
		Initial: TQueued,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{TQueued}, Event: jobstate.EventClaim, To: TClaimed},
			{From: []jobstate.State{TClaimed}, Event: StartDownload, To: TDownloading},
			{From: []jobstate.State{TDownloading}, Event: Stream, To: TStreaming},
			{From: []jobstate.State{TStreaming}, Event: jobstate.EventSucceed, To: TDelivered},
			{From: []jobstate.State{TDownloading, TStreaming}, Event: jobstate.EventRetry, To: TQueued},
			{From: []jobstate.State{TClaimed}, Event: jobstate.EventAbandon, To: TQueued},
			{From: []jobstate.State{TClaimed, TDownloading, TStreaming}, Event: jobstate.EventFail, To: TFailed},
			{From: []jobstate.State{TQueued}, Event: jobstate.EventCancel, To: TCancelled},
			{From: []jobstate.State{TQueued}, Event: jobstate.EventExpire, To: TExpired},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 2, Backoff: jobstate.ExponentialBackoff(time.Second, 2, 10*time.Second)},
		},
	}
}

// Pending is the projected machine's ready state; its other states are
// the queue machine's RUNNING, SUCCEEDED and FAILED.
const Pending jobstate.State = "PENDING"

// ProjectedSpec is the projected machine: a machine with derived state
// (Policy.DerivedState), PENDING ↔ RUNNING → SUCCEEDED/FAILED, moved only by
// its executions, with two retries and a commit allowed straight from
// LEASED.
func ProjectedSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "projected",
		States: []jobstate.StateSpec{
			{Name: Pending, Kind: jobstate.KindReady},
			{Name: Running, Kind: jobstate.KindActive},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: Pending,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Pending}, Event: jobstate.EventClaim, To: Running},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded},
			{From: []jobstate.State{Running}, Event: jobstate.EventAbandon, To: Pending},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Pending},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed},
		},
		Policy: jobstate.Policy{
			LeaseTTL:     10 * time.Second,
			DerivedState: true,
			Retry:        jobstate.RetryPolicy{MaxRetries: 2},
		},
	}
}

// The parking machine's states and its rejection event.
const (
	PQueued     jobstate.State = "queued"
	PRunning    jobstate.State = "running"
	PCompleted  jobstate.State = "completed"
	PFailed     jobstate.State = "failed"
	PRejected   jobstate.State = "rejected"
	PDeadLetter jobstate.State = "dead_letter"

	// Reject ends a queued or running job in rejected.
	Reject jobstate.Event = "reject"
)

// ParkingSpec is the parking machine: a failure parks the job in a
// waiting state, failed, from which it is requeued after an exponential
// backoff (three retries, from two seconds) or, with retries spent, goes
// on to dead_letter; failed and dead_letter release the idempotency key.
// It has no guards, effects or classifier.
func ParkingSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "parking",
		States: []jobstate.StateSpec{
			{Name: PQueued, Kind: jobstate.KindReady},
			{Name: PRunning, Kind: jobstate.KindActive},
			{Name: PCompleted, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: PFailed, Kind: jobstate.KindWaiting},
			{Name: PRejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
			{Name: PDeadLetter, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeDeadLettered},
		},
		Initial: PQueued,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{PQueued}, Event: jobstate.EventClaim, To: PRunning},
			{From: []jobstate.State{PQueued, PRunning}, Event: Reject, To: PRejected},
			{From: []jobstate.State{PRunning}, Event: jobstate.EventSucceed, To: PCompleted},
			{From: []jobstate.State{PRunning}, Event: jobstate.EventRetry, To: PFailed},
			{From: []jobstate.State{PRunning}, Event: jobstate.EventFail, To: PFailed},
			{From: []jobstate.State{PFailed}, Event: jobstate.EventRequeue, To: PQueued},
			{From: []jobstate.State{PFailed}, Event: jobstate.EventExhaust, To: PDeadLetter},
		},
		Policy: jobstate.Policy{
			Retry:       jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.ExponentialBackoff(2*time.Second, 2, time.Minute)},
			Idempotency: jobstate.IdempotencyPolicy{ReleaseIn: []jobstate.State{PFailed, PDeadLetter}},
		},
	}
}

// Generic returns the generic machines of this package.
func Generic() []jobstate.Spec {
	return []jobstate.Spec{QueueSpec(), TransferSpec(), ProjectedSpec(), ParkingSpec(),
		WorkSpec("work"), WorkSpec("work_abandoning", WorkAbandoning(), WorkRetries(jobstate.Unlimited))}
}
