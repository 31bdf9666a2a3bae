// Package memstore is the reference jobstate.Store: jobs, their
// executions, history and effects held in memory, safe for concurrent
// use, for tests and single-process services. Nothing is persisted: a
// process restart loses everything.
//
// One lock guards every job's data and every index; it is held while a
// write is applied or a read copies out, never while the engine's function
// runs. Each job also has a lock of its own, held while a function decides
// the job's next version, and each idempotency key in use has one too, so
// that a function holds up no other job and no other key. The indexes are
// ordered trees (github.com/google/btree) kept beside the jobs: claim
// order per machine, wake times, heartbeats of leased jobs, completion
// times and, from the first List on, states by creation and by update
// time, owners and keys.
//
// Costs, for n jobs stored:
//
//   - Get, Executions, History, Effects: a map look-up and a copy of what
//     is returned. Count: a copy of the machine's counts per state.
//   - Create and Update: a map operation, the function, and a logarithmic
//     update of each index whose key changed.
//   - ClaimNext: logarithmic in the machine's ready jobs, plus a
//     logarithmic move for each job that became due since the machine's
//     last claim (each job moves once), plus one step per candidate passed
//     over (skipped by the function, locked by an update, or not due at a
//     claim time earlier than one seen before).
//   - Due: logarithmic per machine asked for, plus up to the limit of due
//     jobs from each. Stale: the leased jobs, of every machine, whose
//     heartbeat is before the time given.
//   - List: see Store.List. The first List indexes every job, holding the
//     store's lock meanwhile; from then on every write also keeps the
//     listing indexes.
//   - Prune: logarithmic per job deleted, oldest completion first, in
//     batches between which the store's lock is released. Trees give back
//     their nodes as they empty, and Prune rebuilds the maps once they
//     hold a quarter of what they held at most, so
//     that memory follows the jobs stored, up and down.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/btree"
	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Store is an in-memory jobstate.Store. The zero value is not usable; call
// New.
type Store struct {
	// mu guards the maps, the indexes and the entries. An entry's job,
	// executions, effects, history and gone flag are written only by a
	// holder of both mu and the entry's lock, so a holder of either may
	// read them; its places in the indexes are mu's alone. No function of
	// the engine runs while mu is held.
	mu       sync.Mutex
	jobs     map[uuid.UUID]*entry
	keys     map[keyID]*entry // the job holding each key
	machines map[string]*machine
	done     *btree.BTreeG[item] // terminal jobs, by completion time
	leased   *btree.BTreeG[item] // jobs holding leases, by heartbeat
	// The listing indexes, kept from the first List on (listing): these
	// two, and the machines' indexes by state.
	owners  *btree.BTreeG[groupItem] // jobs with an owner, by owner, then creation time
	keyed   *btree.BTreeG[groupItem] // jobs created with a key, by key, then creation time
	listing bool
	// peakJobs and peakKeys are the most entries the maps have held since
	// they were made: Prune rebuilds a map that has shrunk well below.
	peakJobs, peakKeys int

	keyLocks keyLocks
	subs     subscriptions

	// testBetweenBatches, when set by a test, is called between the
	// batches of a Prune, with no lock held.
	testBetweenBatches func()
}

// entry is one job with everything stored beside it.
type entry struct {
	// lock is held while a function decides the job's next version and
	// the write is applied (Update, ClaimNext, ClaimBatch).
	lock sync.Mutex

	job     jobstate.Job
	execs   []jobstate.Execution
	effects []jobstate.EffectRecord
	history []jobstate.Transition
	// gone is set when the job is pruned.
	gone bool
	// key is the key the job took when it was created, if any; it holds
	// it while Store.keys says so.
	key keyID
	// available says which claim tree holds the job while it is ready.
	available bool
}

// historyRoom is the room a new job's history starts with: a short
// lifecycle (created, claimed, finished, and one more) in one allocation.
const historyRoom = 4

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs:     make(map[uuid.UUID]*entry),
		keys:     make(map[keyID]*entry),
		machines: make(map[string]*machine),
		done:     newTree(),
		leased:   newTree(),
		owners:   newGroupTree(),
		keyed:    newGroupTree(),
	}
}

