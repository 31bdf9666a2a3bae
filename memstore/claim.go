package memstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jobstate/jobstate"
)

// machine holds the indexes of one machine's jobs.
type machine struct {
	// scheduled holds the ready jobs not yet due, by not-before; available
	// the ready jobs that are due, in claim order. A claim first moves the
	// scheduled jobs due at its time to available.
	scheduled, available *heap
	// horizon is the latest claim time that moved jobs: a ready job whose
	// not-before is not after it goes to available at once. A claim at an
	// earlier time (another engine's clock, a test clock set back) passes
	// over the available jobs not yet due at its time, and leaves them
	// there.
	horizon tkey
	// wake indexes the jobs with a wake time, for Due.
	wake wakeIndex
	// lists index the machine's jobs by state, for List; made on first use.
	lists map[jobstate.State]*stateLists
}

func newMachine() *machine {
	return &machine{
		scheduled: newHeap(schedKey, func(e *entry) *int32 { return &e.schedAt }),
		available: newHeap(availKey, func(e *entry) *int32 { return &e.availAt }),
		horizon:   tkey{s: math.MinInt64},
	}
}

// promoteBatch bounds how many jobs one hold of the store's lock moves from
// scheduled to available.
const promoteBatch = 1000

// reindex puts e where its job belongs in the indexes of its machine, the
// terminal queue and the leased heap. Caller holds mu for writing.
func (s *Store) reindex(e *entry) {
	m, j := e.m, &e.job
	if j.Kind == jobstate.KindReady {
		due := tk(j.NotBefore).cmp(m.horizon) <= 0
		m.scheduled.set(e, !due)
		m.available.set(e, due)
	} else {
		m.scheduled.set(e, false)
		m.available.set(e, false)
	}
	m.wake.set(e)
	s.done.set(e)
	s.leased.set(e, j.Leases > 0)
	if s.listing {
		s.relist(e)
	}
}

// ClaimNext implements jobstate.Store. Finding a candidate costs O(log n)
// in the machine's n ready jobs, plus O(log n) for each job that became
// due since the last claim (moved once to the available heap), plus
// O(k log k) for k jobs passed over: skipped, locked, or not due at an
// earlier claim time than one seen before (as a job not yet due sorts
// after the due jobs of its priority, those are in the main the jobs of
// higher priority not yet due).
func (s *Store) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	now := tk(q.Now)
	var passed map[*entry]bool // made on the first skip
	for offers := 0; q.Limit <= 0 || offers < q.Limit; offers++ {
		if err := ctx.Err(); err != nil {
			return jobstate.Job{}, err
		}
		e := s.nextCandidate(q.Machine, now, passed)
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

// nextCandidate returns, locked, the first due ready job of the machine in
// claim order that is not in passed and not locked by another update.
func (s *Store) nextCandidate(name string, now tkey, passed map[*entry]bool) *entry {
	for {
		s.mu.RLock()
		m := s.machines[name]
		if m == nil {
			s.mu.RUnlock()
			return nil
		}
		if top := m.scheduled.top(); top == nil || top.t1.cmp(now) > 0 {
			e := m.pick(now, passed)
			s.mu.RUnlock()
			return e
		}
		s.mu.RUnlock()
		s.mu.Lock()
		m.promote(now)
		s.mu.Unlock()
	}
}

// promote moves up to promoteBatch scheduled jobs due at now to available.
// Caller holds mu for writing.
func (m *machine) promote(now tkey) {
	for i := 0; i < promoteBatch; i++ {
		top := m.scheduled.top()
		if top == nil || top.t1.cmp(now) > 0 {
			break
		}
		e := top.e
		m.scheduled.set(e, false)
		m.available.set(e, true)
	}
	if now.cmp(m.horizon) > 0 {
		m.horizon = now
	}
}

// pick walks the available heap in claim order for the first job due at
// now, not in passed, whose lock it can take. Caller holds mu.
func (m *machine) pick(now tkey, passed map[*entry]bool) *entry {
	var found *entry
	m.available.walk(func(it *item) bool {
		e := it.e
		if tk(e.job.NotBefore).cmp(now) > 0 || passed[e] || !e.lock.TryLock() {
			return true
		}
		found = e
		return false
	}, func(*item) bool { return true })
	return found
}
