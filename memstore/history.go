package memstore

import (
	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// logChunk is how many transition records one chunk of the store's
// history log holds.
const logChunk = 1024

// historyLog holds every job's transition records, appended in chunks
// whose records are not moved as the log grows: a job keeps only the
// positions of its records, so a growing history costs a few bytes per
// record, not a reallocation of the records themselves.
//
// Pruned jobs' records are cleared, and a chunk left with no live record
// is released. A chunk but the one being filled (the tail) that falls
// below half full is queued; once Prune has deleted what it deletes, it
// compacts queued chunks, a bounded number of records per hold of the
// store's lock, for as long as the chunks but the tail are less than half
// full overall: a chunk's live records are moved to the tail (their
// owners' positions updated) and the chunk is released. So once Prune
// returns, the log's memory is within twice what its live records need,
// plus one chunk and one spare; moving a record is paid for by the
// clearing of at least one other; and a log whose old chunks empty in
// order (jobs finishing first in, first out) moves little or nothing.
//
// The log and every entry's history positions are guarded by the store's
// mu alone.
type historyLog struct {
	chunks []*chunk // by chunk number; nil for a released one
	free   []int    // released chunk numbers, reused first
	tail   int      // number of the chunk being filled; -1 before the first
	sparse []*chunk // chunks queued for compaction
	live   int      // live records in all chunks
	// spare is the records of the last chunk released (every record of a
	// released chunk is zero), kept for the next chunk: a log whose old
	// chunks empty as new ones fill reuses one array instead of
	// allocating 150 KB under the store's lock every 1,024 records.
	spare []jobstate.Transition
}

// chunk is logChunk records. A record's JobID names the job that owns it
// (the store refuses records of other jobs); a cleared record is zero.
type chunk struct {
	recs []jobstate.Transition // logChunk of them, allocated apart: a size of whole pages
	n    int                   // records written
	live int                   // records not cleared
	num  int                   // the chunk's number
	qpos int                   // position in the log's sparse queue; -1 when not in it
}

func newHistoryLog() historyLog { return historyLog{tail: -1} }

// historyRoom is the room a new entry's history positions start with: a
// short lifecycle (created, claimed, finished, and one more) in one
// allocation, rather than three as it grows.
const historyRoom = 4

// add appends t as the next record of e's history.
func (l *historyLog) add(e *entry, t *jobstate.Transition) {
	if e.history == nil {
		e.history = make([]int, 0, historyRoom)
	}
	e.history = append(e.history, l.put(t))
}

// put writes t in the tail and returns its position.
func (l *historyLog) put(t *jobstate.Transition) int {
	if l.tail < 0 || l.chunks[l.tail].n == logChunk {
		l.grow()
	}
	c := l.chunks[l.tail]
	i := c.n
	c.recs[i] = *t
	c.n++
	c.live++
	l.live++
	return l.tail*logChunk + i
}

// grow starts a new tail chunk. The old tail, full now, is queued for
// compaction if records were cleared from it while it was being filled.
func (l *historyLog) grow() {
	old := l.tail
	if n := len(l.free); n > 0 {
		l.tail = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		l.tail = len(l.chunks)
		l.chunks = append(l.chunks, nil)
	}
	recs := l.spare
	if recs == nil {
		recs = make([]jobstate.Transition, logChunk)
	}
	l.spare = nil
	l.chunks[l.tail] = &chunk{recs: recs, num: l.tail, qpos: -1}
	if old >= 0 {
		l.check(l.chunks[old])
	}
}

// check releases c if it holds no live record, and queues it for
// compaction if it is less than half full. c is not the tail.
func (l *historyLog) check(c *chunk) {
	switch {
	case c.live == 0:
		l.release(c)
	case c.live < logChunk/2 && c.qpos < 0:
		c.qpos = len(l.sparse)
		l.sparse = append(l.sparse, c)
	}
}

func (l *historyLog) release(c *chunk) {
	if c.qpos >= 0 {
		last := len(l.sparse) - 1
		l.sparse[c.qpos] = l.sparse[last]
		l.sparse[c.qpos].qpos = c.qpos
		l.sparse[last] = nil
		l.sparse = l.sparse[:last]
		c.qpos = -1
	}
	l.chunks[c.num] = nil
	l.free = append(l.free, c.num)
	if l.spare == nil {
		l.spare = c.recs
	}
}

func (l *historyLog) at(pos int) *jobstate.Transition {
	return &l.chunks[pos/logChunk].recs[pos%logChunk]
}

// clear forgets the record at pos.
func (l *historyLog) clear(pos int) {
	ci, i := pos/logChunk, pos%logChunk
	c := l.chunks[ci]
	c.recs[i] = jobstate.Transition{}
	c.live--
	l.live--
	if ci != l.tail {
		l.check(c)
	}
}

// clearAll forgets every record of e's history.
func (l *historyLog) clearAll(e *entry) {
	for _, pos := range e.history {
		l.clear(pos)
	}
	e.history = nil
}

// compact compacts queued chunks while the chunks but the tail are less
// than half full overall, until about budget records have been moved, and
// reports whether it has more to do. owner returns the entry of a job
// that owns live records.
func (l *historyLog) compact(budget int, owner func(uuid.UUID) *entry) bool {
	for len(l.sparse) > 0 && budget > 0 && l.wasteful() {
		c := l.sparse[len(l.sparse)-1]
		budget -= c.live
		l.move(c, owner) // releasing c takes it out of the queue
	}
	if len(l.sparse) == 0 && cap(l.sparse) > 64 {
		l.sparse = nil
	}
	return len(l.sparse) > 0 && l.wasteful()
}

// wasteful reports whether the chunks but the tail are less than half
// full of live records.
func (l *historyLog) wasteful() bool {
	return 2*l.live < (l.chunksInUse()-1)*logChunk
}

// move moves the live records of c, which is not the tail, to the tail,
// updating their owners' positions, and releases c. Each owner's history
// is scanned once, for all of its records in c.
func (l *historyLog) move(c *chunk, owner func(uuid.UUID) *entry) {
	for i := 0; i < c.n && c.live > 0; i++ {
		id := c.recs[i].JobID
		if id == uuid.Nil {
			continue // cleared, or moved with an earlier record of its job
		}
		e := owner(id)
		for k, pos := range e.history {
			if pos/logChunk == c.num {
				r := &c.recs[pos%logChunk]
				e.history[k] = l.put(r)
				*r = jobstate.Transition{}
				c.live--
				l.live--
			}
		}
	}
	l.release(c)
}

// chunksInUse returns how many chunks the log holds.
func (l *historyLog) chunksInUse() int { return len(l.chunks) - len(l.free) }