var (
	_ jobstate.Store        = (*Store)(nil)
	_ jobstate.Counter      = (*Store)(nil)
	_ jobstate.Pruner       = (*Store)(nil)
	_ jobstate.Lister       = (*Store)(nil)
	_ jobstate.BatchClaimer = (*Store)(nil)
	_ jobstate.BatchCreator = (*Store)(nil)
	_ jobstate.Notifier     = (*Store)(nil)
)

// entry returns the entry of the job id names, which an index holds.
// Caller holds mu.
func (s *Store) entry(id jobID) *entry { return s.jobs[id.uuid()] }

// Len returns the number of jobs stored.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// read calls fn with the entry of id under the store's lock, or
// returns ErrNotFound.
func (s *Store) read(ctx context.Context, id uuid.UUID, fn func(e *entry)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.jobs[id]
	if e == nil {
		return fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	fn(e)
	return nil
}

// Get implements jobstate.Store.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	var j jobstate.Job
	err := s.read(ctx, id, func(e *entry) { j = e.job })
	return j, err
}

// Executions implements jobstate.Store.
func (s *Store) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	var out []jobstate.Execution
	err := s.read(ctx, id, func(e *entry) { out = slices.Clone(e.execs) })
	return out, err
}

// History implements jobstate.Store.
func (s *Store) History(ctx context.Context, id uuid.UUID) ([]jobstate.Transition, error) {
	var out []jobstate.Transition
	err := s.read(ctx, id, func(e *entry) { out = slices.Clone(e.history) })
	return out, err
}

// Effects implements jobstate.Store.
func (s *Store) Effects(ctx context.Context, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	var out []jobstate.EffectRecord
	err := s.read(ctx, id, func(e *entry) { out = slices.Clone(e.effects) })
	return out, err
}

// Count implements jobstate.Counter, from counts kept per machine and
// state.
func (s *Store) Count(ctx context.Context, machine string) (map[jobstate.State]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.machines[machine]; m != nil {
		return maps.Clone(m.counts), nil
	}
	return map[jobstate.State]int{}, nil
}

// Create implements jobstate.Store. With a key, fn runs under that key's
// lock alone. Everything that could refuse the creation, but the
// constraints on the Write itself, is checked before fn is called.
func (s *Store) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, false, err
	}
	if fn == nil {
		return jobstate.Job{}, false, fmt.Errorf("%w: nil create function", jobstate.ErrInvalidArgument)
	}
	var k keyID
	if key != "" {
		k = keyID{machine: machine, key: key}
		l := s.keyLocks.lock(k)
		defer s.keyLocks.unlock(k, l)
	}
	c, err := s.createHeld(ctx, k, fn)
	return c.Job, err == nil && !c.Existing, err
}

// createHeld is one creation under k, whose lock the caller holds (the
// zero k: no key): fn is called with k's holder and its new job inserted,
// taking k over; a zero Write keeps the holder.
func (s *Store) createHeld(ctx context.Context, k keyID, fn jobstate.CreateFunc) (jobstate.Created, error) {
	var existing *jobstate.Job
	if k != (keyID{}) {
		s.mu.Lock()
		if holder := s.keys[k]; holder != nil {
			j := holder.job
			existing = &j
		}
		s.mu.Unlock()
	}
	w, err := fn(ctx, existing)
	if err != nil {
		return jobstate.Created{}, err
	}
	kept, err := jobstate.KeepsHolder(w, existing)
	if err != nil {
		return jobstate.Created{}, err
	}
	if kept {
		return jobstate.Created{Job: *existing, Existing: true}, nil
	}
	j, err := s.insert(&w, k)
	if err != nil {
		return jobstate.Created{}, err
	}
	return jobstate.Created{Job: j}, nil
}

