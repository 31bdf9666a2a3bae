// Package memstore is the reference jobstate.Store: jobs, executions,
// history and effects held in memory, safe for concurrent use, and fast
// enough for production use within a single process.
//
// Costs, for n jobs stored:
//
//   - Get, Executions, History and Effects: one map look-up and a copy of
//     what is returned.
//   - Create and Update: one map operation, the function, amortised O(1)
//     per history record appended, and O(log n) for each index whose key
//     changed: the claim heaps of the job's machine, the machine's wake
//     index (a treap: O(log n) expected), the terminal queue and the
//     leased heap. A Create with a key locks that key only.
//   - ClaimNext: O(log r) in the machine's r ready jobs, plus O(log r) per
//     job that became due since the previous claim (moved once, 1,000 per
//     hold of the store's lock), plus O(k log k) for k jobs passed over
//     (skipped by the function, locked by an update, or not yet due at a
//     claim time earlier than one seen before).
//   - Due: O(m log n) to find the cursor in the m machines asked for, then
//     O(log n + log m) per job returned; jobs not due, and other machines'
//     jobs, are not looked at.
//   - Stale: O(k log k) for the k leased jobs (of any machine) whose
//     heartbeat is before the time given; other leased jobs are not looked
//     at.
//   - Prune: O(log n) per job deleted, oldest completion first, in batches
//     of 1,000 jobs between which the store's lock is released, plus the
//     compaction of the history log and the rebuilding of the maps, which
//     are paid for by earlier deletions and done in batches too.
//   - Count: O(n), a scan of every job.
//   - List: O(s log n) to start in the s state indexes it walks, then O(s)
//     per job looked at; the jobs an unindexed filter passes over count
//     (see Store.List). The first List builds the listing indexes (O(n log
//     n), under the store's lock); from then on every Create and Update
//     also pays two to four O(log n) index updates.
//
// Memory follows the jobs stored, up and down: once Prune returns, the
// maps hold at most four times the room their entries need, the heaps'
// arrays at most four times, and the history log's chunks at most twice,
// plus one chunk of 1,024 records and one spare chunk kept for reuse (and
// 16 bytes per chunk at the peak).
//
// Nothing is persisted: a process restart loses everything.
package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Store is an in-memory jobstate.Store. The zero value is not usable; call
// New.
type Store struct {
	// mu guards the maps, the indexes, the history log and every entry's
	// data. Entries' job, executions and effects are written only while
	// both mu and the entry's lock are held, so a holder of the entry lock
	// may read them without mu. Functions run with neither mu nor any lock
	// but their own job's (or key's) held.
	mu       storeLock
	jobs     smap[uuid.UUID, *entry]
	keys     smap[keyID, *entry]
	machines map[string]*machine
	done     doneQueue // terminal jobs, by completion time
	leased   *heap     // jobs holding leases, by heartbeat
	log      historyLog
	lists    listIndex // the listing indexes but the per-machine ones
	// listing says the listing indexes are kept: from the first List on.
	listing bool

	keyLocks keyLocks
	subs     subscriptions

	// testBetweenBatches, when set by a test, is called between the
	// batches of a Prune, with no lock held.
	testBetweenBatches func()
}

// entry is one job with everything stored beside it.
type entry struct {
	lock sync.Mutex // held for the whole of an Update or Create
	// gone is set, under lock and mu, when the job is pruned.
	gone bool
	// wakeIn says the entry is in its machine's wake index.
	wakeIn bool
	// doneIn, doneSeq and doneS, doneNs are the entry's current item in
	// the terminal queue: whether there is one, its sequence number and its
	// completion time (as in tkey).
	doneIn  bool
	doneSeq uint32
	doneS   int64
	doneNs  int32
	// Positions in the scheduled or available heap of the machine and the
	// leased heap; -1 when absent.
	schedAt, availAt, leaseAt int32
	// key is the key the job took over when it was created, if any.
	key *keyID
	m   *machine
	wk  wakeNode
	// list is where the entry is in the listing indexes, made by the
	// first relist: nil in a store never listed, which keeps an entry
	// within 1,024 bytes.
	list    *listed
	history []int // positions in the history log
	job     jobstate.Job
	execs   []jobstate.Execution
	effects []jobstate.EffectRecord
	// exec1 backs execs while the job has one execution (most jobs), so
	// that the first claim allocates nothing for it.
	exec1 [1]jobstate.Execution
}

// newEntry returns an entry in no index, its machine not set yet.
func newEntry() *entry {
	e := &entry{schedAt: -1, availAt: -1, leaseAt: -1, wk: wakeNode{prio: rand.Uint32()}}
	e.execs = e.exec1[:0:1]
	return e
}

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs:     newSmap[uuid.UUID, *entry](),
		keys:     newSmap[keyID, *entry](),
		machines: make(map[string]*machine),
		leased:   newHeap(leaseKey, func(e *entry) *int32 { return &e.leaseAt }),
		log:      newHistoryLog(),
		lists:    newListIndex(),
	}
}

