package memstore

import "github.com/jobstate/jobstate"

// doneQueue holds the terminal jobs by completion time, for Prune. It is a
// 4-ary min-heap of items with lazy deletion: an entry records the
// sequence number of its current item, and an item that is not its
// entry's current one (the job left the terminal state, changed its
// completion time or was deleted) is stale and dropped when it reaches the
// top. So moving items never writes to the entries, and taking the oldest
// out costs a few cache lines per level of a shallow heap: O(log n), with
// a small constant, however many jobs are stored.
type doneQueue struct {
	items []doneItem
	stale int // items that are not their entry's current one
}

// doneItem is a completion time (as in tkey), flattened so that an item
// takes 24 bytes, and the entry it was pushed for.
type doneItem struct {
	s   int64
	ns  int32
	seq uint32 // the entry's doneSeq when pushed
	e   *entry
}

func (it *doneItem) before(o *doneItem) bool {
	return it.s < o.s || (it.s == o.s && it.ns < o.ns)
}

func (it *doneItem) current() bool { return it.e.doneIn && it.e.doneSeq == it.seq }

// set queues e's job if it is terminal, unless it is queued at its
// completion time already, and marks its item stale otherwise. Caller
// holds the store's mu for writing.
func (q *doneQueue) set(e *entry) {
	if e.job.Kind != jobstate.KindTerminal {
		q.forget(e)
		return
	}
	at := tk(e.job.CompletedAt)
	if e.doneIn && e.doneS == at.s && e.doneNs == at.ns {
		return
	}
	q.forget(e)
	e.doneSeq++
	e.doneIn, e.doneS, e.doneNs = true, at.s, at.ns
	q.push(doneItem{s: at.s, ns: at.ns, seq: e.doneSeq, e: e})
	if q.stale > len(q.items)/2 && len(q.items) > minHeapCap {
		q.rebuild()
	}
}

// forget marks e's item, if any, stale.
func (q *doneQueue) forget(e *entry) {
	if e.doneIn {
		e.doneIn = false
		q.stale++
	}
}

// popBefore takes out and returns the job completed earliest, if that was
// before cut; nil otherwise.
func (q *doneQueue) popBefore(cut tkey) *entry {
	c := doneItem{s: cut.s, ns: cut.ns}
	for len(q.items) > 0 {
		it := q.items[0]
		cur := it.current()
		if cur && !it.before(&c) {
			return nil
		}
		q.removeTop()
		if !cur {
			q.stale--
			continue
		}
		it.e.doneIn = false
		return it.e
	}
	return nil
}

func (q *doneQueue) push(it doneItem) {
	q.items = append(q.items, it)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !it.before(&q.items[p]) {
			break
		}
		q.items[i] = q.items[p]
		i = p
	}
	q.items[i] = it
}

func (q *doneQueue) removeTop() {
	last := len(q.items) - 1
	it := q.items[last]
	q.items[last] = doneItem{}
	q.items = q.items[:last]
	if last > 0 {
		q.siftDown(0, it)
	}
}

// siftDown places it at i or below.
func (q *doneQueue) siftDown(i int, it doneItem) {
	n := len(q.items)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if q.items[k].before(&q.items[m]) {
				m = k
			}
		}
		if !q.items[m].before(&it) {
			break
		}
		q.items[i] = q.items[m]
		i = m
	}
	q.items[i] = it
}

// rebuild drops the stale items and restores the heap order: O(n), paid
// for by the more than n/2 changes that made items stale.
func (q *doneQueue) rebuild() {
	live := q.items[:0]
	for _, it := range q.items {
		if it.current() {
			live = append(live, it)
		}
	}
	clear(q.items[len(live):])
	q.items, q.stale = live, 0
	for i := (len(q.items) - 2) / 4; i >= 0; i-- {
		q.siftDown(i, q.items[i])
	}
}