// CreateBatch implements jobstate.BatchCreator. Every key of the batch is
// locked first (sorted by machine, then key, the one order every batch
// takes them in) and held to the end. Having no transactions, it stores each job as its function
// returns (the creation effects the function ran cannot be undone), so
// that with an error the results decided before it are returned beside
// it, and those not Existing are exactly the jobs created. Functions run
// with no lock of the store held but the keys'.
func (s *Store) CreateBatch(ctx context.Context, keys []jobstate.BatchKey, fn jobstate.BatchCreateFunc) ([]jobstate.Created, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: create batch: nil function", jobstate.ErrInvalidArgument)
	}
	held, err := batchKeys(keys)
	if err != nil {
		return nil, err
	}
	for _, k := range held {
		l := s.keyLocks.lock(k)
		defer s.keyLocks.unlock(k, l)
	}
	var out []jobstate.Created
	for i, bk := range keys {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var k keyID
		if bk.Key != "" {
			k = keyID{machine: bk.Machine, key: bk.Key}
		}
		c, err := s.createHeld(ctx, k, func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
			return fn(ctx, i, existing)
		})
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// batchKeys returns the distinct keys of a batch in the order they are
// taken (by machine, then key), or ErrInvalidArgument for a key without
// a machine.
func batchKeys(keys []jobstate.BatchKey) ([]keyID, error) {
	seen := map[keyID]bool{}
	var out []keyID
	for i, bk := range keys {
		if bk.Key == "" {
			continue
		}
		if bk.Machine == "" {
			return nil, fmt.Errorf("%w: create batch: job %d has a key and no machine", jobstate.ErrInvalidArgument, i)
		}
		k := keyID{machine: bk.Machine, key: bk.Key}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b keyID) int {
		if c := strings.Compare(a.machine, b.machine); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out, nil
}

// insert checks and stores the new job of w, which takes key k over
// unless k is zero, and returns the job as stored.
func (s *Store) insert(w *jobstate.Write, k keyID) (jobstate.Job, error) {
	if err := jobstate.CheckNew(*w); err != nil {
		return jobstate.Job{}, err
	}
	e := &entry{
		job:     w.Job,
		effects: slices.Clone(w.Effects),
		history: append(make([]jobstate.Transition, 0, max(historyRoom, len(w.Transitions))), w.Transitions...),
		execs:   slices.Clone(w.Executions),
		key:     k,
	}
	s.mu.Lock()
	if s.jobs[e.job.ID] != nil {
		s.mu.Unlock()
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrDuplicateJob, e.job.ID)
	}
	s.jobs[e.job.ID] = e
	s.peakJobs = max(s.peakJobs, len(s.jobs))
	if k != (keyID{}) {
		s.keys[k] = e
		s.peakKeys = max(s.peakKeys, len(s.keys))
	}
	s.reindex(e, nil, &e.job)
	// Once mu is released a claim may change the entry: what is returned
	// is copied before.
	j := e.job
	s.mu.Unlock()
	if becameReady(nil, &j) {
		s.signal(j.Machine)
	}
	return j, nil
}

// Update implements jobstate.Store.
func (s *Store) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil update function", jobstate.ErrInvalidArgument)
	}
	s.mu.Lock()
	e := s.jobs[id]
	s.mu.Unlock()
	if e == nil {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	e.lock.Lock()
	defer e.lock.Unlock()
	return s.run(ctx, e, fn)
}

// run calls fn on e, whose lock the caller holds, and applies the Write
// it returns, unless the contract refuses it (jobstate.CheckWrite).
func (s *Store) run(ctx context.Context, e *entry, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	// e's data change only under e.lock, which the caller holds: they are
	// read here without mu.
	if e.gone {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, e.job.ID)
	}
	cur := jobstate.Snapshot{Job: e.job, Executions: e.execs, Effects: e.effects}
	w, err := fn(ctx, cur)
	if err != nil {
		return jobstate.Job{}, err
	}
	unchanged := w.Job.ID == cur.Job.ID && w.Job.Version == cur.Job.Version &&
		len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0
	if unchanged {
		return e.job, nil
	}
	if err := jobstate.CheckWrite(cur, w); err != nil {
		return jobstate.Job{}, err
	}
	s.mu.Lock()
	if err := s.checkKeyLimit(&cur.Job, &w); err != nil {
		s.mu.Unlock()
		return jobstate.Job{}, err
	}
	old := e.job
	e.job = w.Job
	e.history = append(e.history, w.Transitions...)
	for _, x := range w.Executions {
		if i := slices.IndexFunc(e.execs, func(y jobstate.Execution) bool { return y.ID == x.ID }); i >= 0 {
			e.execs[i] = x
		} else {
			e.execs = append(e.execs, x)
		}
	}
	e.effects = append(e.effects, w.Effects...)
	s.reindex(e, &old, &e.job)
	s.mu.Unlock()
	if becameReady(&old, &e.job) {
		s.signal(e.job.Machine)
	}
	return e.job, nil
}
