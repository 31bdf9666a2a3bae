package worker

import (
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"
)

// gatherEnv is a worker and one machine with taken slots, for gather.
func gatherEnv(taken int64) (*Worker, *route) {
	w := &Worker{graceCh: make(chan struct{})}
	r := &route{machine: "task", limit: 4, slotFreed: make(chan struct{}, 1)}
	r.running.Store(taken)
	w.running.Store(taken)
	return w, r
}

// gatherAsync runs gather in a goroutine and closes the channel it
// returns when gather returns.
func gatherAsync(w *Worker, r *route, own int64, deadline time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		w.gather(r, own, deadline)
		close(done)
	}()
	return done
}

func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// TestGatherWaitsForFreedSlots: with three slots taken and one its own,
// the claimer waits until the two others are freed, and not longer.
func TestGatherWaitsForFreedSlots(t *testing.T) {
	w, r := gatherEnv(3)
	done := gatherAsync(w, r, 1, time.Now().Add(time.Hour))
	w.release(r, 1)
	// Two slots are still taken: gather cannot have returned (its
	// deadline is an hour away and the worker is not stopping).
	assert.False(t, returned(done), "gather returned with a slot still taken")
	w.release(r, 1)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("gather did not return once only its own slot was taken")
	}
	assert.Equal(t, int64(1), r.running.Load())
}

// TestGatherDeadline: slots that stay taken delay the claim until the
// deadline only.
func TestGatherDeadline(t *testing.T) {
	w, r := gatherEnv(3)
	deadline := time.Now().Add(2 * time.Millisecond)
	w.gather(r, 0, deadline)
	assert.False(t, time.Now().Before(deadline), "gather returned before its deadline with slots taken")
	assert.Equal(t, int64(3), r.running.Load(), "gather frees nothing itself")
}

// TestGatherStops: the worker's stop ends a wait at once.
func TestGatherStops(t *testing.T) {
	w, r := gatherEnv(3)
	done := gatherAsync(w, r, 0, time.Now().Add(time.Hour))
	close(w.graceCh)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("gather went on waiting after the stop")
	}
}

// TestGatherNoWait: no deadline (no claim measured yet, or a store
// without batch claims), a deadline passed, or no other slot taken: no
// wait at all.
func TestGatherNoWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		taken    int64
		own      int64
		deadline time.Time
	}{
		{"no deadline", 3, 0, time.Time{}},
		{"deadline passed", 3, 0, time.Now().Add(-time.Second)},
		{"only its own slot taken", 1, 1, time.Now().Add(time.Hour)},
	} {
		w, r := gatherEnv(tc.taken)
		select {
		case <-gatherAsync(w, r, tc.own, tc.deadline):
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: gather waited", tc.name)
		}
		assert.Equal(t, tc.taken, r.running.Load(), tc.name)
	}
}

// TestGatherDeadlineFromClaims: the wait is a quarter of the moving
// average of the claims' durations, at most maxGather; none before a
// claim was measured, or when claims cost less than minGatherPerJob for
// each job they take.
func TestGatherDeadlineFromClaims(t *testing.T) {
	_, r := gatherEnv(0)
	now := time.Unix(1_000_000, 0)
	assert.True(t, r.gatherDeadline(now).IsZero(), "no claim measured: no wait")

	r.noteClaim(400*time.Microsecond, 100) // 4 µs per job
	assert.True(t, r.gatherDeadline(now).IsZero(), "claims costing little per job: no wait")

	_, r = gatherEnv(0)
	r.noteClaim(400*time.Microsecond, 4) // 100 µs per job
	assert.Equal(t, now.Add(100*time.Microsecond), r.gatherDeadline(now), "a quarter of the first claim")

	r.noteClaim(1200*time.Microsecond, 0) // average 400 + 800/8 = 500 µs; a claim that took none counts as one job
	assert.Equal(t, now.Add(125*time.Microsecond), r.gatherDeadline(now))

	for i := 0; i < 100; i++ {
		r.noteClaim(time.Second, 10)
	}
	assert.Equal(t, now.Add(maxGather), r.gatherDeadline(now), "capped")

	require.NotPanics(t, func() { r.noteClaim(0, 0) }, "a claim measured as zero")
}
