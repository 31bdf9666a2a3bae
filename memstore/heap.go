package memstore

import (
	"container/heap"
	"slices"
)

// entryHeap is a min-heap (container/heap) of entries, for the indexes
// that need no more than their least entries: terminal jobs by completion
// time (Prune) and leased jobs by heartbeat (Stale). Each entry keeps its
// place in the heap, key and index, in a heapSlot of its own, so that it
// can be moved or taken out in logarithmic time when its job changes.
// Entries of equal keys are ordered by job id.
type entryHeap struct {
	entries []*entry
	slot    func(e *entry) *heapSlot
}

// heapSlot is an entry's place in one entryHeap: the key it is ordered by
// and its index, -1 when it is not in the heap.
type heapSlot struct {
	key   instant
	index int
}

// set puts e in the heap under key when in is true, and takes it out
// otherwise. Caller holds the store's mu for writing.
func (h *entryHeap) set(e *entry, key instant, in bool) {
	sl := h.slot(e)
	switch {
	case in && sl.index < 0:
		sl.key = key
		heap.Push(h, e)
	case in && sl.key != key:
		sl.key = key
		heap.Fix(h, sl.index)
	case !in && sl.index >= 0:
		heap.Remove(h, sl.index)
	}
}

// before returns the entries whose key is before cut, least first. It
// looks at those entries and their children in the heap, and no other.
func (h *entryHeap) before(cut instant) []*entry {
	var out []*entry
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.entries) || h.slot(h.entries[i]).key.compare(cut) >= 0 {
			continue // every entry below i is at or after cut too
		}
		out = append(out, h.entries[i])
		stack = append(stack, 2*i+1, 2*i+2)
	}
	slices.SortFunc(out, h.compare)
	return out
}

// shrink gives back the room of the heap's array once it holds a quarter
// of what the array can.
func (h *entryHeap) shrink() {
	if cap(h.entries) > 64 && len(h.entries) <= cap(h.entries)/4 {
		h.entries = slices.Clone(h.entries)
	}
}

func (h *entryHeap) compare(a, b *entry) int {
	if c := h.slot(a).key.compare(h.slot(b).key); c != 0 {
		return c
	}
	return idOf(a.job.ID).compare(idOf(b.job.ID))
}

// The methods of heap.Interface, for container/heap only.

func (h *entryHeap) Len() int { return len(h.entries) }

func (h *entryHeap) Less(i, j int) bool { return h.compare(h.entries[i], h.entries[j]) < 0 }

func (h *entryHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.slot(h.entries[i]).index = i
	h.slot(h.entries[j]).index = j
}

func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	h.slot(e).index = len(h.entries)
	h.entries = append(h.entries, e)
}

func (h *entryHeap) Pop() any {
	last := len(h.entries) - 1
	e := h.entries[last]
	h.entries[last] = nil
	h.entries = h.entries[:last]
	h.slot(e).index = -1
	return e
}
