package memstore

import (
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestHeapProperty: after any sequence of insertions, key changes and
// removals, every item is no less than its parent, every entry records
// its position, the top is the least key, and a walk visits the items in
// key order, stopping where its monotone filter fails.
func TestHeapProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHeap(availKey, func(e *entry) *int32 { return &e.availAt })
		var live []*entry
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		draw := func(e *entry, label string) {
			e.job.Priority = rapid.IntRange(-3, 3).Draw(rt, label+"-priority")
			e.job.CreatedAt = base.Add(time.Duration(rapid.IntRange(0, 20).Draw(rt, label+"-created")) * time.Millisecond)
		}
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for s := 0; s < steps; s++ {
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); {
			case op <= 1 || len(live) == 0: // insert
				e := newEntry()
				e.job.ID = uuid.New()
				draw(e, "new")
				h.set(e, true)
				live = append(live, e)
			case op == 2: // change a key
				e := live[rapid.IntRange(0, len(live)-1).Draw(rt, "which")]
				draw(e, "change")
				h.set(e, true)
			default: // remove
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "which")
				h.set(live[i], false)
				if live[i].availAt != -1 {
					rt.Fatalf("a removed entry keeps position %d", live[i].availAt)
				}
				live = append(live[:i], live[i+1:]...)
			}
			checkHeap(rt, h, live)
		}
		// A walk in order, stopping at a monotone filter.
		keys := make([]key, len(live))
		for i, e := range live {
			keys[i] = availKey(e)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].less(&keys[j]) })
		limit := rapid.IntRange(0, len(keys)).Draw(rt, "limit")
		var cut *key
		if c := rapid.IntRange(0, len(keys)).Draw(rt, "cut"); c < len(keys) {
			cut = &keys[c]
		}
		var got []key
		h.walk(func(it *item) bool {
			got = append(got, it.key)
			return len(got) < limit
		}, func(it *item) bool { return cut == nil || it.key.less(cut) })
		var want []key
		for i := range keys {
			if (cut != nil && !keys[i].less(cut)) || len(want) == max(limit, 1) {
				break
			}
			want = append(want, keys[i])
		}
		if len(got) != len(want) {
			rt.Fatalf("walk visited %d items, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				rt.Fatalf("walk item %d out of order", i)
			}
		}
	})
}

func checkHeap(rt *rapid.T, h *heap, live []*entry) {
	if len(h.items) != len(live) {
		rt.Fatalf("heap holds %d items, %d live", len(h.items), len(live))
	}
	for i := range h.items {
		it := &h.items[i]
		if int(it.e.availAt) != i {
			rt.Fatalf("item %d: its entry records position %d", i, it.e.availAt)
		}
		if it.key != availKey(it.e) {
			rt.Fatalf("item %d: stale key", i)
		}
		if i > 0 && it.key.less(&h.items[(i-1)/arity].key) {
			rt.Fatalf("item %d is less than its parent", i)
		}
	}
	for _, e := range live {
		k := availKey(e)
		if top := h.top(); top != nil && k.less(&top.key) {
			rt.Fatalf("an entry is less than the top")
		}
	}
}
