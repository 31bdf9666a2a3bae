package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
)

// The states of image generation, named as the lifecycle names them (the
// literal definition, internal/machines/imagegen).
const (
	Queued     = imagegen.Queued
	Running    = imagegen.Running
	Completed  = imagegen.Completed
	Failed     = imagegen.Failed
	Rejected   = imagegen.Rejected
	DeadLetter = imagegen.DeadLetter
)

// EventReject is the safety rejection (transition E): a user
// event, fired by the worker through its lease when the image API's safety
// filter blocks the prompt.
const EventReject = imagegen.Reject

// The example's settings.
const (
	// Machine is the name the definition is registered under.
	Machine = imagegen.Name
	// CreditsPerImage is what one job reserves at creation.
	CreditsPerImage = 5
	// MaxRetries is the lifecycle's MAX_RETRIES. On a failure retryCount is
	// incremented first; the job is re-queued only if retryCount <
	// MAX_RETRIES, and dead-lettered otherwise. A job that always fails
	// therefore runs MAX_RETRIES (3) attempts and ends with retryCount 3.
	// The engine counts only the failures it retries (Job.RetryCount) and
	// retries while that count is below Policy.Retry.MaxRetries, so the
	// policy is MaxRetries-1 (EngineMaxRetries); RetryCount reads the
	// lifecycle's count from the history.
	MaxRetries = imagegen.MaxRetries
	// EngineMaxRetries is Policy.Retry.MaxRetries: failures the engine
	// retries, MAX_RETRIES-1 (see MaxRetries).
	EngineMaxRetries = imagegen.EngineMaxRetries
	// MaxPromptRunes bounds a prompt's length (PromptGuard.validate).
	MaxPromptRunes = 500
	// LeaseTTL is how long a worker holds a job without a heartbeat.
	LeaseTTL = imagegen.LeaseTTL
	// AuditSafeBlock is the audit action a safety rejection writes.
	AuditSafeBlock = "SAFE_BLOCK"
)

// Backoff is the lifecycle's "Calculate Backoff (Exponential)": 2 s before
// the first retry, doubling, capped at one minute (2 s, then 4 s, for the
// two re-queues). No jitter, so the schedule can be checked value by value.
var Backoff = imagegen.Backoff()

// Errors of the creation guard. The engine wraps them in a
// *jobstate.TransitionError with jobstate.ErrGuardRefused, so callers
// match either.
var (
	// ErrInvalidPrompt: PromptGuard.validate() refused the request.
	ErrInvalidPrompt = errors.New("invalid prompt")
	// ErrQuotaExceeded: Quota.check() refused: the user's credits do not
	// cover the job.
	ErrQuotaExceeded = errors.New("quota exceeded")
)

// Errors of the (simulated) image API.
var (
	// ErrAPITimeout and ErrAPI500 are the lifecycle's failure triggers: retried.
	ErrAPITimeout = errors.New("image API timeout")
	ErrAPI500     = errors.New("image API: 500 internal error")
	// ErrSafetyBlock is the API's safety filter (NSFW detected): the job is
	// rejected, not failed.
	ErrSafetyBlock = errors.New("image API safety filter: NSFW detected")
)

// Params are the generation parameters that belong to the idempotency key.
type Params struct {
	Size  string `json:"size"`
	Style string `json:"style,omitempty"`
}

// allowedSizes are the sizes PromptGuard.validate accepts.
var allowedSizes = map[string]bool{"512x512": true, "1024x1024": true, "1024x1792": true}

// Request is a user's createJob call; it is stored as the job's payload.
type Request struct {
	UserID string `json:"user"`
	Prompt string `json:"prompt"`
	Params Params `json:"params"`
}

// encode returns the request as a job payload.
func (r Request) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of strings always encodes
	}
	return b
}

// decodeRequest reads a job's payload back.
func decodeRequest(payload []byte) (Request, error) {
	var r Request
	err := json.Unmarshal(payload, &r)
	return r, err
}

// IdempotencyKey is the lifecycle's Hash(userId + prompt + params +
// timestamp_minute): requests in the same minute share it.
func IdempotencyKey(now time.Time, r Request) string {
	params, err := json.Marshal(r.Params) // fields in declaration order: canonical
	if err != nil {
		panic(err)
	}
	return jobstate.KeyAt(now, time.Minute, r.UserID, r.Prompt, string(params))
}

// RetryCount is the lifecycle's retryCount of a job, read from its history:
// the number of its failures (running → failed), each of which increments
// it. It is 3 on a job dead-lettered after three failed attempts, where
// Job.RetryCount, the engine's count of retried failures, is 2.
func RetryCount(history []jobstate.Transition) int {
	n := 0
	for _, t := range history {
		if t.From == Running && t.To == Failed {
			n++
		}
	}
	return n
}

// NewSpec returns the image generation machine, the literal definition of
// internal/machines/imagegen, with its guard and effects bound to db, the
// application's own database:
//
//   - the creation guard is PromptGuard.validate and Quota.check
//     (AppDB.CreationGuard; the idempotency check is the engine's);
//   - the creation's action deducts the credits (AppDB.ReserveCredits);
//   - the rejection's action writes the SAFE_BLOCK audit record, with no
//     refund (AppDB.AuditSafeBlock).
//
// The definition keeps the literal idempotency rule: a job in failed
// releases its key, every other state holds it, dead_letter included.
// While a job waits in failed, a resend of the same request therefore
// creates, and pays for, a second job: the literal rule against the
// lifecycle's goal (no double deduction on a UI network retry).
// docs/examples/imagegen.md shows the one-line change that serves the goal
// instead. After the "manual review" of a dead letter an operator may run
// the job again (App.Redrive, Engine.Redrive); completed and rejected are
// answers, not redriven.
func NewSpec(db *AppDB) jobstate.Spec {
	return imagegen.Spec(imagegen.Hooks{
		Create:         hook.Guard{Name: "PromptGuard.validate, Quota.check", Func: db.CreationGuard},
		ReserveCredits: hook.Effect{Name: "deduct credits (reserved)", Func: db.ReserveCredits},
		AuditSafeBlock: hook.Effect{Name: "audit " + AuditSafeBlock + ", no refund", Func: db.AuditSafeBlock},
	})
}

// NewDefinition validates the machine of NewSpec.
func NewDefinition(db *AppDB) (*jobstate.Definition, error) {
	return jobstate.NewDefinition(NewSpec(db))
}

// ValidatePrompt is PromptGuard.validate(): a non-blank prompt of at most
// MaxPromptRunes characters and a known image size.
func ValidatePrompt(r Request) error {
	p := strings.TrimSpace(r.Prompt)
	switch {
	case p == "":
		return fmt.Errorf("%w: empty", ErrInvalidPrompt)
	case utf8.RuneCountInString(p) > MaxPromptRunes:
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidPrompt, MaxPromptRunes)
	case !allowedSizes[r.Params.Size]:
		return fmt.Errorf("%w: unsupported size %q", ErrInvalidPrompt, r.Params.Size)
	}
	return nil
}
