package memstore

import (
	"context"
	"time"
)

// pruneBatch bounds how many jobs one hold of the store's lock deletes,
// after which the lock is released so that other operations go ahead.
const pruneBatch = 1000

// minRebuild is the size below which a map is never rebuilt: a small
// map's room is not worth the copy.
const minRebuild = 4096

// Prune implements jobstate.Pruner. It takes the terminal jobs from the
// index by completion time, oldest first, in batches of pruneBatch
// between which the store's lock is released: its cost is logarithmic per
// job deleted, however many jobs are stored. A job being updated while
// Prune runs is left for a later call. Then it rebuilds the maps that
// hold a quarter of what they held at most, at their new size.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	// cursor is the last job looked at: each batch starts after it, so
	// that jobs left because they were locked are not looked at again.
	cursor := item{at: beforeAll}
	var err error
	for more := true; more; {
		if err = ctx.Err(); err != nil {
			break
		}
		s.mu.Lock()
		more = s.pruneBatch(instantOf(before), limit, &n, &cursor)
		s.mu.Unlock()
		s.betweenBatches()
	}
	s.mu.Lock()
	s.shrink()
	s.mu.Unlock()
	return n, err
}

// pruneBatch deletes up to pruneBatch terminal jobs completed before cut,
// oldest first from after the cursor, adding them to n, and reports
// whether more may remain. Caller holds mu.
func (s *Store) pruneBatch(cut instant, limit int, n *int, cursor *item) bool {
	want := pruneBatch
	if limit > 0 {
		want = min(want, limit-*n)
	}
	var batch []item
	s.done.AscendGreaterOrEqual(*cursor, func(it item) bool {
		if it.at.compare(cut) >= 0 || len(batch) == want {
			return false
		}
		if compareItems(it, *cursor) > 0 {
			batch = append(batch, it)
		}
		return true
	})
	for _, it := range batch {
		*cursor = it
		e := s.entry(it.id)
		if !e.lock.TryLock() {
			continue // being updated: left for a later call
		}
		s.drop(e)
		e.lock.Unlock()
		*n++
	}
	return len(batch) == want && (limit <= 0 || *n < limit)
}

// drop deletes e with everything stored beside it. Caller holds mu for
// writing and e's lock.
func (s *Store) drop(e *entry) {
	delete(s.jobs, e.job.ID)
	if s.keys[e.key] == e {
		delete(s.keys, e.key)
	}
	s.reindex(e, &e.job, nil)
	e.execs, e.effects, e.history = nil, nil, nil
	e.gone = true
}

// shrink rebuilds the job and key maps once they hold a quarter of the most they have held: a Go map keeps the room of
// its largest size, and a copy gives the room back. The copy is paid for
// by the deletions that emptied three quarters of it. Caller holds mu for
// writing.
func (s *Store) shrink() {
	if s.peakJobs >= minRebuild && len(s.jobs) <= s.peakJobs/4 {
		s.jobs = rebuilt(s.jobs)
		s.peakJobs = len(s.jobs)
	}
	if s.peakKeys >= minRebuild && len(s.keys) <= s.peakKeys/4 {
		s.keys = rebuilt(s.keys)
		s.peakKeys = len(s.keys)
	}
}

// rebuilt returns a new map holding m's entries, sized for them.
func rebuilt[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// betweenBatches calls the test hook, if any, while no lock is held.
func (s *Store) betweenBatches() {
	if s.testBetweenBatches != nil {
		s.testBetweenBatches()
	}
}
