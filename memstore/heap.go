package memstore

import (
	"bytes"
	"math"
	"time"

	"github.com/google/uuid"
)

// heap is a binary min-heap of entries. Each item carries its sort key,
// so that sifting compares contiguous memory instead of chasing entries,
// and each entry records its position, so that it can be moved or removed
// in O(log n) when its job changes.
type heap struct {
	items []item
	key   func(e *entry) key
	pos   func(e *entry) *int
}

// key orders heap items: a, then b, then c, then the job id.
type key struct {
	a, b, c int64
	id      uuid.UUID
}

type item struct {
	key
	e *entry
}

func (k *key) less(o *key) bool {
	switch {
	case k.a != o.a:
		return k.a < o.a
	case k.b != o.b:
		return k.b < o.b
	case k.c != o.c:
		return k.c < o.c
	}
	return bytes.Compare(k.id[:], o.id[:]) < 0
}

func newHeap(key func(e *entry) key, pos func(e *entry) *int) *heap {
	return &heap{key: key, pos: pos}
}

// nanos maps a time to an int64 that sorts like it, the zero time first.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// readyKey is claim order: not-before, then priority (higher first), then
// creation time, then id.
func readyKey(e *entry) key {
	j := &e.job
	return key{a: nanos(j.NotBefore), b: -int64(j.Priority), c: nanos(j.CreatedAt), id: j.ID}
}

// wakeKey orders by wake time, then id.
func wakeKey(e *entry) key {
	return key{a: nanos(e.job.WakeAt), id: e.job.ID}
}

func (h *heap) less(i, j int) bool { return h.items[i].key.less(&h.items[j].key) }

// set puts e in the heap at its right place when in is true, and takes it
// out otherwise.
func (h *heap) set(e *entry, in bool) {
	p := h.pos(e)
	switch {
	case in && *p < 0:
		*p = len(h.items)
		h.items = append(h.items, item{key: h.key(e), e: e})
		h.up(*p)
	case in:
		k := h.key(e)
		if h.items[*p].key == k {
			return // unchanged: nothing to move
		}
		h.items[*p].key = k
		if !h.down(*p) {
			h.up(*p)
		}
	case *p >= 0:
		i, last := *p, len(h.items)-1
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
	*h.pos(h.items[i].e) = i
	*h.pos(h.items[j].e) = j
}

func (h *heap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i down and reports whether it moved.
func (h *heap) down(i int) bool {
	start, n := i, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// walk visits, in heap order, the entries for which in holds, until visit
// returns false. in must be monotone in heap order: if it fails for an
// entry it fails for every later one, so whole subtrees are skipped. The
// cost is O(k log k) for k entries looked at.
func (h *heap) walk(visit func(e *entry) bool, in func(e *entry) bool) {
	if len(h.items) == 0 || !in(h.items[0].e) {
		return
	}
	// The root is the first entry in heap order: most walks stop there.
	if !visit(h.items[0].e) {
		return
	}
	// frontier is a small min-heap of indices into h.items.
	var buf [32]int
	f := frontier{h: h, idx: buf[:0]}
	f.push(1, in)
	f.push(2, in)
	for len(f.idx) > 0 {
		i := f.pop()
		if !visit(h.items[i].e) {
			return
		}
		f.push(2*i+1, in)
		f.push(2*i+2, in)
	}
}

// frontier is the min-heap of candidate positions of a walk.
type frontier struct {
	h   *heap
	idx []int
}

func (f *frontier) less(a, b int) bool { return f.h.less(a, b) }

func (f *frontier) push(i int, in func(e *entry) bool) {
	if i >= len(f.h.items) || !in(f.h.items[i].e) {
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
