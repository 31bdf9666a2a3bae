package jobstate

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// BatchClaimer is an optional Store capability: taking several due ready
// jobs in one call (one round trip in a SQL store). Engine.ClaimMany uses
// it, and falls back to repeated ClaimNext calls without it.
type BatchClaimer interface {
	// ClaimBatch offers the due ready jobs of q.Machine to fn in claim
	// order, as ClaimNext does, until n of them were taken or none is left,
	// and returns the jobs taken, as written, in claim order. Each job's
	// write is checked and applied as by Update. A function error matching
	// ErrSkip passes over its candidate; any other error (and the end of
	// ctx) stops the batch and is returned. A store with transactions
	// applies the writes together (in a SQL store, in one transaction), and
	// with an error takes none; a store without (in memory) applies each
	// write as its function returns, since the effects the function ran
	// cannot be undone, and with an error returns the jobs taken before it
	// beside the error. No candidate: an empty result and a nil error (not
	// ErrNoJob).
	ClaimBatch(ctx context.Context, q ClaimQuery, n int, fn UpdateFunc) ([]Job, error)
}

// BatchCreator is an optional Store capability: creating many jobs, with
// or without idempotency keys, in one call (in a SQL store, one
// transaction and COPY). Engine.CreateMany uses it and returns
// ErrUnsupported without it.
type BatchCreator interface {
	// CreateBatch creates up to len(keys) jobs, job i under keys[i] (the
	// zero BatchKey: no key). It calls fn for i = 0 … len(keys)-1, in
	// order, as Create calls a CreateFunc: existing is the job holding
	// keys[i] (nil when none, or with no key), which is the job stored
	// before the batch or one an earlier call of the same batch created
	// under that key. The zero Write (a Job without an ID) keeps the
	// existing job (Created.Existing; a zero Write with no existing job is
	// ErrInvalidArgument); any other Write is a new job (a new ID,
	// Version >= 1, its transitions, executions and effects), stored as
	// Create stores it, which takes the key over. fn's context carries
	// the store's transaction where it has one, as a CreateFunc's does.
	//
	// Every key of the batch is held from the start of the call to its
	// end: a concurrent Create or CreateBatch under one of them waits, so
	// that a key is decided by one creation at a time. A store takes a
	// batch's keys in one fixed order of its own, so that batches sharing
	// keys cannot wait on each other in a cycle.
	//
	// It returns one Created per job decided, in order: the job as
	// written, or the existing job kept. An error from fn is returned as
	// it is, and stops the batch; a duplicate id (of a stored job or of an
	// earlier job of the batch) is ErrDuplicateJob; a nil fn, or a
	// BatchKey with a Key and no Machine, is ErrInvalidArgument; no keys
	// writes nothing and returns nothing. A store with transactions
	// creates every job or, with an error, none; a store without (in
	// memory) stores each job as its fn returns, since the creation
	// effects fn ran cannot be undone, and with an error returns the jobs
	// decided before it beside the error. Either way the Created results
	// that are not Existing are exactly the jobs created.
	CreateBatch(ctx context.Context, keys []BatchKey, fn BatchCreateFunc) ([]Created, error)
}

// BatchKey is the idempotency key a job of a batch is created under: Key
// in Machine. The zero BatchKey is no key.
type BatchKey struct {
	Machine string
	Key     string
}

// BatchCreateFunc decides the creation of job i of a batch, as a
// CreateFunc decides a creation: existing is the job holding its key, nil
// when there is none (or it has no key).
type BatchCreateFunc func(ctx context.Context, i int, existing *Job) (Write, error)

// Notifier is an optional Store capability: telling waiting workers that a
// job may have become claimable, so that they need not poll. A store that
// has it signals after every write that leaves a job ready (a creation in
// a ready state, a requeue, a retry or abandon to a ready state), from any
// process sharing the store where it can (PostgreSQL's LISTEN/NOTIFY).
// Signals may be lost or spurious: a worker still polls now and then, and
// a signal only says "try a claim".
type Notifier interface {
	// Subscribe returns a channel that receives a value (without blocking
	// the store: the channel has a buffer of one and extra signals are
	// dropped) whenever a job of one of the machines (any machine when
	// none is given) may have become claimable, and a function that ends
	// the subscription and closes the channel. The subscription also ends
	// when ctx ends.
	Subscribe(ctx context.Context, machines ...string) (<-chan struct{}, func(), error)
}

// Savepointer is implemented by a store transaction that can undo part of
// itself (a SQL SAVEPOINT). A store passes one to the engine's functions
// through the context (ContextWithSavepointer); the engine then runs each
// user effect inside a savepoint, so that a failing effect's own writes
// in the transaction are undone, while the writes of effects that ran
// before it are kept with the part of the write they belong to (see
// IncompleteError).
type Savepointer interface {
	// Savepoint marks the transaction and returns a function that ends the
	// mark: keep true releases it, keep false rolls the transaction back to
	// it.
	Savepoint(ctx context.Context) (end func(keep bool) error, err error)
}

type savepointKey struct{}

// ContextWithSavepointer returns ctx carrying sp, for a store to pass to
// the engine's functions.
func ContextWithSavepointer(ctx context.Context, sp Savepointer) context.Context {
	return context.WithValue(ctx, savepointKey{}, sp)
}

// runEffect runs one user effect, inside a savepoint when the store's
// transaction offers them.
func runEffect(ctx context.Context, fx EffectFunc, job Job) error {
	sp, ok := ctx.Value(savepointKey{}).(Savepointer)
	if !ok {
		return fx(ctx, job)
	}
	end, err := sp.Savepoint(ctx)
	if err != nil {
		return err
	}
	if err := fx(ctx, job); err != nil {
		if rbErr := end(false); rbErr != nil {
			return rbErr
		}
		return err
	}
	return end(true)
}

