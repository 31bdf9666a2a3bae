// Package imagegen is the literal definition of the image generation
// lifecycle: a job is queued once its creation passed the prompt and quota
// checks and reserved its credits, a worker runs it, an API error parks it
// in failed and re-queues it with exponential backoff while retryCount,
// incremented, stays below MAX_RETRIES (3), and sends it to dead_letter
// otherwise; the safety filter rejects a job, with an audit record and no
// refund. A request's idempotency key returns the existing job unless that
// job is failed.
//
// The example program examples/imagegen runs this definition with its
// application's guard and effects; the library's tests, the store suite and
// the conformance vectors run it with theirs.
package imagegen

import (
	"context"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// Name is the machine's name.
const Name = "imagegen"

// The states, named as the lifecycle names them.
const (
	Queued     jobstate.State = "queued"
	Running    jobstate.State = "running"
	Completed  jobstate.State = "completed"
	Failed     jobstate.State = "failed"
	Rejected   jobstate.State = "rejected"
	DeadLetter jobstate.State = "dead_letter"
)

// Reject is the safety rejection (transition E), a user event fired through
// the worker's lease when the image API's safety filter blocks the prompt.
const Reject jobstate.Event = "reject"

const (
	// MaxRetries is the lifecycle's MAX_RETRIES. On a failure retryCount is
	// incremented first; the job is re-queued only while retryCount <
	// MAX_RETRIES, and dead-lettered otherwise, so a job that always fails
	// runs MaxRetries attempts.
	MaxRetries = 3
	// EngineMaxRetries is Policy.Retry.MaxRetries: the engine counts the
	// failures it retries (Job.RetryCount) and retries while that count is
	// below the bound, so the bound is MAX_RETRIES-1.
	EngineMaxRetries = MaxRetries - 1
	// LeaseTTL is how long a worker holds a job without a heartbeat.
	LeaseTTL = 30 * time.Second
)

// Backoff is the lifecycle's exponential backoff: 2 s before the first
// retry, doubling, capped at one minute, with no jitter.
func Backoff() jobstate.Backoff { return jobstate.ExponentialBackoff(2*time.Second, 2, time.Minute) }

// Hooks are the functions the definition leaves to the program that runs
// it. Every one is required.
type Hooks struct {
	// Create is the creation guard: PromptGuard.validate() and
	// Quota.check() (the idempotency check is the engine's).
	Create hook.Guard
	// ReserveCredits is the creation's action: deduct the job's credits
	// (reserved), in the creation's write.
	ReserveCredits hook.Effect
	// AuditSafeBlock is the rejection's action: the SAFE_BLOCK audit
	// record, and no refund.
	AuditSafeBlock hook.Effect
}

// Spec returns the image generation machine with h bound.
func Spec(h Hooks) jobstate.Spec {
	return jobstate.Spec{
		Name: Name,
		States: []jobstate.StateSpec{
			{Name: Queued, Kind: jobstate.KindReady, Description: "created, validated, awaiting a worker"},
			{Name: Running, Kind: jobstate.KindActive, Description: "picked up by a worker, API called"},
			{Name: Completed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "generated, asset URL stored"},
			{Name: Failed, Kind: jobstate.KindWaiting, Description: "API error, waiting out the backoff"},
			{Name: Rejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected, Description: "blocked by moderation or safety"},
			{Name: DeadLetter, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeDeadLettered, Description: "max retries exceeded, for manual review"},
		},
		// createJob (null → queued) is the creation itself, with its guard
		// and action below.
		Initial: Queued,
		Rules: []jobstate.Rule{
			// B. Execution: a worker's pickup.
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running},
			// C. Success: the commit of the image's URL and asset.
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Completed},
			// D. Failure: running → failed either way. While retryCount,
			// incremented, stays below MAX_RETRIES the engine counts the
			// retry and sets the backoff (retry); otherwise it goes on to
			// dead_letter in the same write (fail, then exhaust).
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Failed},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed},
			{From: []jobstate.State{Failed}, Event: jobstate.EventRequeue, To: Queued, Description: "retry: backoff elapsed"},
			{From: []jobstate.State{Failed}, Event: jobstate.EventExhaust, To: DeadLetter, Description: "retries spent"},
			// E. Rejection, running → rejected; the state table also lists
			// rejected among the next states of queued (moderation before
			// any worker ran the job).
			{From: []jobstate.State{Queued, Running}, Event: Reject, To: Rejected,
				Effect: h.AuditSafeBlock.Func, EffectName: h.AuditSafeBlock.Name},
		},
		Policy: jobstate.Policy{
			LeaseTTL: LeaseTTL,
			Retry:    jobstate.RetryPolicy{MaxRetries: EngineMaxRetries, Backoff: Backoff()},
			// "If a job with same key exists and is not failed, return
			// existing Job ID": a job in failed releases its key, every
			// other state holds it, dead_letter included.
			Idempotency: jobstate.IdempotencyPolicy{ReleaseIn: []jobstate.State{Failed}},
			// dead_letter is final and waits for "manual review": an
			// operator may run the job again as a new job.
			RedriveFrom: []jobstate.State{DeadLetter},
		},
		Create: jobstate.CreateSpec{
			Guard: h.Create.Func, GuardName: h.Create.Name,
			Effect: h.ReserveCredits.Func, EffectName: h.ReserveCredits.Name,
		},
	}
}

// Plain returns hooks for running the machine without an application: no
// prompt or quota to check, no credits or audit log to write. The guard
// allows every creation and the effects do nothing.
func Plain() Hooks {
	return Hooks{
		Create:         hook.Guard{Name: "allow", Func: func(context.Context, jobstate.GuardInput) error { return nil }},
		ReserveCredits: hook.Effect{Name: "no credits", Func: func(context.Context, jobstate.Job) error { return nil }},
		AuditSafeBlock: hook.Effect{Name: "no audit log", Func: func(context.Context, jobstate.Job) error { return nil }},
	}
}
