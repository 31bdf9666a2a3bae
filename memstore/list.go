package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/btree"

	"github.com/jobstate/jobstate"
)

// List implements jobstate.Lister from the store's listing indexes, under
// the store's lock; the first List builds them (see startListing).
// It reads one or more segments of an index (the jobs of one group, in
// time order) and keeps the first q.Limit jobs of them all that pass every
// filter:
//
//   - With a Key: the jobs created with that key, by creation time.
//   - Otherwise, with an Owner: the owner's jobs, by creation time.
//   - Otherwise: for the machine asked for (every machine when none is)
//     and each state asked for (every state when none is), the jobs in
//     that state, by creation or by update time as the order asks.
//
// A segment in the order asked for is read from the cursor (or the near
// bound of the order's own time range) until q.Limit of its jobs passed
// the filters: a page costs a logarithmic search in each of its s
// segments, then the jobs looked at, which are at most s pages when the
// indexed filters are the selective ones, and more by the jobs the other
// filters (kinds, outcomes, the other time ranges, an owner beside a key)
// pass over. A key's or an owner's jobs listed by update time are read
// whole and sorted: a cost in that key's or owner's jobs, not in the jobs
// stored.
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
	l := newListing(&q)
	s.mu.Lock()
	if !s.listing {
		s.mu.Unlock()
		s.startListing()
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	var found []*entry
	for _, seg := range s.segments(&q) {
		found = append(found, l.read(s, seg)...)
	}
	slices.SortFunc(found, l.compare)
	out := make([]jobstate.Job, 0, min(len(found), q.Limit))
	for _, e := range found[:min(len(found), q.Limit)] {
		out = append(out, e.job)
	}
	return out, nil
}

// segment is the part of an index that holds one group's jobs, and
// whether the index orders them by update time (else by creation time).
type segment struct {
	tree    *btree.BTreeG[groupItem]
	group   string
	updated bool
}

// segments returns the segments that hold every job q can list. Caller
// holds mu.
func (s *Store) segments(q *jobstate.ListQuery) []segment {
	switch {
	case q.Key != "":
		return []segment{{tree: s.keyed, group: q.Key}}
	case q.Owner != "":
		return []segment{{tree: s.owners, group: q.Owner}}
	}
	var names []string
	if q.Machine != "" {
		names = []string{q.Machine}
	}
	updated := q.Order == jobstate.OrderUpdated
	var out []segment
	for _, m := range s.selectMachines(names) {
		tree := m.created
		if updated {
			tree = m.updated
		}
		states := q.States
		if len(states) == 0 {
			states = slices.Collect(maps.Keys(m.counts))
		}
		for i, st := range states {
			if m.counts[st] > 0 && !slices.Contains(states[:i], st) {
				out = append(out, segment{tree: tree, group: string(st), updated: updated})
			}
		}
	}
	return out
}

// listing is one List call: its query, the time it orders by, the range
// [from, to) of that time, and the cursor, if any.
type listing struct {
	q        *jobstate.ListQuery
	updated  bool // ordered by update time, not creation time
	from, to instant
	cursor   *item
}

func newListing(q *jobstate.ListQuery) *listing {
	l := &listing{q: q, updated: q.Order == jobstate.OrderUpdated, from: beforeAll, to: afterAll}
	from, to := q.CreatedFrom, q.CreatedTo
	if l.updated {
		from, to = q.UpdatedFrom, q.UpdatedTo
	}
	if !from.IsZero() {
		l.from = instantOf(from)
	}
	if !to.IsZero() {
		l.to = instantOf(to)
	}
	if q.After != (jobstate.ListCursor{}) {
		l.cursor = &item{at: instantOf(q.After.At), id: idOf(q.After.ID)}
	}
	return l
}

// read returns the jobs of seg that pass every filter and come after the
// cursor: the first q.Limit of them, read in the listing's order from the
// cursor or the near bound of the range on, when seg is in that order;
// all of them otherwise.
func (l *listing) read(s *Store, seg segment) []*entry {
	inOrder := seg.updated == l.updated
	var out []*entry
	visit := func(it groupItem) bool {
		if it.group != seg.group || (inOrder && (it.at.compare(l.from) < 0 || it.at.compare(l.to) >= 0)) {
			return false // the end of the group, or of the range
		}
		if e := s.entry(it.id); l.afterCursor(&e.job) && l.match(&e.job) {
			out = append(out, e)
		}
		return !inOrder || len(out) < l.q.Limit
	}
	start := groupItem{group: seg.group, item: item{at: beforeAll}}
	switch {
	case !inOrder:
		seg.tree.AscendGreaterOrEqual(start, visit)
	case l.q.Desc:
		start.at = l.to // every job's id is above the zero id: start is after every job at l.to
		if l.cursor != nil && l.cursor.at.compare(l.to) < 0 {
			start.at, start.id = l.cursor.at, l.cursor.id
		}
		seg.tree.DescendLessOrEqual(start, visit)
	default:
		start.at = l.from
		if l.cursor != nil && l.cursor.at.compare(l.from) >= 0 {
			start.at, start.id = l.cursor.at, l.cursor.id
		}
		seg.tree.AscendGreaterOrEqual(start, visit)
	}
	return out
}

// key returns the time and id j sorts by.
func (l *listing) key(j *jobstate.Job) item {
	t := j.CreatedAt
	if l.updated {
		t = j.UpdatedAt
	}
	return item{at: instantOf(t), id: idOf(j.ID)}
}

// compare orders two entries as the listing asks: by its time, then id,
// newest first when descending.
func (l *listing) compare(a, b *entry) int {
	c := compareItems(l.key(&a.job), l.key(&b.job))
	if l.q.Desc {
		return -c
	}
	return c
}

// afterCursor reports whether j comes strictly after the cursor in the
// listing's order; every job does when there is no cursor.
func (l *listing) afterCursor(j *jobstate.Job) bool {
	if l.cursor == nil {
		return true
	}
	c := compareItems(l.key(j), *l.cursor)
	if l.q.Desc {
		return c < 0
	}
	return c > 0
}

// match reports whether j passes every filter of the query.
func (l *listing) match(j *jobstate.Job) bool {
	q := l.q
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
	at := instantOf(t)
	return (from.IsZero() || at.compare(instantOf(from)) >= 0) && (to.IsZero() || at.compare(instantOf(to)) < 0)
}
