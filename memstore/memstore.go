// Package memstore is the reference jobstate.Store: jobs, executions,
// history and effects held in memory, safe for concurrent use, and fast
// enough for production use within a single process.
//
// Costs: Get, Update and Create are O(1) map work plus O(log n) index
// maintenance; ClaimNext is O(log n) in the number of ready jobs of the
// machine (a heap ordered by not-before, priority, age), plus O(k log k)
// for k candidates passed over; Due is O(m log m) for m due jobs; Stale
// scans the jobs holding leases. Nothing is persisted: a process restart
// loses everything.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Store is an in-memory jobstate.Store. The zero value is not usable; call
// New.
type Store struct {
	// mu guards the maps, the indexes and every entry's data. Entries'
	// data are written only while both mu and the entry's lock are held, so
	// a holder of the entry lock may read its entry without mu.
	mu     sync.RWMutex
	jobs   map[uuid.UUID]*entry
	keys   map[keyID]*entry
	ready  map[string]*heap
	wake   *heap
	leased map[*entry]struct{}
	log    historyLog

	seed     maphash.Seed
	keyLocks [64]sync.Mutex
}

type keyID struct{ machine, key string }

// logChunk is how many transition records one chunk of the store's
// history log holds.
const logChunk = 1024

// historyLog holds every job's transition records, appended in chunks
// that are never moved: a job keeps only the positions of its records, so
// a growing history costs a few bytes per record, not a reallocation of
// the records themselves.
//
// Pruned jobs' records are cleared, and a chunk whose records are all
// cleared is released.
type historyLog struct {
	chunks [][]jobstate.Transition
	live   []int // records not yet cleared, per chunk
	n      int
}

func (l *historyLog) add(t jobstate.Transition) int {
	if l.n%logChunk == 0 {
		l.chunks = append(l.chunks, make([]jobstate.Transition, 0, logChunk))
		l.live = append(l.live, 0)
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, t)
	l.live[len(l.live)-1]++
	l.n++
	return l.n - 1
}

// clear forgets the record at pos, releasing its chunk once the chunk is
// full and holds no record still needed.
func (l *historyLog) clear(pos int) {
	ci := pos / logChunk
	l.chunks[ci][pos%logChunk] = jobstate.Transition{}
	l.live[ci]--
	if l.live[ci] == 0 && len(l.chunks[ci]) == logChunk {
		l.chunks[ci] = nil
	}
}

func (l *historyLog) at(pos int) *jobstate.Transition {
	return &l.chunks[pos/logChunk][pos%logChunk]
}

// entry is one job with everything stored beside it.
type entry struct {
	lock    sync.Mutex // held for the whole of an Update or Create
	job     jobstate.Job
	execs   []jobstate.Execution
	history []int // positions in the store's history log
	effects []jobstate.EffectRecord
	// gone is set, under lock, when the job is pruned.
	gone bool
	// leased mirrors membership of the store's leased set.
	leased bool
	// positions in the ready heap of the job's machine and the wake heap;
	// -1 when absent.
	readyAt, wakeAt int
}

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs:   make(map[uuid.UUID]*entry),
		keys:   make(map[keyID]*entry),
		ready:  make(map[string]*heap),
		wake:   newHeap(wakeKey, func(e *entry) *int { return &e.wakeAt }),
		leased: make(map[*entry]struct{}),
		seed:   maphash.MakeSeed(),
	}
}

var _ jobstate.Store = (*Store)(nil)
var _ jobstate.Counter = (*Store)(nil)
var _ jobstate.Pruner = (*Store)(nil)

// Len returns the number of jobs stored.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.jobs)
}

