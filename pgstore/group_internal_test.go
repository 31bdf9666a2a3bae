package pgstore

import (
	"testing"
	"time"
)

// A group takes as many members as run within four of its round trips:
// all GroupCommit of them while they cost little, a few when each costs a
// round trip, one at least.
func TestGroupSizeFitsFourRoundTrips(t *testing.T) {
	g := newGrouper(nil, 32, 8)
	if got := g.fits(); got != 32 {
		t.Fatalf("before anything was measured a group takes %d, want GroupCommit (32)", got)
	}
	g.rtt.Store(int64(60 * time.Millisecond))
	g.fnTime.Store(int64(60 * time.Millisecond))
	if got := g.fits(); got != 4 {
		t.Fatalf("members costing a round trip each: %d fit, want 4", got)
	}
	g.fnTime.Store(int64(time.Second))
	if got := g.fits(); got != 1 {
		t.Fatalf("members costing more than four round trips: %d fit, want 1", got)
	}
	g.rtt.Store(int64(time.Millisecond))
	g.fnTime.Store(int64(time.Microsecond))
	if got := g.fits(); got < 32 {
		t.Fatalf("members costing microseconds on a near server: %d fit, want at least GroupCommit", got)
	}
}

// The moving average starts at the first value and moves an eighth of
// the way to each next one.
func TestAverageMovesAnEighth(t *testing.T) {
	g := newGrouper(nil, 2, 2)
	average(&g.rtt, 80*time.Millisecond)
	average(&g.rtt, 160*time.Millisecond)
	if got := time.Duration(g.rtt.Load()); got != 90*time.Millisecond {
		t.Fatalf("average %s, want 90ms", got)
	}
}
