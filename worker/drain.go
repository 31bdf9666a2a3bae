package worker

import (
	"context"
	"fmt"
)

// Drain runs the worker synchronously until no job of its machines is
// due: it claims and runs due jobs within the concurrency limits, waits
// for the handlers, and when nothing is claimable and nothing runs, sweeps
// (at the engine clock's current time) and tries again; it returns when a
// sweep made nothing claimable. It starts no timers of its own besides the
// handlers' heartbeats and timeouts, so with a manual clock the outcome
// depends only on the handlers: jobstatetest builds on it, and a process
// may use it to work off a backlog and exit.
//
// max bounds the jobs claimed (no bound when max <= 0); reaching it makes
// Drain stop claiming, wait for the handlers, and return ErrDrainLimit,
// whether or not jobs remain (a handler that keeps snoozing with no delay
// would otherwise keep Drain busy for ever). It returns the number of
// jobs claimed. If ctx ends, the running handlers are cancelled and their
// leases given back as at the end of Run's grace period, and Drain
// returns ctx's error once they have returned. Drain may be called any
// number of times, but not during Run (ErrRunning); after a stop signal it
// claims nothing.
func (w *Worker) Drain(ctx context.Context, max int) (int, error) {
	if err := w.begin(phaseDraining, ctx); err != nil {
		return 0, err
	}
	defer w.finish()
	if max > 0 {
		w.mu.Lock()
		w.budget = max
		w.mu.Unlock()
	}
	start := w.launched.Load()
	count := func() int { return int(w.launched.Load() - start) }
	sweptAt := int64(-1)
	for {
		if ctx.Err() != nil {
			w.endGrace(&ShutdownError{Hard: true})
			w.wg.Wait()
			return count(), ctx.Err()
		}
		if w.claimRound(ctx) {
			continue
		}
		if w.running.Load() > 0 || w.pending.Load() > 0 {
			select {
			case <-w.wake:
			case <-ctx.Done():
			}
			continue
		}
		if max > 0 && count() >= max {
			return count(), ErrDrainLimit
		}
		if w.stopping() || sweptAt == w.launched.Load() {
			return count(), nil
		}
		sweptAt = w.launched.Load()
		m := w.out.mark()
		_, err := w.eng.Sweep(ctx)
		if unavailable(err) {
			w.out.failed(ctx, m, "sweep", err)
		} else {
			w.out.answered(ctx, m, err)
		}
		if err != nil {
			return count(), fmt.Errorf("worker: drain: %w", err)
		}
	}
}
