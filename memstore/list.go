package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// List implements jobstate.Lister from the store's listing indexes, under
// the store's read lock. The indexes are built by the first List (which
// holds the store's lock for writing while it indexes every job) and kept
// from then on: two to four O(log n) index updates per write, none for a
// store that is never listed. Then:
//
//   - With a Key: the jobs created with that key (a handful), filtered and
//     sorted.
//   - With an Owner, by creation time: the owner's index, from the cursor.
//     By update time: the owner's jobs, filtered and sorted (O(k log k)
//     for the owner's k jobs).
//   - Otherwise: the per-state indexes of the machine asked for (of every
//     machine when none is), of the states asked for (all when none are),
//     in the order asked for, merged from the cursor: O(s log n) to start
//     in s indexes, then O(s) per job looked at.
//
// The time range of the order's own time (CreatedFrom and CreatedTo by
// creation time, UpdatedFrom and UpdatedTo by update time) bounds the walk.
// Every other filter (kinds, outcomes, the other ranges, an owner beside a
// key) is checked job by job: a page costs O(page) jobs looked at when the
// indexed filters are the selective ones, and more by the jobs the other
// filters pass over.
func (s *Store) List(ctx context.Context, q jobstate.ListQuery) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.Limit < 1 || q.Limit > jobstate.MaxListLimit+1 {
		return nil, fmt.Errorf("%w: list: limit %d is outside 1..%d", jobstate.ErrInvalidArgument, q.Limit, jobstate.MaxListLimit)
	}
	if q.Order != "" && q.Order != jobstate.OrderCreated && q.Order != jobstate.OrderUpdated {
		return nil, fmt.Errorf("%w: list: unknown order %q", jobstate.ErrInvalidArgument, q.Order)
	}
	w := newListWalk(&q)
	s.mu.RLock()
	if !s.listing {
		s.mu.RUnlock()
		s.startListing()
		s.mu.RLock()
	}
	defer s.mu.RUnlock()
	switch {
	case q.Key != "":
		return w.entries(s.lists.keys[q.Key]), nil
	case q.Owner != "" && w.updated:
		set := s.lists.owners[q.Owner]
		if set == nil {
			return nil, nil
		}
		var list []*entry
		for _, blk := range set.blocks {
			for _, it := range blk {
				list = append(list, it.e)
			}
		}
		return w.entries(list), nil
	case q.Owner != "":
		if set := s.lists.owners[q.Owner]; set != nil {
			return w.merge([]*sortedSet{set}), nil
		}
		return nil, nil
	}
	var sets []*sortedSet
	add := func(m *machine) {
		pick := func(sl *stateLists) {
			if w.updated {
				sets = append(sets, &sl.updated)
			} else {
				sets = append(sets, &sl.created)
			}
		}
		if len(q.States) == 0 {
			for _, sl := range m.lists {
				pick(sl)
			}
			return
		}
		for i, st := range q.States {
			if sl := m.lists[st]; sl != nil && !slices.Contains(q.States[:i], st) {
				pick(sl)
			}
		}
	}
	if q.Machine != "" {
		if m := s.machines[q.Machine]; m != nil {
			add(m)
		}
	} else {
		for _, m := range s.machines {
			add(m)
		}
	}
	return w.merge(sets), nil
}

// startListing builds the listing indexes, once: a store that is never
// listed does not pay for keeping them. It holds the store's lock for
// writing while it indexes every job (O(n log n), about a second per
// million jobs).
func (s *Store) startListing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listing {
		return
	}
	s.jobs.each(func(_ uuid.UUID, e *entry) { s.relist(e) })
	s.listing = true
}

// listWalk is one listing: its query, order and bounds.
type listWalk struct {
	q       *jobstate.ListQuery
	updated bool // ordered by update time, not creation time
	// after is the cursor; from and to the bounds of the order's own
	// time range.
	after, from, to *probe
}

func newListWalk(q *jobstate.ListQuery) *listWalk {
	w := &listWalk{q: q, updated: q.Order == jobstate.OrderUpdated}
	if q.After != (jobstate.ListCursor{}) {
		w.after = &probe{t: tk(q.After.At), id: q.After.ID}
	}
	from, to := q.CreatedFrom, q.CreatedTo
	if w.updated {
		from, to = q.UpdatedFrom, q.UpdatedTo
	}
	if !from.IsZero() {
		w.from = &probe{t: tk(from), id: uuid.Nil}
	}
	if !to.IsZero() {
		w.to = &probe{t: tk(to), id: uuid.Nil}
	}
	return w
}

