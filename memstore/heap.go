package memstore

import (
	"bytes"
	"math"
	"time"

	"github.com/google/uuid"
)

// tkey is an instant as a sortable pair: seconds since the Unix epoch and
// nanoseconds within the second. Unlike UnixNano it is exact for every
// instant a time.Time holds, years 1 to 9999 and beyond; the zero time
// (which means "none" in a Job) maps below every other instant.
type tkey struct {
	s  int64
	ns int32
}

// tk returns the sort key of t.
func tk(t time.Time) tkey {
	if t.IsZero() {
		return tkey{s: math.MinInt64}
	}
	return tkey{s: t.Unix(), ns: int32(t.Nanosecond())}
}

// cmp returns -1, 0 or +1 as a is before, equal to or after b.
func (a tkey) cmp(b tkey) int {
	switch {
	case a.s < b.s:
		return -1
	case a.s > b.s:
		return 1
	case a.ns < b.ns:
		return -1
	case a.ns > b.ns:
		return 1
	}
	return 0
}

// key orders heap items: p, then t1, then t2, then the job id (bytewise,
// as PostgreSQL compares uuids).
type key struct {
	p      int64
	t1, t2 tkey
	id     uuid.UUID
}

func (k *key) less(o *key) bool {
	if k.p != o.p {
		return k.p < o.p
	}
	if c := k.t1.cmp(o.t1); c != 0 {
		return c < 0
	}
	if c := k.t2.cmp(o.t2); c != 0 {
		return c < 0
	}
	return bytes.Compare(k.id[:], o.id[:]) < 0
}

// The orders of the store's heaps. Each reads only the entry's job.

// availKey is claim order: priority (higher first), then due time, then
// creation time, then id. ^p reverses the order of p without the overflow
// of -p.
func availKey(e *entry) key {
	j := &e.job
	return key{p: ^int64(j.Priority), t1: tk(j.DueAt()), t2: tk(j.CreatedAt), id: j.ID}
}

// schedKey orders ready jobs not yet due by not-before.
func schedKey(e *entry) key { return key{t1: tk(e.job.NotBefore), id: e.job.ID} }

// leaseKey orders leased jobs by heartbeat, oldest first.
func leaseKey(e *entry) key { return key{t1: tk(e.job.HeartbeatAt), id: e.job.ID} }

// heap is a 4-ary min-heap of entries: half the depth of a binary heap,
// and the four children of an item side by side in memory, so that a
// sift in a heap of a million entries touches about ten levels instead of
// twenty. Each item carries its sort key,
// so that sifting compares contiguous memory instead of chasing entries,
// and each entry records its position, so that it can be moved or removed
// in O(log n) when its job changes. Prune shrinks its backing array once
// the heap has shrunk well below it, so that a heap that once held a
// million entries does not keep their room (shrinking as entries leave
// would reallocate over and over a heap whose size swings).
type heap struct {
	items []item
	key   func(e *entry) key
	pos   func(e *entry) *int32
}

type item struct {
	key
	e *entry
}

// arity is the number of children of a heap item: the children of item
// i are items arity*i+1 … arity*i+arity, its parent (i-1)/arity.
const arity = 4

// minHeapCap is the capacity below which a heap's array is never shrunk.
const minHeapCap = 256

func newHeap(key func(e *entry) key, pos func(e *entry) *int32) *heap {
	return &heap{key: key, pos: pos}
}

func (h *heap) less(i, j int) bool { return h.items[i].key.less(&h.items[j].key) }

// top returns the first item, or nil when the heap is empty.
func (h *heap) top() *item {
	if len(h.items) == 0 {
		return nil
	}
	return &h.items[0]
}