var _ jobstate.Store = (*Store)(nil)
var _ jobstate.Counter = (*Store)(nil)
var _ jobstate.Pruner = (*Store)(nil)
var _ jobstate.Lister = (*Store)(nil)

// Len returns the number of jobs stored.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.jobs.len()
}

// read returns the entry of id, or ErrNotFound. Caller holds mu.
func (s *Store) read(id uuid.UUID) (*entry, error) {
	e, _ := s.jobs.get(id)
	if e == nil {
		return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	return e, nil
}

// Get implements jobstate.Store.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, err := s.read(id)
	if err != nil {
		return jobstate.Job{}, err
	}
	return e.job, nil
}

// Executions implements jobstate.Store.
func (s *Store) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, err := s.read(id)
	if err != nil {
		return nil, err
	}
	return append([]jobstate.Execution(nil), e.execs...), nil
}

// History implements jobstate.Store.
func (s *Store) History(ctx context.Context, id uuid.UUID) ([]jobstate.Transition, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, err := s.read(id)
	if err != nil {
		return nil, err
	}
	out := make([]jobstate.Transition, len(e.history))
	for i, pos := range e.history {
		out[i] = *s.log.at(pos)
	}
	return out, nil
}

// Effects implements jobstate.Store.
func (s *Store) Effects(ctx context.Context, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, err := s.read(id)
	if err != nil {
		return nil, err
	}
	return append([]jobstate.EffectRecord(nil), e.effects...), nil
}

// Count implements jobstate.Counter. It scans every job: O(n), meant for
// metrics scraped now and then, not for hot paths.
func (s *Store) Count(ctx context.Context, machine string) (map[jobstate.State]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[jobstate.State]int)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.jobs.each(func(_ uuid.UUID, e *entry) {
		if e.job.Machine == machine {
			out[e.job.State]++
		}
	})
	return out, nil
}

// Stale implements jobstate.Store.
func (s *Store) Stale(ctx context.Context, machine string, before time.Time, limit int) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cut := tk(before)
	var out []jobstate.Job
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.leased.walk(func(it *item) bool {
		if machine == "" || it.e.job.Machine == machine {
			out = append(out, it.e.job)
		}
		return limit <= 0 || len(out) < limit
	}, func(it *item) bool { return it.t1.cmp(cut) < 0 })
	return out, nil
}

// Create implements jobstate.Store. Everything that could refuse the
// creation, but the constraints on the Write itself, is checked before fn
// is called.
func (s *Store) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, false, err
	}
	if fn == nil {
		return jobstate.Job{}, false, fmt.Errorf("%w: nil create function", jobstate.ErrInvalidArgument)
	}
	var existing *jobstate.Job
	var kp *keyID
	if key != "" {
		k := keyID{machine, key}
		kp = &k
		l := s.keyLocks.lock(k)
		defer s.keyLocks.unlock(k, l)
		s.mu.RLock()
		if holder, _ := s.keys.get(k); holder != nil {
			j := holder.job
			existing = &j
		}
		s.mu.RUnlock()
	}
	w, err := fn(ctx, existing)
	if err != nil {
		return jobstate.Job{}, false, err
	}
	if w == nil {
		if existing == nil {
			return jobstate.Job{}, false, fmt.Errorf("%w: create function returned no job and there is none to keep", jobstate.ErrInvalidArgument)
		}
		return *existing, false, nil
	}
	j, err := s.insert(w, kp)
	if err != nil {
		return jobstate.Job{}, false, err
	}
	return j, true, nil
}

// insert checks and stores the new job of w, holding key k when not nil,
// and returns it as stored.
func (s *Store) insert(w *jobstate.Write, k *keyID) (jobstate.Job, error) {
	if err := checkNew(w); err != nil {
		return jobstate.Job{}, err
	}
	// The entry, with room for its history, is built before the store's
	// lock is taken: every write of every job holds that lock, and this is
	// a third of what a creation would do under it. Nobody sees the entry
	// before it is in the map.
	e := newEntry()
	e.job = w.Job
	e.execs = append(e.execs, w.Executions...)
	e.effects = append(e.effects, w.Effects...)
	e.history = make([]int, 0, max(historyRoom, len(w.Transitions)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if dup, _ := s.jobs.get(w.Job.ID); dup != nil {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrDuplicateJob, w.Job.ID)
	}
	m := s.machines[w.Job.Machine]
	if m == nil {
		m = newMachine()
		s.machines[w.Job.Machine] = m
	}
	e.m = m
	s.jobs.put(w.Job.ID, e)
	s.record(e, w.Transitions)
	if k != nil {
		e.key = k
		s.keys.put(*k, e)
	}
	s.reindex(e)
	if becameReady(nil, &e.job) {
		s.signal(e.job.Machine)
	}
	return e.job, nil
}

// checkNew checks a write that creates a job.
func checkNew(w *jobstate.Write) error {
	if w.Job.ID == uuid.Nil {
		return fmt.Errorf("%w: new job has no id", jobstate.ErrInvalidArgument)
	}
	if w.Job.Version < 1 {
		return fmt.Errorf("%w: new job %s has version %d", jobstate.ErrVersionConflict, w.Job.ID, w.Job.Version)
	}
	return checkWrite(&jobstate.Job{ID: w.Job.ID}, nil, nil, w)
}

// Update implements jobstate.Store.
func (s *Store) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil update function", jobstate.ErrInvalidArgument)
	}
	s.mu.RLock()
	e, err := s.read(id)
	s.mu.RUnlock()
	if err != nil {
		return jobstate.Job{}, err
	}
	e.lock.Lock()
	defer e.lock.Unlock()
	return s.run(ctx, e, fn)
}

