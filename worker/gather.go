package worker

import (
	"sync/atomic"
	"time"
)

// Gathering freed slots before a claim.
//
// On a store with batch claims a claim costs about the same for one job
// as for many (two round trips on pgstore), so a claim that leaves out
// slots about to be freed wastes most of a claim. When handlers of the
// machine are still running, the claimer (holding the machine's one
// claim in flight) first waits a short while for them to end: until none
// is running, or at most a quarter of the time the machine's recent
// claims took (maxGather at most; no wait when claims cost less than
// minGatherPerJob for each job they take). Short handlers thus end before the
// claim and their slots join it; a long handler delays a claim by at most
// that bound. The wait is measured in real time, not on the worker's
// Clock: it is about the store's latency, not about leases or backoff.

// maxGather bounds one wait for freed slots. minGatherPerJob is the
// average claim time per job claimed below which there is no wait: a
// claim's cost then grows with its jobs (an in-memory store), so that
// gathering more jobs into one claim saves nothing and the wait is lost.
const (
	maxGather       = time.Millisecond
	minGatherPerJob = 25 * time.Microsecond
)

// gatherDeadline returns when a claim of r should stop waiting for freed
// slots, from the durations of r's recent claims; zero when it should not
// wait.
func (r *route) gatherDeadline(now time.Time) time.Time {
	if time.Duration(r.claimPerJob.Load()) < minGatherPerJob {
		return time.Time{}
	}
	return now.Add(min(time.Duration(r.claimAvg.Load())/4, maxGather))
}

// noteClaim folds one claim of r, of d for n jobs, into the moving
// averages of claim durations and of durations per job (weight 1/8).
func (r *route) noteClaim(d time.Duration, n int) {
	ewma(&r.claimAvg, int64(d))
	ewma(&r.claimPerJob, int64(d)/int64(max(n, 1)))
}

// ewma folds x into the moving average a (weight 1/8; the first value as
// it is).
func ewma(a *atomic.Int64, x int64) {
	for {
		old := a.Load()
		next := x
		if old > 0 {
			next = old + (x-old)/8
		}
		if a.CompareAndSwap(old, next) {
			return
		}
	}
}

// freed signals a wait in gather that a slot of r was freed.
func (r *route) freed() {
	select {
	case r.slotFreed <- struct{}{}:
	default:
	}
}

// gather waits, for the caller holding r's claim in flight, until at most
// own slots of r are taken (the caller's own), the deadline passes, or the
// worker stops. A zero deadline returns at once.
func (w *Worker) gather(r *route, own int64, deadline time.Time) {
	if deadline.IsZero() || r.running.Load() <= own {
		return
	}
	left := time.Until(deadline)
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	for r.running.Load() > own {
		select {
		case <-r.slotFreed:
		case <-t.C:
			return
		case <-w.graceCh:
			return
		}
	}
}