// set puts e in the heap at its right place when in is true, and takes it
// out otherwise.
func (h *heap) set(e *entry, in bool) {
	p := h.pos(e)
	switch {
	case in && *p < 0:
		i := len(h.items)
		*p = int32(i)
		h.items = append(h.items, item{key: h.key(e), e: e})
		h.up(i)
	case in:
		i := int(*p)
		k := h.key(e)
		if h.items[i].key == k {
			return // unchanged: nothing to move
		}
		h.items[i].key = k
		if !h.down(i) {
			h.up(i)
		}
	case *p >= 0:
		i, last := int(*p), len(h.items)-1
		if i != last {
			h.swap(i, last)
		}
		h.items[last] = item{}
		h.items = h.items[:last]
		*p = -1
		if i != last {
			if !h.down(i) {
				h.up(i)
			}
		}
	}
}

func (h *heap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i].e) = int32(i)
	*h.pos(h.items[j].e) = int32(j)
}

// place puts it at position i and records the position in its entry.
func (h *heap) place(i int, it item) {
	h.items[i] = it
	*h.pos(it.e) = int32(i)
}

// up sifts i up: the parents it passes move down one level each, and the
// item is written once, where it stops.
func (h *heap) up(i int) {
	it := h.items[i]
	start := i
	for i > 0 {
		parent := (i - 1) / arity
		if !it.key.less(&h.items[parent].key) {
			break
		}
		h.place(i, h.items[parent])
		i = parent
	}
	if i != start {
		h.place(i, it)
	}
}

// down sifts i down, as up does, and reports whether it moved.
func (h *heap) down(i int) bool {
	start, n := i, len(h.items)
	it := h.items[i]
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		for j, end := c+1, min(c+arity, n); j < end; j++ {
			if h.items[j].key.less(&h.items[m].key) {
				m = j
			}
		}
		if !h.items[m].key.less(&it.key) {
			break
		}
		h.place(i, h.items[m])
		i = m
	}
	if i != start {
		h.place(i, it)
	}
	return i > start
}

// walk visits, in heap order, the items for which in holds, until visit
// returns false. in must be monotone in heap order: if it fails for an
// item it fails for every later one, so whole subtrees are skipped. The
// cost is O(k log k) for k items looked at.
func (h *heap) walk(visit func(it *item) bool, in func(it *item) bool) {
	if len(h.items) == 0 || !in(&h.items[0]) {
		return
	}
	// The root is the first entry in heap order: most walks stop there.
	if !visit(&h.items[0]) {
		return
	}
	// frontier is a small min-heap of indices into h.items.
	var buf [32]int
	f := frontier{h: h, idx: buf[:0]}
	for c := 1; c <= arity; c++ {
		f.push(c, in)
	}
	for len(f.idx) > 0 {
		i := f.pop()
		if !visit(&h.items[i]) {
			return
		}
		for c := arity*i + 1; c <= arity*i+arity; c++ {
			f.push(c, in)
		}
	}
}

// frontier is the min-heap of candidate positions of a walk.
type frontier struct {
	h   *heap
	idx []int
}

func (f *frontier) less(a, b int) bool { return f.h.less(a, b) }

func (f *frontier) push(i int, in func(it *item) bool) {
	if i >= len(f.h.items) || !in(&f.h.items[i]) {
		return
	}
	f.idx = append(f.idx, i)
	for c := len(f.idx) - 1; c > 0; {
		p := (c - 1) / 2
		if !f.less(f.idx[c], f.idx[p]) {
			break
		}
		f.idx[c], f.idx[p] = f.idx[p], f.idx[c]
		c = p
	}
}

func (f *frontier) pop() int {
	top := f.idx[0]
	last := len(f.idx) - 1
	f.idx[0] = f.idx[last]
	f.idx = f.idx[:last]
	for c := 0; ; {
		l := 2*c + 1
		if l >= len(f.idx) {
			break
		}
		m := l
		if r := l + 1; r < len(f.idx) && f.less(f.idx[r], f.idx[l]) {
			m = r
		}
		if !f.less(f.idx[m], f.idx[c]) {
			break
		}
		f.idx[c], f.idx[m] = f.idx[m], f.idx[c]
		c = m
	}
	return top
}
