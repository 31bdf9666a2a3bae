package machines

import (
	"context"
	"errors"
	"time"

	"github.com/jobstate/jobstate"
)

// Derived (exactly-once executions) states: the job state is a projection of executions.
const (
	Pending jobstate.State = "PENDING"
	// Running and Succeeded and Failed are shared with the docs machine.
)

// DerivedSpec is the exactly-once executions machine: PENDING ↔ RUNNING →
// SUCCEEDED/FAILED, moved only by its executions, two retries.
func DerivedSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "derived",
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

// Bounty (bounty marketplace) states.
const (
	Open      jobstate.State = "open"
	Funded    jobstate.State = "funded"
	Resolved  jobstate.State = "resolved"
	Expired   jobstate.State = "expired"
	Cancelled jobstate.State = "cancelled"
)

// Fund is the bounty's funding event.
const Fund jobstate.Event = "fund"

// ErrNotOwner and ErrJudging are the bounty guards' refusals.
var (
	ErrNotOwner = errors.New("only the owner may do that")
	ErrJudging  = errors.New("a submission is being judged")
)

// OwnerOnly allows the move only to the job's owner.
func OwnerOnly(_ context.Context, in jobstate.GuardInput) error {
	if in.Actor != in.Job.Owner {
		return ErrNotOwner
	}
	return nil
}

// OwnerAndIdle allows the move only to the owner, and only while no
// execution is live.
func OwnerAndIdle(ctx context.Context, in jobstate.GuardInput) error {
	if err := OwnerOnly(ctx, in); err != nil {
		return err
	}
	for _, x := range in.Executions {
		if x.Status.Live() {
			return ErrJudging
		}
	}
	return nil
}

// BountySpec is a bounty marketplace shaped machine: several concurrent executions
// of a funded job, the first to commit wins; refund is a once-only effect
// run by refund (which the caller supplies).
func BountySpec(refund jobstate.EffectFunc) jobstate.Spec {
	return jobstate.Spec{
		Name: "bounty",
		States: []jobstate.StateSpec{
			{Name: Open, Kind: jobstate.KindInitial},
			{Name: Funded, Kind: jobstate.KindReady},
			{Name: Resolved, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: Expired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired},
			{Name: Cancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Open}, Event: Fund, To: Funded, Guard: OwnerOnly, GuardName: "owner"},
			{From: []jobstate.State{Funded}, Event: jobstate.EventClaim, To: Funded},
			{From: []jobstate.State{Funded}, Event: jobstate.EventSucceed, To: Resolved},
			{From: []jobstate.State{Funded}, Event: jobstate.EventExpire, To: Expired},
			{From: []jobstate.State{Open, Funded}, Event: jobstate.EventCancel, To: Cancelled, Guard: OwnerAndIdle, GuardName: "owner, nothing judging"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:        time.Minute,
			MaxExecutions:   3,
			FailOnLeaseLoss: true,
			LazyExpiry:      true,
		},
		Effects: []jobstate.EffectSpec{{Name: "refund", In: []jobstate.State{Expired, Cancelled}, Guard: OwnerOnly, GuardName: "owner", Run: refund}},
	}
}

// Delivery (file delivery) states and events.
const (
	DQueued      jobstate.State = "QUEUED"
	DClaimed     jobstate.State = "CLAIMED"
	DDownloading jobstate.State = "DOWNLOADING"
	DStreaming   jobstate.State = "STREAMING"
	DDelivered   jobstate.State = "DELIVERED"
	DFailed      jobstate.State = "FAILED"
	DCancelled   jobstate.State = "CANCELLED"
	DExpired     jobstate.State = "EXPIRED"

	StartDownload jobstate.Event = "start_download"
	Stream        jobstate.Event = "stream"
)

// DeliverySpec is a file delivery shaped machine: three active states under one
// lease, retryable errors straight back to QUEUED, three attempts.
func DeliverySpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "delivery",
		States: []jobstate.StateSpec{
			{Name: DQueued, Kind: jobstate.KindReady},
			{Name: DClaimed, Kind: jobstate.KindActive},
			{Name: DDownloading, Kind: jobstate.KindActive},
			{Name: DStreaming, Kind: jobstate.KindActive},
			{Name: DDelivered, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: DFailed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: DCancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: DExpired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired},
		},
		Initial: DQueued,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{DQueued}, Event: jobstate.EventClaim, To: DClaimed},
			{From: []jobstate.State{DClaimed}, Event: StartDownload, To: DDownloading},
			{From: []jobstate.State{DDownloading}, Event: Stream, To: DStreaming},
			{From: []jobstate.State{DStreaming}, Event: jobstate.EventSucceed, To: DDelivered},
			{From: []jobstate.State{DDownloading, DStreaming}, Event: jobstate.EventRetry, To: DQueued},
			{From: []jobstate.State{DClaimed}, Event: jobstate.EventAbandon, To: DQueued},
			{From: []jobstate.State{DClaimed, DDownloading, DStreaming}, Event: jobstate.EventFail, To: DFailed},
			{From: []jobstate.State{DQueued}, Event: jobstate.EventCancel, To: DCancelled},
			{From: []jobstate.State{DQueued}, Event: jobstate.EventExpire, To: DExpired},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 2, Backoff: jobstate.ExponentialBackoff(time.Second, 2, 10*time.Second)},
		},
	}
}

// Image (image generation) states.
const (
	IQueued     jobstate.State = "queued"
	IRunning    jobstate.State = "running"
	ICompleted  jobstate.State = "completed"
	IFailed     jobstate.State = "failed"
	IRejected   jobstate.State = "rejected"
	IDeadLetter jobstate.State = "dead_letter"

	Reject jobstate.Event = "reject"
)

// ImageSpec is a image generation shaped machine: failures park in "failed" (a
// waiting state) and go on to "dead_letter" when retries are spent.
func ImageSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "image",
		States: []jobstate.StateSpec{
			{Name: IQueued, Kind: jobstate.KindReady},
			{Name: IRunning, Kind: jobstate.KindActive},
			{Name: ICompleted, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: IFailed, Kind: jobstate.KindWaiting},
			{Name: IRejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
			{Name: IDeadLetter, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeDeadLettered},
		},
		Initial: IQueued,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{IQueued}, Event: jobstate.EventClaim, To: IRunning},
			{From: []jobstate.State{IQueued, IRunning}, Event: Reject, To: IRejected},
			{From: []jobstate.State{IRunning}, Event: jobstate.EventSucceed, To: ICompleted},
			{From: []jobstate.State{IRunning}, Event: jobstate.EventRetry, To: IFailed},
			{From: []jobstate.State{IRunning}, Event: jobstate.EventFail, To: IFailed},
			{From: []jobstate.State{IFailed}, Event: jobstate.EventRequeue, To: IQueued},
			{From: []jobstate.State{IFailed}, Event: jobstate.EventExhaust, To: IDeadLetter},
		},
		Policy: jobstate.Policy{
			Retry:       jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.ExponentialBackoff(2*time.Second, 2, time.Minute)},
			Idempotency: jobstate.IdempotencyPolicy{ReleaseIn: []jobstate.State{IFailed, IDeadLetter}},
		},
	}
}

// Must builds a Definition from a spec of this package, which is valid by
// construction.
func Must(spec jobstate.Spec) *jobstate.Definition {
	d, err := jobstate.NewDefinition(spec)
	if err != nil {
		panic(err)
	}
	return d
}
