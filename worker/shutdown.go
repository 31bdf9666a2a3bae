package worker

import (
	"context"
	"log/slog"
	"sync"
)

// Stop signals the worker to stop, without waiting. The first signal (the
// context given to Run ending counts as one) starts a graceful shutdown;
// the second stops hard (see Run). Stop before Run makes Run return
// ErrStopped at once.
func (w *Worker) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.signal(w.level + 1)
}

// signal raises the stop level to at least l. Caller holds mu.
func (w *Worker) signal(l int) {
	if l >= 1 && w.level < 1 {
		close(w.graceCh)
	}
	if l >= 2 && w.level < 2 {
		close(w.hardCh)
	}
	w.level = max(w.level, min(l, 2))
}

// Shutdown starts a graceful shutdown, unless one is under way, and waits
// until Run has returned. If ctx ends first, it stops hard and waits for
// Run to return, which it then does promptly (once the claims in flight
// have returned and their jobs are given back, see Run); the error is
// then ctx's.
// Shutdown of a worker that is not running marks it stopped and returns
// nil.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	w.signal(1)
	running := w.phase == phaseRunning || w.phase == phaseDone
	w.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	w.signal(2)
	w.mu.Unlock()
	<-w.done
	return ctx.Err()
}

// shutdown waits for running handlers for the grace period, then cancels
// them and gives their leases back; a hard stop does so at once and does
// not wait for the handlers to return, nor for commits in flight. Either
// way it returns only once the claims in flight of handler goroutines
// have returned and the jobs they took are started or given back: after
// a hard stop they are given back, with one try while the store cannot
// be reached, so that a claim committed after the stop leaves no lease to
// lapse.
func (w *Worker) shutdown() {
	defer w.claims.Wait()
	idle := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(idle)
	}()
	if w.running.Load() > 0 {
		w.logf(w.base, slog.LevelInfo, "stopping: waiting for running handlers", slog.Int64("running", w.running.Load()), slog.Duration("grace", w.grace))
	}
	grace := w.clock.NewTimer(w.grace)
	defer grace.Stop()
	select {
	case <-idle:
		return
	case <-grace.C():
		w.endGrace(&ShutdownError{Grace: w.grace})
	case <-w.hardCh:
		w.endGrace(&ShutdownError{Grace: w.grace, Hard: true})
		return
	}
	select {
	case <-idle:
	case <-w.hardCh:
	}
}

// endGrace cancels every running handler with cause and gives its lease
// back; from then on a job claimed is given back at once. If any lease was
// given back it sweeps once, so that a job given back to a waiting state
// becomes ready now rather than at some worker's next sweep.
func (w *Worker) endGrace(cause *ShutdownError) {
	w.mu.Lock()
	if !w.ended {
		close(w.endCh)
	}
	w.ended = true
	var back []*Task
	for t := range w.tasks {
		if t.state.CompareAndSwap(taskRunning, taskGivenBack) {
			back = append(back, t)
		}
	}
	w.mu.Unlock()
	for _, t := range back {
		t.cancel(cause)
	}
	if len(back) == 1 {
		w.giveBack(back[0])
	} else {
		// Each give-back tries again while the store cannot be reached:
		// together, so that an outage costs the shutdown one lease's
		// remaining time at most, not one per job.
		var wg sync.WaitGroup
		for _, t := range back {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.giveBack(t)
			}()
		}
		wg.Wait()
	}
	if len(back) > 0 {
		w.logf(w.base, slog.LevelInfo, "gave back the leases of unfinished handlers", slog.Int("jobs", len(back)), slog.Bool("hard", cause.Hard))
		w.sweepOnce(w.base)
	}
}
