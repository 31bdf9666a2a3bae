// Package jobstate owns the lifecycle of background jobs: the states a job
// and each attempt (execution) of it pass through, the guarded moves
// between them written as a table, retries with backoff, idempotent
// creation, leases with heartbeats, and an exactly-once commit boundary
// for side effects under at-least-once delivery.
//
// # Shape
//
// A machine is declared as a Spec, a table of states (each of a Kind:
// initial, ready, active, waiting, terminal; terminal ones with an
// Outcome) and rules {From, Event, To, Guard, Effect}. NewDefinition
// validates it once and returns an immutable Definition, or a
// *DefinitionError naming every problem.
//
// Definition.Step is the pure core: it applies one rule to a job, reading
// no clock and touching no store. Users with their own persistence can use
// it alone.
//
// The Engine runs definitions over a Store. Every operation (Create, Fire,
// Cancel, Claim, ClaimJob, Heartbeat, Start, Advance, Commit, Finish,
// Succeed, Fail, Snooze, Apply, Sweep, RecoverWorker, Redrive) is one atomic
// store update: load the job, check the rule, its guards and the lifecycle
// policy, write the new version with its transition records, then tell the
// observers. An operation that returns an error has written nothing, and
// every error wraps a sentinel for errors.Is (Code gives its stable name).
//
// A Store persists and decides nothing. memstore is the reference
// implementation, storetest the conformance suite every store must pass.
//
// # Lifecycle
//
// The engine fires lifecycle events (EventClaim, EventSucceed, EventRetry,
// EventFail, EventExhaust, EventRequeue, EventAbandon, EventExpire,
// EventCancel) that a machine maps onto its own states with ordinary
// rules. A worker claims a due ready job and receives a Lease with a
// fencing token; it heartbeats, advances the job through its active states,
// and either commits its effect (at most one execution per job ever
// commits) or fails, and the retry policy decides what follows. Sweep,
// run periodically and at worker start, requeues due retries, recovers lost
// leases (finalizing executions that had committed without re-applying
// their effect) and expires jobs past their deadline.
//
// Time comes from a Clock; tests use a ManualClock and never sleep.
package jobstate
