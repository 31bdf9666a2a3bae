package memstore

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestSortedSetMatchesSortedSlice checks the set against a sorted slice
// over random insertions and removals, enough of them to split and merge
// blocks: the items in order, the block invariants, and every seek and
// step from every place it seeks to.
func TestSortedSetMatchesSortedSlice(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var set sortedSet
		var ref []litem
		var pool []*entry
		newItem := func() litem {
			e := &entry{}
			e.job.ID = uuid.New()
			pool = append(pool, e)
			return litem{s: int64(rapid.IntRange(0, 40).Draw(rt, "s")), ns: int32(rapid.IntRange(0, 2).Draw(rt, "ns")), e: e}
		}
		n := rapid.IntRange(0, 2000).Draw(rt, "n")
		for i := 0; i < n; i++ {
			if len(ref) > 0 && rapid.IntRange(0, 2).Draw(rt, "remove") == 0 {
				k := rapid.IntRange(0, len(ref)-1).Draw(rt, "which")
				if !set.remove(ref[k]) {
					rt.Fatalf("remove of a present item failed")
				}
				ref = slices.Delete(ref, k, k+1)
				continue
			}
			it := newItem()
			set.insert(it)
			k, _ := slices.BinarySearchFunc(ref, it, func(a, b litem) int {
				if itemLess(a, b) {
					return -1
				}
				return 1
			})
			ref = slices.Insert(ref, k, it)
		}
		if set.remove(litem{s: -1, e: &entry{}}) {
			rt.Fatalf("remove of an absent item succeeded")
		}
		if set.n != len(ref) {
			rt.Fatalf("n = %d, want %d", set.n, len(ref))
		}
		var flat []litem
		for _, blk := range set.blocks {
			if len(blk) == 0 || len(blk) > blockMax {
				rt.Fatalf("block of %d items", len(blk))
			}
			flat = append(flat, blk...)
		}
		if !slices.Equal(flat, ref) {
			rt.Fatalf("items out of order or lost")
		}
		// Walk forwards and backwards from a few probes.
		for k := 0; k < 5; k++ {
			p := &probe{t: tkey{s: int64(rapid.IntRange(-1, 41).Draw(rt, "ps"))}}
			if len(ref) > 0 && rapid.Bool().Draw(rt, "exact") {
				r := rapid.SampledFrom(ref).Draw(rt, "at")
				p = &probe{t: r.at(), id: r.e.job.ID}
			}
			ge := slices.IndexFunc(ref, func(it litem) bool { return p.cmp(it) <= 0 })
			gt := slices.IndexFunc(ref, func(it litem) bool { return p.cmp(it) < 0 })
			for _, c := range []struct {
				at   pos
				want int
			}{{set.seekGE(p), ge}, {set.seekGT(p), gt}} {
				if c.want < 0 {
					c.want = len(ref)
				}
				var fwd []litem
				for q := c.at; ; q = set.next(q) {
					it, ok := set.at(q)
					if !ok {
						break
					}
					fwd = append(fwd, it)
				}
				if !slices.Equal(fwd, ref[c.want:]) {
					rt.Fatalf("forward walk from probe gives %d items, want %d", len(fwd), len(ref)-c.want)
				}
				var back []litem
				for q := set.prev(c.at); ; q = set.prev(q) {
					it, ok := set.at(q)
					if !ok {
						break
					}
					back = append(back, it)
				}
				slices.Reverse(back)
				if !slices.Equal(back, ref[:c.want]) {
					rt.Fatalf("backward walk from probe gives %d items, want %d", len(back), c.want)
				}
			}
		}
	})
}
