package memstore

import (
	"github.com/jobstate/jobstate"
)

var _ jobstate.KeyLimiter = (*Store)(nil)

// LimitsKeys implements jobstate.KeyLimiter: the store enforces
// Policy.MaxPerKey. Every write changes a machine's count of live
// executions per concurrency key under the store's lock, and a claim is
// checked against it under the same lock, so that concurrent claims cannot
// pass the limit together.
func (s *Store) LimitsKeys() bool { return true }

// moveLive keeps m.live, the live executions of m's jobs per concurrency
// key, as a job goes from version old to cur (nil: absent). Caller holds
// mu.
func (m *machine) moveLive(old, cur *jobstate.Job) {
	if old != nil && old.ConcurrencyKey != "" && old.Leases != 0 {
		if m.live[old.ConcurrencyKey] -= old.Leases; m.live[old.ConcurrencyKey] == 0 {
			delete(m.live, old.ConcurrencyKey)
		}
	}
	if cur != nil && cur.ConcurrencyKey != "" && cur.Leases != 0 {
		m.live[cur.ConcurrencyKey] += cur.Leases
	}
}

// atLimit reports whether a job of m with concurrency key k may not be
// claimed under a limit of limit live executions per key (none when
// limit <= 0). Caller holds mu.
func (m *machine) atLimit(k string, limit int) bool {
	return limit > 0 && k != "" && m.live[k] >= limit
}

// checkKeyLimit returns the error of jobstate.CheckKeyLimit for w over
// cur, counting the live executions of cur's key as the store holds them.
// Caller holds mu.
func (s *Store) checkKeyLimit(cur *jobstate.Job, w *jobstate.Write) error {
	if w.MaxPerKey <= 0 || cur.ConcurrencyKey == "" {
		return nil
	}
	live := 0
	if m := s.machines[cur.Machine]; m != nil {
		live = m.live[cur.ConcurrencyKey]
	}
	return jobstate.CheckKeyLimit(*cur, *w, live)
}