// Lister is an optional Store capability: finding jobs by filters, in a
// stable order, a page at a time. Engine.List uses it.
type Lister interface {
	// List returns up to q.Limit jobs matching every filter of q, in the
	// order q gives, strictly after q.After when it is set. Paging by keyset
	// (the last job's sort time and id) is stable: other jobs being created
	// or moved never make a job be returned twice or skipped; ordering by
	// creation time, a job that matches the filters throughout is returned
	// exactly once. Its cost grows with the
	// page, not with the jobs stored, for the filters the store indexes
	// (machine and states, owner, key).
	List(ctx context.Context, q ListQuery) ([]Job, error)
}

// ListOrder is the time a listing is sorted by.
type ListOrder string

// The orders of a listing.
const (
	// OrderCreated sorts by CreatedAt, then ID (the default). A job's
	// place never changes, so paging is stable.
	OrderCreated ListOrder = "created"
	// OrderUpdated sorts by UpdatedAt, then ID. A job that is itself
	// written while a listing pages moves to a later place: ascending, it
	// is met again; descending, it may be passed. Other jobs' writes do
	// not move it.
	OrderUpdated ListOrder = "updated"
)

// ListQuery selects, orders and pages jobs. Zero fields do not filter.
type ListQuery struct {
	// Machine, when set, keeps the jobs of that machine.
	Machine string
	// States, Kinds and Outcomes, when non-empty, keep the jobs whose state,
	// kind or outcome is one of those listed.
	States   []State
	Kinds    []Kind
	Outcomes []Outcome
	// Owner and Key, when set, keep the jobs of that owner, or created
	// with that idempotency key.
	Owner string
	Key   string
	// Time ranges, each [From, To): a zero bound is open. A range on
	// CompletedAt keeps only finished jobs.
	CreatedFrom, CreatedTo     time.Time
	UpdatedFrom, UpdatedTo     time.Time
	CompletedFrom, CompletedTo time.Time
	// Order is the sort time (OrderCreated when empty); Desc sorts newest
	// first.
	Order ListOrder
	Desc  bool
	// After is the keyset cursor: the sort time and id of the last job of
	// the previous page. Only jobs strictly after it in the order are
	// returned. The zero value starts at the beginning.
	After ListCursor
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

// ListCursor is a position in a listing: the sort time and id of a job.
type ListCursor struct {
	At time.Time
	ID uuid.UUID
}

// MaxListLimit is the largest page a listing returns.
const MaxListLimit = 1000

// KeyLimiter is an optional Store capability: enforcing Policy.MaxPerKey,
// the most live executions a machine's jobs sharing a concurrency key may
// hold at once. A store that is one, and whose LimitsKeys reports true,
// keeps, atomically with every claim (ClaimNext, ClaimBatch, and an
// Update whose Write sets MaxPerKey), the sum of Job.Leases over the jobs
// of the claimed job's machine with its Job.ConcurrencyKey at or below
// the limit the query or the write carries:
//
//   - ClaimNext and ClaimBatch never offer a candidate with a key whose
//     live executions have reached ClaimQuery.MaxPerKey; the candidates of
//     other keys, and those without a key, are offered as usual, in claim
//     order. A key's candidates are offered in claim order too: while the
//     first of them is locked by another update (a claim in progress),
//     none of the key's later ones is offered;
//   - Update refuses, writing nothing, a Write whose MaxPerKey is above
//     zero, that raises the job's Leases, and that would take its key's
//     sum above MaxPerKey: the error CheckKeyLimit returns (ErrKeyLimit).
//
// A store that counts the sum in a transaction must make concurrent claims
// of one key take turns (a lock per key), so that two claims in different
// processes cannot both pass. The engine refuses a machine with MaxPerKey
// above zero on a store that is not a KeyLimiter; a wrapper store reports
// its inner store's answer.
type KeyLimiter interface {
	// LimitsKeys reports whether the store enforces MaxPerKey.
	LimitsKeys() bool
}

// ClaimPlanner is an optional Store capability: applying the plan a
// ClaimBatch's query carries (ClaimQuery.Plan) to the candidates it
// covers, without calling the claim function for them (see ClaimPlan).
// Engine.ClaimMany sets the plan only for a store whose AppliesClaimPlans
// reports true; a wrapper store reports its inner store's answer.
type ClaimPlanner interface {
	// AppliesClaimPlans reports whether the store applies claim plans.
	AppliesClaimPlans() bool
}

// CommitPlanner is an optional Store capability: applying a commit plan
// (see CommitPlan) instead of calling the function of Engine.Succeed.
// The engine hands Succeed to UpdatePlanned only when AppliesCommitPlans
// reports true; a wrapper store reports its inner store's answer.
type CommitPlanner interface {
	// AppliesCommitPlans reports whether the store applies commit plans.
	AppliesCommitPlans() bool
	// UpdatePlanned is Update with a plan. When the job's current
	// version is covered by p (CommitPlan.Covers), the store applies the
	// plan's write instead of calling fn, then runs effect, when it is
	// not nil, on the job as written, in the write's transaction where
	// the store has one (as the engine runs an effect, through the
	// context); an error from effect undoes the write and is returned.
	// It returns the job as written and the transitions the plan wrote.
	// Otherwise it calls fn as Update does and returns the job and nil
	// transitions. Errors as Update's.
	UpdatePlanned(ctx context.Context, id uuid.UUID, p *CommitPlan, effect EffectFunc, fn UpdateFunc) (Job, []Transition, error)
}
