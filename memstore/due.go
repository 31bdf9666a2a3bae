package memstore

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/jobstate/jobstate"
)

// Due implements jobstate.Store from the wake index of each machine asked
// for: it takes up to q.Limit due jobs after the cursor from each, then
// keeps the first q.Limit of them all in (WakeAt, ID) order. Jobs not due,
// and jobs of other machines, are not looked at.
func (s *Store) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cursor := item{at: instantOf(q.AfterWake), id: idOf(q.AfterID)}
	now := instantOf(q.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []jobstate.DueJob
	for _, m := range s.selectMachines(q.Machines) {
		taken := 0
		m.wake.AscendGreaterOrEqual(cursor, func(it item) bool {
			if it.at.compare(now) > 0 || (q.Limit > 0 && taken == q.Limit) {
				return false
			}
			if compareItems(it, cursor) > 0 {
				out = append(out, jobstate.DueJob{ID: it.id.uuid(), WakeAt: s.entry(it.id).job.WakeAt})
				taken++
			}
			return true
		})
	}
	slices.SortFunc(out, func(a, b jobstate.DueJob) int {
		if c := instantOf(a.WakeAt).compare(instantOf(b.WakeAt)); c != 0 {
			return c
		}
		return idOf(a.ID).compare(idOf(b.ID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// selectMachines returns the machines named, each once, or every machine
// when names is empty. Caller holds mu.
func (s *Store) selectMachines(names []string) []*machine {
	if len(names) == 0 {
		return slices.Collect(maps.Values(s.machines))
	}
	var out []*machine
	for i, name := range names {
		if m := s.machines[name]; m != nil && !slices.Contains(names[:i], name) {
			out = append(out, m)
		}
	}
	return out
}

// Stale implements jobstate.Store from the tree of leased jobs by
// heartbeat: it looks at the leased jobs whose heartbeat is before the
// time given, least first, and at most one more.
func (s *Store) Stale(ctx context.Context, machine string, before time.Time, limit int) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []jobstate.Job
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := instantOf(before)
	s.leased.Ascend(func(it item) bool {
		if it.at.compare(cut) >= 0 || (limit > 0 && len(out) == limit) {
			return false
		}
		if e := s.entry(it.id); machine == "" || e.job.Machine == machine {
			out = append(out, e.job)
		}
		return true
	})
	return out, nil
}