func (s *Store) lookup(id uuid.UUID) (*entry, error) {
	s.mu.RLock()
	e := s.jobs[id]
	s.mu.RUnlock()
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
	e := s.jobs[id]
	if e == nil {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
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
	e := s.jobs[id]
	if e == nil {
		return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
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
	e := s.jobs[id]
	if e == nil {
		return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
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
	e := s.jobs[id]
	if e == nil {
		return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
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
	for _, e := range s.jobs {
		if e.job.Machine == machine {
			out[e.job.State]++
		}
	}
	return out, nil
}

// Prune implements jobstate.Pruner. It scans every job: O(n), meant to
// run now and then.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, e := range s.jobs {
		if limit > 0 && n >= limit {
			break
		}
		if !e.job.Terminal() || !e.job.CompletedAt.Before(before) || !e.lock.TryLock() {
			continue // a locked job is being updated: it is not finished with
		}
		delete(s.jobs, id)
		if k := (keyID{e.job.Machine, e.job.IdempotencyKey}); e.job.IdempotencyKey != "" && s.keys[k] == e {
			delete(s.keys, k)
		}
		if h := s.ready[e.job.Machine]; h != nil {
			h.set(e, false)
		}
		s.wake.set(e, false)
		delete(s.leased, e)
		for _, pos := range e.history {
			s.log.clear(pos)
		}
		e.history, e.execs, e.effects = nil, nil, nil
		e.gone = true
		e.lock.Unlock()
		n++
	}
	return n, nil
}

// Create implements jobstate.Store.
func (s *Store) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, false, err
	}
	if fn == nil {
		return jobstate.Job{}, false, fmt.Errorf("%w: nil create function", jobstate.ErrInvalidArgument)
	}
	var existing *jobstate.Job
	if key != "" {
		lk := &s.keyLocks[maphash.String(s.seed, machine+"\x00"+key)%uint64(len(s.keyLocks))]
		lk.Lock()
		defer lk.Unlock()
		s.mu.RLock()
		if holder := s.keys[keyID{machine, key}]; holder != nil {
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
	if err := checkNew(w); err != nil {
		return jobstate.Job{}, false, err
	}
	e := &entry{readyAt: -1, wakeAt: -1}
	e.job = w.Job
	e.execs = append(e.execs, w.Executions...)
	e.effects = append(e.effects, w.Effects...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.jobs[w.Job.ID]; dup {
		return jobstate.Job{}, false, fmt.Errorf("%w: %s", jobstate.ErrDuplicateJob, w.Job.ID)
	}
	s.jobs[w.Job.ID] = e
	s.record(e, w.Transitions)
	if key != "" {
		s.keys[keyID{machine, key}] = e
	}
	s.reindex(e)
	return e.job, true, nil
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
	e, err := s.lookup(id)
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

// record appends recs to e's history. Caller holds mu.
func (s *Store) record(e *entry, recs []jobstate.Transition) {
	for _, t := range recs {
		e.history = append(e.history, s.log.add(t))
	}
}

// reindex puts e where its job belongs in the ready heap, the wake heap
// and the leased set. Caller holds mu.
func (s *Store) reindex(e *entry) {
	ready := e.job.Kind == jobstate.KindReady
	if ready || e.readyAt >= 0 {
		h := s.ready[e.job.Machine]
		if h == nil {
			h = newHeap(readyKey, func(e *entry) *int { return &e.readyAt })
			s.ready[e.job.Machine] = h
		}
		h.set(e, ready)
	}
	s.wake.set(e, !e.job.WakeAt.IsZero())
	if leased := e.job.Leases > 0; leased != e.leased {
		if leased {
			s.leased[e] = struct{}{}
		} else {
			delete(s.leased, e)
		}
		e.leased = leased
	}
}

// ClaimNext implements jobstate.Store.
func (s *Store) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	var passed map[*entry]bool // made on the first skip
	for offers := 0; q.Limit <= 0 || offers < q.Limit; offers++ {
		if err := ctx.Err(); err != nil {
			return jobstate.Job{}, err
		}
		e := s.nextCandidate(q, passed)
		if e == nil {
			break
		}
		// e.lock is held.
		job, err := s.run(ctx, e, fn)
		e.lock.Unlock()
		if err == nil {
			return job, nil
		}
		if !errors.Is(err, jobstate.ErrSkip) {
			return jobstate.Job{}, err
		}
		if passed == nil {
			passed = make(map[*entry]bool)
		}
		passed[e] = true
	}
	return jobstate.Job{}, fmt.Errorf("%w: machine %q", jobstate.ErrNoJob, q.Machine)
}

// nextCandidate returns, locked, the first due ready job of q.Machine in
// claim order that is not in passed and not locked by another update.
func (s *Store) nextCandidate(q jobstate.ClaimQuery, passed map[*entry]bool) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.ready[q.Machine]
	if h == nil {
		return nil
	}
	var found *entry
	h.walk(func(e *entry) bool {
		if e.job.NotBefore.After(q.Now) {
			return false // claim order puts every later job later still
		}
		if passed[e] || !e.lock.TryLock() {
			return true
		}
		found = e
		return false
	}, func(e *entry) bool { return !e.job.NotBefore.After(q.Now) })
	return found
}

// Due implements jobstate.Store.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]uuid.UUID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []uuid.UUID
	s.wake.walk(func(e *entry) bool {
		if limit > 0 && len(out) >= limit {
			return false
		}
		out = append(out, e.job.ID)
		return true
	}, func(e *entry) bool { return !e.job.WakeAt.After(now) })
	return out, nil
}

// Stale implements jobstate.Store.
func (s *Store) Stale(ctx context.Context, machine string, before time.Time, limit int) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	var out []jobstate.Job
	for e := range s.leased {
		if (machine == "" || e.job.Machine == machine) && e.job.HeartbeatAt.Before(before) {
			out = append(out, e.job)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].HeartbeatAt.Equal(out[j].HeartbeatAt) {
			return out[i].HeartbeatAt.Before(out[j].HeartbeatAt)
		}
		return out[i].ID.String() < out[j].ID.String()
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
