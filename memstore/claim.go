package memstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobstate/jobstate"
)

// ClaimNext implements jobstate.Store: the machine's due ready jobs are
// offered in claim order, each under its own lock, never another job's;
// a job locked by an update is passed over.
func (s *Store) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	var one [1]jobstate.Job
	jobs, err := s.claim(ctx, q, 1, fn, one[:0])
	if err != nil {
		return jobstate.Job{}, err
	}
	if len(jobs) == 0 {
		return jobstate.Job{}, fmt.Errorf("%w: machine %q", jobstate.ErrNoJob, q.Machine)
	}
	return jobs[0], nil
}

// ClaimBatch implements jobstate.BatchClaimer: the candidates of ClaimNext,
// in claim order, each offered to fn under its own lock (never another
// job's) and its write applied at once, until n are taken or none is left.
// A store in memory has nothing to roll back user code with, so a write is
// never held back once fn, and the effects it ran, returned: an error other
// than ErrSkip from fn, an invalid write or the end of ctx stops the batch
// and returns the jobs taken before it with the error.
func (s *Store) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: batch of %d jobs", jobstate.ErrInvalidArgument, n)
	}
	return s.claim(ctx, q, n, fn, nil)
}

// claim offers the candidates of q to fn, each once, until n were taken,
// q.Limit were offered (all when q.Limit <= 0) or none is left, and
// returns out with the jobs taken appended.
func (s *Store) claim(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc, out []jobstate.Job) ([]jobstate.Job, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	var offered map[*entry]bool
	for offers := 0; len(out) < n && (q.Limit <= 0 || offers < q.Limit); offers++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		e := s.nextCandidate(q, offered)
		if e == nil {
			break
		}
		job, err := s.run(ctx, e, fn)
		e.lock.Unlock()
		switch {
		case err == nil:
			out = append(out, job)
		case errors.Is(err, jobstate.ErrKeyLimit):
			// Another claim took the key's last slot since the pick.
		case !errors.Is(err, jobstate.ErrSkip):
			return out, err
		}
		if len(out) < n { // another offer follows
			if offered == nil {
				offered = make(map[*entry]bool)
			}
			offered[e] = true
		}
	}
	return out, nil
}

// nextCandidate returns, with its lock held, the first job of q.Machine
// in claim order that is due at q.Now, not in passed, not locked by
// another update, and whose concurrency key is below q.MaxPerKey; nil
// when there is none.
func (s *Store) nextCandidate(q jobstate.ClaimQuery, passed map[*entry]bool) *entry {
	now := instantOf(q.Now)
	for {
		s.mu.Lock()
		m := s.machines[q.Machine]
		if m == nil {
			s.mu.Unlock()
			return nil
		}
		if !m.needsPromotion(now) {
			e := s.pick(m, now, q.MaxPerKey, passed)
			s.mu.Unlock()
			return e
		}
		// One batch at a time, so that other operations go ahead between.
		s.promote(m, now)
		s.mu.Unlock()
	}
}

// pick returns, with its lock held, the first available job in claim
// order that is due at now, not in passed, whose key is below limit live
// executions, and whose lock it can take (under a limit, a key whose
// first such job is locked offers none); nil when there is none. It
// walks the available tree (the jobs without a key and each key's head)
// and, for a key below its limit, that key's jobs, until no job left to
// see can come before the best found. Caller holds mu.
func (s *Store) pick(m *machine, now instant, limit int, passed map[*entry]bool) *entry {
	var best *entry
	var at claimItem
	// consider takes it as the best so far if it comes first and its job
	// can be taken, and reports whether it did, and whether the job was
	// locked by another update.
	consider := func(it claimItem) (taken, locked bool) {
		e := s.entry(it.id)
		if instantOf(e.job.NotBefore).compare(now) > 0 || passed[e] {
			return false, false
		}
		if !e.lock.TryLock() {
			return false, true
		}
		if best != nil {
			best.lock.Unlock()
		}
		best, at = e, it
		return true, false
	}
	before := func(it claimItem) bool { return best == nil || claimLess(it, at) }
	m.available.Ascend(func(it claimItem) bool {
		if !before(it) {
			return false
		}
		k := s.entry(it.id).job.ConcurrencyKey
		switch {
		case k == "":
			consider(it)
		case !m.atLimit(k, limit):
			// Under a limit, a key's job locked by another update (a claim
			// in progress) keeps the key's later jobs back, so that the
			// key's jobs are claimed in claim order.
			m.byKey[k].Ascend(func(kt claimItem) bool {
				if !before(kt) {
					return false
				}
				taken, locked := consider(kt)
				return !taken && !(locked && limit > 0)
			})
		}
		return true
	})
	return best
}
