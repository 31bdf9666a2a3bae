package jobstate

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// State names a state of a job machine, in the user's own vocabulary
// ("QUEUED", "funded", "dead_letter"). A State means something only together
// with the Definition that declares it.
type State string

// Event names a move of a job machine. User events ("submit", "fund",
// "start_download") are plain table rules fired with Engine.Fire; the
// lifecycle events declared in lifecycle.go (EventClaim, EventSucceed, ...)
// are fired by the engine's own operations and mapped onto the user's states
// by ordinary rules of the same table.
type Event string

// Kind classifies a state so that the engine, and any generic code, can
// understand a user's table without knowing its names.
type Kind uint8

// The kinds of state. The zero Kind is invalid so that a forgotten kind is
// reported at construction.
const (
	// KindInitial: created, not yet submitted (CREATED, open).
	KindInitial Kind = iota + 1
	// KindReady: may be claimed by a worker once its not-before has passed
	// (QUEUED, PENDING, funded).
	KindReady
	// KindActive: held under a lease by an execution (RUNNING, DOWNLOADING).
	KindActive
	// KindWaiting: parked until a time, such as a retry backoff (RETRYING).
	KindWaiting
	// KindTerminal: final; no rule may leave it. Carries an Outcome.
	KindTerminal
)

var kindNames = [...]string{"", "initial", "ready", "active", "waiting", "terminal"}

// String returns the kind's lower-case name, or "Kind(n)" for an invalid one.
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool { return k >= KindInitial && k <= KindTerminal }

// MarshalText encodes the kind by name.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("jobstate: invalid kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText decodes a kind name; an unknown name is an error.
func (k *Kind) UnmarshalText(b []byte) error {
	for i := KindInitial; i <= KindTerminal; i++ {
		if kindNames[i] == string(b) {
			*k = i
			return nil
		}
	}
	return fmt.Errorf("jobstate: unknown kind %q", b)
}

// Outcome says how a terminal state ended the job, so that metrics and
// generic code can read a job without knowing the user's state names.
// Non-terminal states have the empty outcome.
type Outcome string

// The outcomes a terminal state may carry.
const (
	OutcomeSucceeded    Outcome = "succeeded"
	OutcomeFailed       Outcome = "failed"
	OutcomeCancelled    Outcome = "cancelled"
	OutcomeExpired      Outcome = "expired"
	OutcomeRejected     Outcome = "rejected"
	OutcomeDeadLettered Outcome = "dead_lettered"
)

// Valid reports whether o is one of the declared outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeSucceeded, OutcomeFailed, OutcomeCancelled, OutcomeExpired, OutcomeRejected, OutcomeDeadLettered:
		return true
	}
	return false
}

// Failure reports whether o ends a job that did not do its work: failed,
// dead-lettered or expired. These are the jobs an operator's retry runs
// again (a redrive of a failure); a succeeded, cancelled or rejected job
// ended as someone decided, and only a redrive runs it again.
func (o Outcome) Failure() bool {
	switch o {
	case OutcomeFailed, OutcomeDeadLettered, OutcomeExpired:
		return true
	}
	return false
}

// Job is one unit of work and its lifecycle bookkeeping. It is a plain value:
// the engine hands out copies, and a Job read from the engine or a Store
// belongs to the caller (its byte slices must not be modified, since a store
// may share them with its own copy).
//
// Every field is maintained by the engine; a Store persists them as given.
type Job struct {
	// ID is a UUIDv7, so ids sort by creation time.
	ID uuid.UUID
	// Machine is the name of the Definition the job runs on.
	Machine string
	// State is the current state; Kind and Outcome are its kind and, for a
	// terminal state, its outcome, copied from the Definition.
	State   State
	Kind    Kind
	Outcome Outcome

	// Payload is the opaque input given at creation.
	Payload []byte
	// Result is the opaque output written by the committing execution.
	Result []byte

	// Version increases with every write; each transition record carries
	// the version it produced.
	Version int64
	// Attempt counts the claims of this job (the executions created). It is
	// the fencing token of the newest execution and never decreases.
	Attempt int
	// RetryCount counts the failures that were retried; it never exceeds
	// MaxRetries.
	RetryCount int
	// MaxRetries bounds RetryCount; Unlimited (-1) means no bound.
	MaxRetries int
	// Backoff is the job's own retry schedule, used instead of the
	// machine's when OwnBackoff is set (NewJob.Retry). It is a plain value:
	// a Job shares nothing with the engine or the store but its byte
	// slices.
	Backoff    Backoff
	OwnBackoff bool
	// LastError and ErrorClass describe the most recent failure; both are
	// cleared on success.
	LastError  string
	ErrorClass ErrorClass

	// IdempotencyKey is the key the job was created with, if any, and
	// Fingerprint the hash of what was created under it.
	IdempotencyKey string
	Fingerprint    string
	// Owner is who the job belongs to (a customer, a tenant), for guards.
	Owner string
	// ConcurrencyKey groups jobs whose executions the machine's
	// Policy.MaxPerKey limits (a customer, an account); set at creation,
	// never changed. Empty: not limited.
	ConcurrencyKey string
	// Priority orders the due ready jobs of a machine: a higher priority is
	// claimed first; among equal priorities, the job due earlier (DueAt)
	// first.
	Priority int

	CreatedAt time.Time
	UpdatedAt time.Time
	// StartedAt is set when the job first enters an active state.
	StartedAt time.Time
	// CompletedAt is set when the job enters a terminal state.
	CompletedAt time.Time
	// NotBefore is the earliest time the job may be claimed (a schedule or a
	// retry backoff); zero means at once.
	NotBefore time.Time
	// Deadline is when the job expires if it is not finished; zero means never.
	Deadline time.Time

	// Leases is the number of live executions; LeaseExpiresAt the earliest
	// expiry and HeartbeatAt the oldest heartbeat among them (both zero when
	// there are none).
	Leases         int
	LeaseExpiresAt time.Time
	HeartbeatAt    time.Time
	// Committed is the execution that passed the commit boundary, or the
	// zero UUID.
	Committed uuid.UUID
	// CancelRequested is set when a cancel aborted live executions: their
	// holders' next lease operation learns it.
	CancelRequested bool

	// WakeAt is the earliest time at which Engine.Sweep has something to do
	// with the job (promote, reclaim a lease, expire); zero means never.
	// Stores index it; only the engine sets it.
	WakeAt time.Time
	// SweepFailures counts the sweep's consecutive failed attempts to write
	// the job (a guard refusing a timed move, a rule effect failing), and
	// SweepRetryAt is when the sweep tries again: each failure pushes
	// WakeAt back by a growing delay, so that a job that keeps failing
	// costs the sweep little and hides no other job. Any successful write
	// of the engine clears both.
	SweepFailures int
	SweepRetryAt  time.Time
}

// Terminal reports whether the job is in a terminal state.
func (j Job) Terminal() bool { return j.Kind == KindTerminal }

// Due reports whether a ready job may be claimed at now.
func (j Job) Due(now time.Time) bool {
	return j.Kind == KindReady && !j.NotBefore.After(now)
}

// DueAt is the time from which the job is due, which orders the claims of
// jobs of equal priority: the later of NotBefore and CreatedAt. A retried
// job is due when its backoff ends, a fresh one when it was created, so
// that a stream of fresh jobs cannot starve a retried one.
func (j Job) DueAt() time.Time {
	if j.NotBefore.After(j.CreatedAt) {
		return j.NotBefore
	}
	return j.CreatedAt
}
