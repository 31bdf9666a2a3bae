package jobstate

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Store persists jobs, their executions, their history and their once-only
// effects. It decides nothing: every rule is the engine's. What a Store
// guarantees is atomicity, isolation per job, and the few uniqueness
// constraints a database would enforce (one id per job, one key holder, one
// commit per job, one record per named effect).
//
// Every method is one atomic unit: in a SQL store, one transaction. The
// PostgreSQL shape of each method is written down in docs/store.md, and
// storetest.Run checks every clause below against any implementation.
//
// Ownership: values a Store returns belong to the caller, except that the
// byte slices of a Job (Payload, Result) may be shared with the store's own
// copy and must not be modified. A store may keep the memory of a Write
// its function returns as it is: the engine never modifies it again, and
// reads only its Transitions afterwards, to tell its observers, so a
// store must not modify those.
//
// Concurrency: all methods are safe for concurrent use. Update, Create and
// ClaimNext call their function at most once per job they lock, while no
// other Update, Create or ClaimNext of the same job (or, for Create, of
// the same key) runs; reads (Get, Executions, History, Effects, Due, Stale)
// never wait for such a function and see the last written version. A
// function runs under no lock shared with other jobs or other keys: it may
// call the store (through the engine) for any other job or key, as
// creation effects that create further jobs do.
//
// Effects and failures: the engine runs users' effects inside these
// functions, after every check that could refuse the write. A store must
// therefore not refuse a Write for a reason it could have found before
// calling the function, except the constraints listed on Update (which
// the engine never violates). A store whose write can still fail after the
// function returned (a SQL store's COMMIT) passes its transaction to the
// function through the context, so that effects writing in it are undone
// with the write; effects acting elsewhere are not, on any store.
type Store interface {
	// Create inserts a new job. With an empty key, fn is called with nil
	// existing and its Write is inserted. With a key, Create locks the key
	// of that machine for the call, loads the job that holds it (nil if
	// none) and calls fn: the zero Write (a Job without an ID) keeps the
	// existing job (returned with created == false); any other is inserted
	// and takes the key over. A zero Write with no existing job is
	// ErrInvalidArgument (KeepsHolder decides both).
	// The Write's Job must carry a new ID (else ErrDuplicateJob), Version
	// >= 1, and its transitions. An error from fn is returned as it is and
	// nothing is written.
	Create(ctx context.Context, machine, key string, fn CreateFunc) (job Job, created bool, err error)

	// Get returns the current version of a job, or ErrNotFound.
	Get(ctx context.Context, id uuid.UUID) (Job, error)

	// Executions returns the job's executions in claim order (by Attempt),
	// or ErrNotFound for an unknown job.
	Executions(ctx context.Context, id uuid.UUID) ([]Execution, error)

	// History returns the job's transition records in version order, or
	// ErrNotFound for an unknown job.
	History(ctx context.Context, id uuid.UUID) ([]Transition, error)

	// Effects returns the once-only effects recorded for the job, in the
	// order they were recorded, or ErrNotFound for an unknown job.
	Effects(ctx context.Context, id uuid.UUID) ([]EffectRecord, error)

	// Update locks the job, calls fn with its current version and applies
	// the returned Write atomically: the job replaced, the transitions
	// appended, the executions inserted or replaced by ID, the effects
	// recorded. It returns the job as written. An error from fn is
	// returned as it is and nothing is written; a Write with no change
	// (Job.Version equal to the current one, nothing else) writes nothing.
	//
	// The store refuses, writing nothing, a Write whose Job.ID differs
	// (ErrInvalidArgument), whose Job.Version is not above the current one
	// or whose transition versions are not strictly increasing within
	// (current, Job.Version] (ErrVersionConflict), that would leave two
	// executions of the job COMMITTED or DONE (ErrAlreadyCommitted), or
	// that records an effect name already recorded (ErrEffectApplied).
	// Unknown id: ErrNotFound.
	Update(ctx context.Context, id uuid.UUID, fn UpdateFunc) (Job, error)

	// ClaimNext offers the due ready jobs of q.Machine (Kind ready,
	// NotBefore <= q.Now) to fn one at a time, in claim order: Priority
	// (higher first), then due time (Job.DueAt: the later of NotBefore and
	// CreatedAt, earlier first), then CreatedAt, then ID. A job locked
	// by another update is skipped, not waited for. When fn returns an
	// error matching ErrSkip the next candidate is offered; any other error
	// stops the search and is returned; a Write is applied as by Update and
	// the written job returned. ErrNoJob when no candidate was taken after
	// q.Limit offers (all candidates when Limit <= 0). Its cost grows with
	// the logarithm of the number of ready jobs, not linearly.
	ClaimNext(ctx context.Context, q ClaimQuery, fn UpdateFunc) (Job, error)

	// Due returns up to q.Limit jobs (all when Limit <= 0) whose WakeAt is
	// set and not after q.Now, of the machines q.Machines names (any
	// machine when empty), that come after the cursor (q.AfterWake,
	// q.AfterID) in (WakeAt, ID) order, in that order. Paging with the
	// last job returned as the next cursor visits every due job once, however
	// many of them the caller fails to write.
	Due(ctx context.Context, q DueQuery) ([]DueJob, error)

	// Stale returns up to limit jobs of machine (any machine when empty)
	// holding live leases (Leases > 0) whose HeartbeatAt is before the
	// given time, oldest heartbeat first.
	Stale(ctx context.Context, machine string, heartbeatBefore time.Time, limit int) ([]Job, error)
}

