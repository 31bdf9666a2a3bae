package memstore

import (
	"bytes"
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// wakeNode is an entry's place in its machine's wake index. The index is
// a treap threaded through the entries themselves: ordered by (WakeAt,
// ID) as a search tree and by prio as a max-heap, so that its expected
// depth is O(log n) whatever the order of insertion, with no allocation
// and no memory beyond the entries it indexes.
type wakeNode struct {
	left, right *entry
	// s and ns are the indexed WakeAt (as in tkey), valid while the entry
	// is in the index.
	s    int64
	ns   int32
	prio uint32
}

// at returns the indexed wake time.
func (w *wakeNode) at() tkey { return tkey{s: w.s, ns: w.ns} }

// wakeIndex is a machine's jobs with a wake time, in (WakeAt, ID) order.
type wakeIndex struct {
	root *entry
	n    int
}

// wakeLess reports whether (at, id) sorts before e's indexed key.
func wakeLess(at tkey, id *uuid.UUID, e *entry) bool {
	if c := at.cmp(e.wk.at()); c != 0 {
		return c < 0
	}
	return bytes.Compare(id[:], e.job.ID[:]) < 0
}

// set indexes e under its job's current WakeAt, or takes it out when the
// wake time is zero. Caller holds the store's mu for writing.
func (w *wakeIndex) set(e *entry) {
	if e.job.WakeAt.IsZero() {
		if e.wakeIn {
			w.remove(e)
		}
		return
	}
	at := tk(e.job.WakeAt)
	if e.wakeIn {
		if e.wk.at() == at {
			return
		}
		w.remove(e)
	}
	e.wk.s, e.wk.ns = at.s, at.ns
	w.insert(e)
}

func (w *wakeIndex) insert(x *entry) {
	p := &w.root
	for *p != nil && (*p).wk.prio >= x.wk.prio {
		if wakeLess(x.wk.at(), &x.job.ID, *p) {
			p = &(*p).wk.left
		} else {
			p = &(*p).wk.right
		}
	}
	x.wk.left, x.wk.right = split(*p, x)
	*p = x
	x.wakeIn = true
	w.n++
}

// split divides the subtree n into the entries before x and those after.
func split(n, x *entry) (l, r *entry) {
	lp, rp := &l, &r
	for n != nil {
		if wakeLess(n.wk.at(), &n.job.ID, x) {
			*lp = n
			lp = &n.wk.right
			n = n.wk.right
		} else {
			*rp = n
			rp = &n.wk.left
			n = n.wk.left
		}
	}
	*lp, *rp = nil, nil
	return l, r
}

func (w *wakeIndex) remove(x *entry) {
	p := &w.root
	for *p != x {
		if wakeLess(x.wk.at(), &x.job.ID, *p) {
			p = &(*p).wk.left
		} else {
			p = &(*p).wk.right
		}
	}
	*p = join(x.wk.left, x.wk.right)
	x.wk.left, x.wk.right, x.wakeIn = nil, nil, false
	w.n--
}

// join merges two treaps, every entry of a before every entry of b.
func join(a, b *entry) *entry {
	var root *entry
	p := &root
	for a != nil && b != nil {
		if a.wk.prio > b.wk.prio {
			*p = a
			p = &a.wk.right
			a = a.wk.right
		} else {
			*p = b
			p = &b.wk.left
			b = b.wk.left
		}
	}
	if a != nil {
		*p = a
	} else {
		*p = b
	}
	return root
}

// after returns the first entry strictly after (at, id), or nil.
func (w *wakeIndex) after(at tkey, id *uuid.UUID) *entry {
	var best *entry
	for n := w.root; n != nil; {
		if wakeLess(at, id, n) {
			best, n = n, n.wk.left
		} else {
			n = n.wk.right
		}
	}
	return best
}

// Due implements jobstate.Store. It merges the wake indexes of the
// machines asked for: O(k log n) to find the cursor in k machines' indexes
// of n jobs, then O(log n + log k) per job returned. Jobs not due, and
// jobs of other machines, are not looked at.
func (s *Store) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := tk(q.Now)
	from := tk(q.AfterWake)
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ms []*machine
	if len(q.Machines) == 0 {
		for _, m := range s.machines {
			ms = append(ms, m)
		}
	} else {
		ms = s.selectMachines(q.Machines)
	}
	// heads holds each machine's next due entry, as a min-heap.
	heads := make(dueHeads, 0, len(ms))
	for _, m := range ms {
		if e := m.wake.after(from, &q.AfterID); e != nil && e.wk.at().cmp(now) <= 0 {
			heads = append(heads, e)
		}
	}
	for i := len(heads)/2 - 1; i >= 0; i-- {
		heads.down(i)
	}
	var out []jobstate.DueJob
	for len(heads) > 0 && (q.Limit <= 0 || len(out) < q.Limit) {
		e := heads[0]
		out = append(out, jobstate.DueJob{ID: e.job.ID, WakeAt: e.job.WakeAt})
		if next := e.m.wake.after(e.wk.at(), &e.job.ID); next != nil && next.wk.at().cmp(now) <= 0 {
			heads[0] = next
		} else {
			last := len(heads) - 1
			heads[0] = heads[last]
			heads = heads[:last]
		}
		heads.down(0)
	}
	return out, nil
}

// selectMachines returns the known machines among names, each once.
// Caller holds mu.
func (s *Store) selectMachines(names []string) []*machine {
	ms := make([]*machine, 0, len(names))
	var seen map[*machine]bool // for long lists only
	if len(names) > 16 {
		seen = make(map[*machine]bool, len(names))
	}
	for _, name := range names {
		m := s.machines[name]
		if m == nil {
			continue
		}
		if seen != nil {
			if seen[m] {
				continue
			}
			seen[m] = true
		} else if slices.Contains(ms, m) {
			continue
		}
		ms = append(ms, m)
	}
	return ms
}

// dueHeads is a min-heap of entries by indexed wake key.
type dueHeads []*entry

func (h dueHeads) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && wakeLess(h[r].wk.at(), &h[r].job.ID, h[l]) {
			m = r
		}
		if !wakeLess(h[m].wk.at(), &h[m].job.ID, h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