// run calls fn on e, whose lock the caller holds, and applies its write.
func (s *Store) run(ctx context.Context, e *entry, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	// e's data change only under e.lock, which we hold: no need for mu.
	if e.gone {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, e.job.ID)
	}
	w, err := fn(ctx, jobstate.Snapshot{Job: e.job, Executions: e.execs, Effects: e.effects})
	if err != nil {
		return jobstate.Job{}, err
	}
	if w.Job.ID != e.job.ID {
		return jobstate.Job{}, fmt.Errorf("%w: write for job %s applied to job %s", jobstate.ErrInvalidArgument, w.Job.ID, e.job.ID)
	}
	if w.Job.Version == e.job.Version && len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
		return e.job, nil
	}
	if err := checkWrite(&e.job, e.execs, e.effects, &w); err != nil {
		return jobstate.Job{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if becameReady(&e.job, &w.Job) {
		s.signal(w.Job.Machine)
	}
	e.job = w.Job
	s.record(e, w.Transitions)
	for _, x := range w.Executions {
		if i := execIndex(e.execs, x.ID); i >= 0 {
			e.execs[i] = x
		} else {
			e.execs = append(e.execs, x)
		}
	}
	e.effects = append(e.effects, w.Effects...)
	s.reindex(e)
	return e.job, nil
}

// checkWrite enforces the store's constraints on w against the current
// job, executions and effects.
func checkWrite(cur *jobstate.Job, execs []jobstate.Execution, effects []jobstate.EffectRecord, w *jobstate.Write) error {
	if w.Job.Version <= cur.Version {
		return fmt.Errorf("%w: job %s: write of version %d over version %d", jobstate.ErrVersionConflict, cur.ID, w.Job.Version, cur.Version)
	}
	last := cur.Version
	for _, t := range w.Transitions {
		if t.JobID != cur.ID {
			return fmt.Errorf("%w: transition for job %s in a write for job %s", jobstate.ErrInvalidArgument, t.JobID, cur.ID)
		}
		if t.Version <= last || t.Version > w.Job.Version {
			return fmt.Errorf("%w: job %s: transition version %d outside (%d, %d]", jobstate.ErrVersionConflict, cur.ID, t.Version, last, w.Job.Version)
		}
		last = t.Version
	}
	committed := uuid.Nil
	note := func(x *jobstate.Execution) error {
		if x.Status != jobstate.ExecCommitted && x.Status != jobstate.ExecDone {
			return nil
		}
		if committed != uuid.Nil && committed != x.ID {
			return &jobstate.CommitError{JobID: cur.ID, ExecID: x.ID, Winner: committed}
		}
		committed = x.ID
		return nil
	}
	for i := range execs {
		if execIndex(w.Executions, execs[i].ID) < 0 {
			if err := note(&execs[i]); err != nil {
				return err
			}
		}
	}
	for i := range w.Executions {
		x := &w.Executions[i]
		if x.JobID != cur.ID {
			return fmt.Errorf("%w: execution %s of job %s in a write for job %s", jobstate.ErrInvalidArgument, x.ID, x.JobID, cur.ID)
		}
		if x.ID == uuid.Nil {
			return fmt.Errorf("%w: execution without id", jobstate.ErrInvalidArgument)
		}
		if err := note(x); err != nil {
			return err
		}
	}
	for i, ef := range w.Effects {
		dup := false
		for _, old := range effects {
			dup = dup || old.Name == ef.Name
		}
		for _, other := range w.Effects[:i] {
			dup = dup || other.Name == ef.Name
		}
		if dup {
			return fmt.Errorf("%w: job %s: effect %q", jobstate.ErrEffectApplied, cur.ID, ef.Name)
		}
	}
	return nil
}

func execIndex(list []jobstate.Execution, id uuid.UUID) int {
	for i := range list {
		if list[i].ID == id {
			return i
		}
	}
	return -1
}

// record appends recs to e's history. Caller holds mu for writing.
func (s *Store) record(e *entry, recs []jobstate.Transition) {
	for i := range recs {
		s.log.add(e, &recs[i])
	}
}