// Snapshot is a job as an UpdateFunc sees it. Executions and Effects are
// the store's and are valid only until the function returns; they must not
// be modified or kept.
type Snapshot struct {
	Job        Job
	Executions []Execution
	Effects    []EffectRecord
}

// Write is the new version of a job with everything that changes with it,
// applied atomically by a Store.
type Write struct {
	// Job is the new version of the job.
	Job Job
	// Transitions are appended to the history, in order.
	Transitions []Transition
	// Executions are inserted, or replace the one with the same ID.
	Executions []Execution
	// Effects are recorded; a name recorded before makes the whole write fail
	// with ErrEffectApplied.
	Effects []EffectRecord
	// MaxPerKey, when above zero, is the machine's limit of live executions
	// per concurrency key (Policy.MaxPerKey), which a KeyLimiter store
	// enforces on this write if it raises Job.Leases of a job with a
	// ConcurrencyKey (a claim): see KeyLimiter and CheckKeyLimit.
	MaxPerKey int
}

// EffectRecord records that a named once-only effect of a job ran (a
// refund): which effect, through which execution, by whom, when.
type EffectRecord struct {
	Name   string
	ExecID uuid.UUID
	Actor  string
	At     time.Time
}

// UpdateFunc decides the next version of a job from its current one.
type UpdateFunc func(ctx context.Context, cur Snapshot) (Write, error)

// CreateFunc decides a creation. existing is the job holding the key, nil
// when there is none (or no key was given). A Write whose Job has no ID
// (the zero Write) keeps the existing job.
type CreateFunc func(ctx context.Context, existing *Job) (Write, error)

// DueQuery selects the jobs Store.Due returns.
type DueQuery struct {
	// Now: jobs whose WakeAt is not after it are due.
	Now time.Time
	// Machines limits the result to jobs of these machines; empty means
	// every machine. An engine passes the machines it knows, so that
	// engines with different machines can share one store.
	Machines []string
	// AfterWake and AfterID are the cursor: only jobs after (AfterWake,
	// AfterID) in (WakeAt, ID) order are returned. The zero cursor starts
	// at the beginning.
	AfterWake time.Time
	AfterID   uuid.UUID
	// Limit bounds how many jobs are returned; <= 0 means all.
	Limit int
}

// DueJob is one job Store.Due returns: its id and the wake time it was
// found at (the next cursor).
type DueJob struct {
	ID     uuid.UUID
	WakeAt time.Time
}

// ClaimQuery selects the jobs ClaimNext offers.
type ClaimQuery struct {
	Machine string
	Now     time.Time
	// Limit bounds how many candidates are offered; <= 0 means all.
	Limit int
	// MaxPerKey, when above zero, is the machine's limit of live executions
	// per concurrency key (Policy.MaxPerKey): a KeyLimiter store does not
	// offer a job whose key has reached it.
	MaxPerKey int
	// Plan, when set, is the claim function's decision for the candidates
	// it covers, which a ClaimPlanner store may apply instead of calling
	// the function (see ClaimPlan). The engine sets it only on a
	// ClaimBatch of a ClaimPlanner whose AppliesClaimPlans is true.
	Plan *ClaimPlan
}

// Errors of the Store protocol.
var (
	// ErrSkip, returned (or wrapped) by a ClaimNext function, passes over
	// the candidate.
	ErrSkip = errors.New("jobstate: skip candidate")
	// ErrNoJob: no due ready job could be claimed.
	ErrNoJob = errors.New("jobstate: no job to claim")
	// ErrAlreadyCommitted: another execution of the job passed the commit
	// boundary. The engine returns it wrapped in a *CommitError naming the
	// winner.
	ErrAlreadyCommitted = errors.New("jobstate: job already committed")
	// ErrEffectApplied: the named once-only effect already ran for the job.
	ErrEffectApplied = errors.New("jobstate: effect already applied")
	// ErrKeyLimit: the claim would take the live executions of the job's
	// concurrency key above its machine's Policy.MaxPerKey. Engine.ClaimJob
	// returns it wrapped with ErrNotClaimable; the job is claimable again
	// once an execution of its key ends.
	ErrKeyLimit = errors.New("jobstate: concurrency key at its limit")
)

// Counter is an optional Store capability: the number of jobs of a machine
// in each state, for metrics and dashboards. Engine.Counts uses it.
type Counter interface {
	// Count returns the number of jobs of machine per state; states with no
	// job may be absent.
	Count(ctx context.Context, machine string) (map[State]int, error)
}

// Pruner is an optional Store capability: forgetting finished jobs, so
// that a long-running store does not grow without bound.
type Pruner interface {
	// Prune deletes up to limit (all when limit <= 0) terminal jobs whose
	// CompletedAt is before the given time, with their executions,
	// history, effects and idempotency keys, and returns how many it
	// deleted. A deleted job is ErrNotFound afterwards, and its key, if it
	// still held one, is free. Jobs that are not terminal are never
	// deleted. It works in small batches, so that other operations are not
	// held up for long however many jobs it deletes, and its cost grows
	// with the number of jobs deleted, not with the number stored.
	Prune(ctx context.Context, completedBefore time.Time, limit int) (int, error)
}

// ErrUnsupported: the store lacks an optional capability.
var ErrUnsupported = errors.New("jobstate: not supported by this store")
