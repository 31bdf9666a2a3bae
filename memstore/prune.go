package memstore

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// pruneBatch bounds how many jobs one hold of the store's lock deletes (or
// how many map entries it moves): about a millisecond of work, after which
// the lock is released so that other operations go ahead.
const pruneBatch = 1000

// Prune implements jobstate.Pruner. It deletes the oldest finished jobs
// first, taking them from a queue of terminal jobs by completion time: its
// cost is O(log n) per job deleted, however many jobs are stored, in
// batches of pruneBatch between which the store's lock is released. Then
// it compacts the history log, up to pruneBatch records per batch; once
// the store has shrunk to a quarter of its peak, it rebuilds its maps at
// their new size, pruneBatch entries per batch; and it reallocates the
// arrays of heaps that have shrunk to a quarter of their room, one per
// hold of the lock. Those copies are paid for by the deletions that
// preceded them. A job being updated while Prune runs is left for a later
// call.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cut := tk(before)
	n := 0
	var busy []*entry
	var err error
	for more := true; more; {
		if err = ctx.Err(); err != nil {
			break
		}
		s.mu.Lock()
		more = s.pruneBatch(cut, limit, &n, &busy)
		if !more {
			more = s.log.compact(pruneBatch, s.owner)
		}
		s.mu.Unlock()
		s.betweenBatches()
	}
	if len(busy) > 0 {
		// Locked jobs go back to the terminal queue for a later call.
		s.mu.Lock()
		for _, e := range busy {
			if !e.gone {
				s.done.set(e)
			}
		}
		s.mu.Unlock()
	}
	if err == nil {
		err = s.shrinkMaps(ctx)
	}
	if err == nil {
		s.shrinkArrays()
	}
	return n, err
}

// pruneBatch deletes up to pruneBatch terminal jobs completed before cut,
// oldest first, adding to n, and reports whether more may remain. A job
// whose lock is held is taken out of the queue and added to busy. Caller
// holds mu for writing.
func (s *Store) pruneBatch(cut tkey, limit int, n *int, busy *[]*entry) bool {
	for work := 0; work < pruneBatch; work++ {
		if limit > 0 && *n >= limit {
			return false
		}
		e := s.done.popBefore(cut)
		if e == nil {
			return false
		}
		if !e.lock.TryLock() {
			*busy = append(*busy, e) // being updated: not finished with
			continue
		}
		s.drop(e)
		e.lock.Unlock()
		*n++
	}
	return true
}

// drop deletes e with everything stored beside it. Caller holds mu for
// writing and e's lock.
func (s *Store) drop(e *entry) {
	s.jobs.del(e.job.ID)
	if e.key != nil {
		if h, _ := s.keys.get(*e.key); h == e {
			s.keys.del(*e.key)
		}
	}
	m := e.m
	m.scheduled.set(e, false)
	m.available.set(e, false)
	if e.wakeIn {
		m.wake.remove(e)
	}
	s.done.forget(e)
	s.leased.set(e, false)
	s.unlist(e)
	s.log.clearAll(e)
	e.execs, e.effects = nil, nil
	e.gone = true
}

// shrinkMaps rebuilds the job and key maps at their size once they have
// shrunk well below their peak, pruneBatch entries per hold of the lock.
// The new maps are made without the lock.
func (s *Store) shrinkMaps(ctx context.Context) error {
	s.mu.RLock()
	jobs, keys := s.jobs.wasteful(), s.keys.wasteful()
	nj, nk := s.jobs.len(), s.keys.len()
	s.mu.RUnlock()
	var freshJobs map[uuid.UUID]*entry
	var freshKeys map[keyID]*entry
	if jobs {
		freshJobs = make(map[uuid.UUID]*entry, nj)
	}
	if keys {
		freshKeys = make(map[keyID]*entry, nk)
	}
	for first := true; ; first = false {
		if err := ctx.Err(); err != nil {
			return err // a rebuild under way goes on at the next call
		}
		s.mu.Lock()
		if first && jobs && s.jobs.wasteful() {
			s.jobs.rebuild(freshJobs)
		}
		if first && keys && s.keys.wasteful() {
			s.keys.rebuild(freshKeys)
		}
		more := s.jobs.migrate(pruneBatch)
		more = s.keys.migrate(pruneBatch) || more
		s.mu.Unlock()
		s.betweenBatches()
		if !more {
			return nil
		}
	}
}

// shrinkArrays gives back the room of the heaps' arrays that have fallen
// to a quarter of their capacity, one array per hold of the lock.
func (s *Store) shrinkArrays() {
	s.mu.RLock()
	heaps := []*heap{s.leased}
	for _, m := range s.machines {
		heaps = append(heaps, m.scheduled, m.available)
	}
	s.mu.RUnlock()
	shrinkArray(&s.mu, &s.done.items)
	for _, h := range heaps {
		shrinkArray(&s.mu, &h.items)
	}
}

// shrinkArray moves *arr, guarded by mu, to an array of twice its length
// if it has fallen to a quarter of its capacity: a copy paid for by the
// removals that emptied three quarters of its room. The new array is made,
// and its memory touched, without the lock, so that the lock is held for
// the copy alone.
func shrinkArray[T any](mu *storeLock, arr *[]T) {
	mu.RLock()
	n, c := len(*arr), cap(*arr)
	mu.RUnlock()
	if c <= minHeapCap || n > c/4 {
		return
	}
	buf := make([]T, max(2*n, minHeapCap))
	clear(buf) // fault its pages in here
	mu.Lock()
	if len(*arr) <= len(buf) {
		*arr = append(buf[:0], *arr...)
	}
	mu.Unlock()
}

// owner returns the entry of a stored job. Caller holds mu.
func (s *Store) owner(id uuid.UUID) *entry {
	e, _ := s.jobs.get(id)
	return e
}

// betweenBatches calls the test hook, if any, while no lock is held.
func (s *Store) betweenBatches() {
	if s.testBetweenBatches != nil {
		s.testBetweenBatches()
	}
}
