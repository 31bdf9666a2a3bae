package memstore

import "bytes"

// heap is a binary min-heap of entries that records each entry's position
// in the entry itself, so that an entry can be moved or removed in
// O(log n) when its job changes.
type heap struct {
	items []*entry
	less  func(a, b *entry) bool
	pos   func(e *entry) *int
}

func newHeap(less func(a, b *entry) bool, pos func(e *entry) *int) *heap {
	return &heap{less: less, pos: pos}
}

// readyLess is claim order: not-before, then priority (higher first), then
// creation time, then id.
func readyLess(a, b *entry) bool {
	x, y := &a.job, &b.job
	if !x.NotBefore.Equal(y.NotBefore) {
		return x.NotBefore.Before(y.NotBefore)
	}
	if x.Priority != y.Priority {
		return x.Priority > y.Priority
	}
	if !x.CreatedAt.Equal(y.CreatedAt) {
		return x.CreatedAt.Before(y.CreatedAt)
	}
	return bytes.Compare(x.ID[:], y.ID[:]) < 0
}

// wakeLess orders by wake time, then id.
func wakeLess(a, b *entry) bool {
	if !a.job.WakeAt.Equal(b.job.WakeAt) {
		return a.job.WakeAt.Before(b.job.WakeAt)
	}
	return bytes.Compare(a.job.ID[:], b.job.ID[:]) < 0
}

// set puts e in the heap at its right place when in is true, and takes it
// out otherwise.
func (h *heap) set(e *entry, in bool) {
	p := h.pos(e)
	switch {
	case in && *p < 0:
		*p = len(h.items)
		h.items = append(h.items, e)
		h.up(*p)
	case in:
		if !h.down(*p) {
			h.up(*p)
		}
	case *p >= 0:
		i, last := *p, len(h.items)-1
		if i != last {
			h.swap(i, last)
		}
		h.items[last] = nil
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
	*h.pos(h.items[i]) = i
	*h.pos(h.items[j]) = j
}

func (h *heap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
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
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.less(h.items[m], h.items[i]) {
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
	if len(h.items) == 0 || !in(h.items[0]) {
		return
	}
	// The root is the first entry in heap order: most walks stop there.
	if !visit(h.items[0]) {
		return
	}
	// frontier is a small min-heap of indices into h.items.
	var buf [32]int
	f := frontier{h: h, idx: buf[:0]}
	f.push(1, in)
	f.push(2, in)
	for len(f.idx) > 0 {
		i := f.pop()
		if !visit(h.items[i]) {
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

func (f *frontier) less(a, b int) bool { return f.h.less(f.h.items[a], f.h.items[b]) }

func (f *frontier) push(i int, in func(e *entry) bool) {
	if i >= len(f.h.items) || !in(f.h.items[i]) {
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
