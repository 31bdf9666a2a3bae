package memstore

import (
	"bytes"
	"slices"

	"github.com/google/uuid"
)

// litem is a job's place in a listing index: its sort time (as in tkey)
// and its entry, whose job id, fixed for the job's life, breaks ties.
type litem struct {
	s  int64
	ns int32
	e  *entry
}

func (it litem) at() tkey { return tkey{s: it.s, ns: it.ns} }

// probe is a place to seek in a listing index: a time and a job id.
type probe struct {
	t  tkey
	id uuid.UUID
}

// cmp returns -1, 0 or +1 as p sorts before, at or after it.
func (p *probe) cmp(it litem) int {
	if c := p.t.cmp(it.at()); c != 0 {
		return c
	}
	return bytes.Compare(p.id[:], it.e.job.ID[:])
}

// itemLess orders two items of an index.
func itemLess(a, b litem) bool {
	if c := a.at().cmp(b.at()); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.e.job.ID[:], b.e.job.ID[:]) < 0
}

// blockMax is the most items a block of a sortedSet holds. Inserting or
// removing moves at most this many items; finding the block is a binary
// search over n/blockMax block ends.
const blockMax = 128

// sortedSet is an ordered set of listing items, kept as a list of sorted
// blocks (each at most blockMax items, none empty), so that insertion and
// removal cost O(log n) comparisons plus a move of at most blockMax items,
// and iteration from any place walks arrays. It is guarded by the store's
// lock.
type sortedSet struct {
	blocks [][]litem
	n      int
	// spare is the last block's array once the set has emptied, kept for
	// the next insertion: a set that a job enters and leaves over and over
	// (a state jobs pass through) does not allocate.
	spare []litem
}

// pos is a place in a sortedSet: block b, index i. With i outside the
// block, it is past an end.
type pos struct{ b, i int }

// blockFor returns the index of the first block whose last item is not
// before it, or the last block.
func (s *sortedSet) blockFor(less func(last litem) bool) int {
	b, _ := slices.BinarySearchFunc(s.blocks, 0, func(blk []litem, _ int) int {
		if less(blk[len(blk)-1]) {
			return -1
		}
		return 1
	})
	return min(b, len(s.blocks)-1)
}

// insert adds it, which must not be in the set.
func (s *sortedSet) insert(it litem) {
	s.n++
	if len(s.blocks) == 0 {
		blk := s.spare
		if blk == nil {
			blk = make([]litem, 0, 8)
		}
		s.spare = nil
		s.blocks = append(s.blocks, append(blk, it))
		return
	}
	b := s.blockFor(func(last litem) bool { return itemLess(last, it) })
	blk := s.blocks[b]
	i, _ := slices.BinarySearchFunc(blk, it, func(x, y litem) int {
		if itemLess(x, y) {
			return -1
		}
		return 1
	})
	blk = slices.Insert(blk, i, it)
	if len(blk) <= blockMax {
		s.blocks[b] = blk
		return
	}
	// Split a full block in two halves, each in an array of its own with
	// room to grow to blockMax.
	half := len(blk) / 2
	left := make([]litem, half, blockMax)
	right := make([]litem, len(blk)-half, blockMax)
	copy(left, blk[:half])
	copy(right, blk[half:])
	s.blocks[b] = left
	s.blocks = slices.Insert(s.blocks, b+1, right)
}

// remove takes it out of the set, and reports whether it was there.
func (s *sortedSet) remove(it litem) bool {
	if s.n == 0 {
		return false
	}
	b := s.blockFor(func(last litem) bool { return itemLess(last, it) })
	blk := s.blocks[b]
	i, found := slices.BinarySearchFunc(blk, it, func(x, y litem) int {
		switch {
		case x.e == y.e:
			return 0
		case itemLess(x, y):
			return -1
		}
		return 1
	})
	if !found {
		return false
	}
	s.n--
	blk = slices.Delete(blk, i, i+1)
	switch {
	case len(blk) == 0:
		if len(s.blocks) == 1 {
			s.spare = blk
		}
		s.blocks = slices.Delete(s.blocks, b, b+1)
	case len(blk) < blockMax/4 && b+1 < len(s.blocks) && len(blk)+len(s.blocks[b+1]) <= blockMax/2:
		// Merge small neighbours, so that blocks stay at least a few
		// items on average and the block list short.
		s.blocks[b] = append(blk, s.blocks[b+1]...)
		s.blocks = slices.Delete(s.blocks, b+1, b+2)
	default:
		s.blocks[b] = blk
	}
	return true
}

// seekGE returns the place of the first item not before p (past the end
// when there is none).
func (s *sortedSet) seekGE(p *probe) pos {
	return s.seek(func(it litem) bool { return p.cmp(it) > 0 })
}

// seekGT returns the place of the first item after p.
func (s *sortedSet) seekGT(p *probe) pos {
	return s.seek(func(it litem) bool { return p.cmp(it) >= 0 })
}

// seek returns the place of the first item for which before is false;
// before must hold for a prefix of the set.
func (s *sortedSet) seek(before func(litem) bool) pos {
	if len(s.blocks) == 0 {
		return pos{}
	}
	b := s.blockFor(before)
	blk := s.blocks[b]
	i, _ := slices.BinarySearchFunc(blk, 0, func(it litem, _ int) int {
		if before(it) {
			return -1
		}
		return 1
	})
	if i == len(blk) && b+1 < len(s.blocks) {
		return pos{b + 1, 0}
	}
	return pos{b, i}
}

// at returns the item at p, if p is inside the set.
func (s *sortedSet) at(p pos) (litem, bool) {
	if p.b < 0 || p.b >= len(s.blocks) || p.i < 0 || p.i >= len(s.blocks[p.b]) {
		return litem{}, false
	}
	return s.blocks[p.b][p.i], true
}

// next returns the place after p.
func (s *sortedSet) next(p pos) pos {
	if p.i+1 < len(s.blocks[p.b]) || p.b+1 >= len(s.blocks) {
		return pos{p.b, p.i + 1}
	}
	return pos{p.b + 1, 0}
}

// prev returns the place before p, which may be one past the end.
func (s *sortedSet) prev(p pos) pos {
	if p.i > 0 {
		return pos{p.b, p.i - 1}
	}
	if p.b == 0 {
		return pos{0, -1}
	}
	return pos{p.b - 1, len(s.blocks[p.b-1]) - 1}
}
