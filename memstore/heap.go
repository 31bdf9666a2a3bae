package memstore

import (
	"container/heap"
	"slices"
)

// leaseHeap is the index of Stale: a min-heap (container/heap) of the jobs
// holding leases, by heartbeat, then id. Items carry their key and job
// id, so that the heap is ordered without reading the entries; each entry
// keeps its index in the heap (entry.leaseAt, -1 when absent), so that it
// can be moved or taken out in logarithmic time when its job changes.
type leaseHeap struct {
	items []heapItem
}

// heapItem is an entry in a leaseHeap, ordered by key, then job id.
type heapItem struct {
	key instant
	id  jobID
	e   *entry
}

// set puts e in the heap under key when in is true, and takes it out
// otherwise. Caller holds the store's mu for writing.
func (h *leaseHeap) set(e *entry, key instant, in bool) {
	i := e.leaseAt
	switch {
	case in && i < 0:
		h.items = append(h.items, heapItem{key: key, id: idOf(e.job.ID), e: e})
		e.leaseAt = len(h.items) - 1
		heap.Fix(h, len(h.items)-1)
	case in && h.items[i].key != key:
		h.items[i].key = key
		heap.Fix(h, i)
	case !in && i >= 0:
		heap.Remove(h, i)
	}
}

// before returns the entries whose key is before cut, least first. It
// looks at those entries and their children in the heap, and no other.
func (h *leaseHeap) before(cut instant) []*entry {
	var found []heapItem
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.items) || h.items[i].key.compare(cut) >= 0 {
			continue // every item below i is at or after cut too
		}
		found = append(found, h.items[i])
		stack = append(stack, 2*i+1, 2*i+2)
	}
	slices.SortFunc(found, compareHeapItems)
	out := make([]*entry, len(found))
	for i, it := range found {
		out[i] = it.e
	}
	return out
}

// shrink gives back the room of the heap's array once it holds a quarter
// of what the array can.
func (h *leaseHeap) shrink() {
	if cap(h.items) > 64 && len(h.items) <= cap(h.items)/4 {
		h.items = slices.Clone(h.items)
	}
}

func compareHeapItems(a, b heapItem) int {
	if c := a.key.compare(b.key); c != 0 {
		return c
	}
	return a.id.compare(b.id)
}

// The methods of heap.Interface, for container/heap only.

func (h *leaseHeap) Len() int { return len(h.items) }

func (h *leaseHeap) Less(i, j int) bool { return compareHeapItems(h.items[i], h.items[j]) < 0 }

func (h *leaseHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].e.leaseAt = i
	h.items[j].e.leaseAt = j
}

func (h *leaseHeap) Push(x any) {
	it := x.(heapItem)
	it.e.leaseAt = len(h.items)
	h.items = append(h.items, it)
}

// Pop removes the last item and returns its entry.
func (h *leaseHeap) Pop() any {
	last := len(h.items) - 1
	e := h.items[last].e
	h.items[last] = heapItem{}
	h.items = h.items[:last]
	e.leaseAt = -1
	return e
}
