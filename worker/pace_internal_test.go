package worker

import (
	"testing"
	"time"
)

// A write that takes more than a quarter of the lease it had left halves
// the bound on commits ahead, once for the writes that began before the
// halving; a quicker one raises it by one, never past WithCommitsAhead.
func TestPaceHalvesOnSlowWritesAndGrowsByOne(t *testing.T) {
	p := newPace(100, 32)
	if !p.room(31) || p.room(32) {
		t.Fatalf("a pace starting at 32 must leave room for 31 in flight and not for 32")
	}
	lease := 4 * time.Second
	began := time.Now()
	p.took(began, 2*time.Second, lease) // more than a quarter: halve
	if p.limit != 16 {
		t.Fatalf("after a slow write the bound is %d, want 16", p.limit)
	}
	p.took(began, 2*time.Second, lease) // began before the halving: no second one
	if p.limit != 16 {
		t.Fatalf("a slow write that began before the halving halved again: %d", p.limit)
	}
	p.took(p.cut.Add(time.Millisecond), 2*time.Second, lease)
	if p.limit != 8 {
		t.Fatalf("a slow write that began after the halving: bound %d, want 8", p.limit)
	}
	p.took(time.Now(), time.Second, lease) // a quarter exactly: not slow
	if p.limit != 9 {
		t.Fatalf("a write within a quarter of its lease: bound %d, want 9", p.limit)
	}
	for range 200 {
		p.took(time.Now(), time.Millisecond, lease)
	}
	if p.limit != 100 {
		t.Fatalf("quick writes raise the bound to WithCommitsAhead and no further: %d", p.limit)
	}
}