// probeLess orders two probes.
func probeLess(a, b *probe) bool {
	if c := a.t.cmp(b.t); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// key returns the sort time of e in this walk's order.
func (w *listWalk) key(e *entry) litem {
	t := e.list.created
	if w.updated {
		t = e.list.updated
	}
	return litem{s: t.s, ns: t.ns, e: e}
}

// start returns the first place of set to look at.
func (w *listWalk) start(set *sortedSet) pos {
	if !w.q.Desc {
		if w.after != nil && (w.from == nil || !probeLess(w.after, w.from)) {
			return set.seekGT(w.after)
		}
		if w.from != nil {
			return set.seekGE(w.from)
		}
		return pos{}
	}
	bound := w.to
	if w.after != nil && (w.to == nil || probeLess(w.after, w.to)) {
		bound = w.after
	}
	if bound == nil {
		if len(set.blocks) == 0 {
			return pos{0, -1}
		}
		last := len(set.blocks) - 1
		return pos{last, len(set.blocks[last]) - 1}
	}
	return set.prev(set.seekGE(bound))
}

// inRange reports whether it, in the walk's order, is still within the
// bounds; once it is not, nothing after it is either.
func (w *listWalk) inRange(it litem) bool {
	if !w.q.Desc {
		return w.to == nil || w.to.cmp(it) > 0
	}
	return w.from == nil || w.from.cmp(it) <= 0
}

// merge walks sets together in the walk's order, from the cursor, and
// returns the first q.Limit jobs that match.
func (w *listWalk) merge(sets []*sortedSet) []jobstate.Job {
	at := make([]pos, len(sets))
	for i, set := range sets {
		at[i] = w.start(set)
	}
	out := make([]jobstate.Job, 0, min(w.q.Limit, 256))
	for len(out) < w.q.Limit {
		best, bestIt := -1, litem{}
		for i, set := range sets {
			it, ok := set.at(at[i])
			if !ok {
				continue
			}
			if best < 0 || itemLess(it, bestIt) != w.q.Desc {
				best, bestIt = i, it
			}
		}
		if best < 0 || !w.inRange(bestIt) {
			break
		}
		if w.q.Desc {
			at[best] = sets[best].prev(at[best])
		} else {
			at[best] = sets[best].next(at[best])
		}
		if w.match(&bestIt.e.job) {
			out = append(out, bestIt.e.job)
		}
	}
	return out
}

// entries returns the first q.Limit jobs of list that match, in the walk's
// order, from the cursor.
func (w *listWalk) entries(list []*entry) []jobstate.Job {
	var items []litem
	for _, e := range list {
		it := w.key(e)
		if !w.match(&e.job) {
			continue
		}
		if w.after != nil {
			if c := w.after.cmp(it); (!w.q.Desc && c >= 0) || (w.q.Desc && c <= 0) {
				continue // at or before the cursor
			}
		}
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b litem) int {
		if itemLess(a, b) != w.q.Desc {
			return -1
		}
		return 1
	})
	out := make([]jobstate.Job, 0, min(len(items), w.q.Limit))
	for _, it := range items[:min(len(items), w.q.Limit)] {
		out = append(out, it.e.job)
	}
	return out
}

// match reports whether j passes every filter of the query.
func (w *listWalk) match(j *jobstate.Job) bool {
	q := w.q
	switch {
	case q.Machine != "" && j.Machine != q.Machine,
		len(q.States) > 0 && !slices.Contains(q.States, j.State),
		len(q.Kinds) > 0 && !slices.Contains(q.Kinds, j.Kind),
		len(q.Outcomes) > 0 && !slices.Contains(q.Outcomes, j.Outcome),
		q.Owner != "" && j.Owner != q.Owner,
		q.Key != "" && j.IdempotencyKey != q.Key,
		!within(j.CreatedAt, q.CreatedFrom, q.CreatedTo),
		!within(j.UpdatedAt, q.UpdatedFrom, q.UpdatedTo):
		return false
	}
	if !q.CompletedFrom.IsZero() || !q.CompletedTo.IsZero() {
		return j.Kind == jobstate.KindTerminal && within(j.CompletedAt, q.CompletedFrom, q.CompletedTo)
	}
	return true
}

// within reports whether t is in [from, to), a zero bound being open.
func within(t, from, to time.Time) bool {
	k := tk(t)
	return (from.IsZero() || k.cmp(tk(from)) >= 0) && (to.IsZero() || k.cmp(tk(to)) < 0)
}
