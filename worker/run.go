package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobstate/jobstate"
)

// Run runs the worker until ctx ends or Stop is called, then shuts it down
// gracefully, and returns nil once it has stopped. A Worker runs once:
// a second Run returns ErrStopped, a Run during Drain ErrRunning.
//
// At start it recovers the executions a previous process of the same name
// left (Engine.RecoverWorker, only for a worker given WithName) and
// sweeps once. Then it claims due jobs of its machines in batches sized to
// the free slots (Engine.ClaimMany), whenever the store signals a job may
// be claimable (jobstate.Notifier), when a slot frees while more jobs may
// be due, and every poll interval; it sweeps every sweep interval; and it
// creates the jobs of the schedules given with Periodic as their periods
// start.
// A worker with nothing to do waits on its timers: it does not spin.
//
// Shutdown: the first stop signal (ctx ending, or Stop, or Shutdown)
// stops claiming and sweeping and lets running handlers finish for the
// grace period. When it ends, the handlers still running have their
// contexts cancelled with a *ShutdownError and their leases given back at
// once with Engine.Snooze(0): the job is ready (or waiting, due now) with
// no failure counted, so another worker can claim it without waiting for
// the lease TTL (a machine whose retry rule leads to a waiting state needs
// a sweep first; the stopping worker runs one). Whatever such a handler
// returns later is dropped (the engine would refuse it), so nothing is
// committed twice and nothing is lost; a handler that returns within the
// grace period is committed, failed or snoozed as usual. Run returns
// when every handler has returned and every commit ahead (see
// WithCommitsAhead) has ended. A second stop signal stops hard: the
// grace period ends at once, and Run returns without waiting for handlers
// that ignore their context, nor for commits in flight. On any stop Run
// waits for the claims in flight (one store call each) and for what
// becomes of the jobs they return: after a hard stop those jobs never
// start and their leases are given back (one try while the store cannot
// be reached) before Run returns, so that no lease of a claim committed
// after the stop is left to lapse.
//
// A store that cannot be reached (jobstate.ErrUnavailable) fails no job:
// the write that ends a handler's execution is made again with backoff
// while its lease is live, until the grace period ends once a shutdown
// began (a give-back: until a hard stop), and a write whose answer was
// lost (jobstate.ErrOutcomeUnknown) is settled by reading the execution;
// a job left when the runtime gives up is recovered by the sweep once its
// lease lapses. Heartbeats, claims and sweeps are made again at their
// next round. The outage is logged once (see WithLogger).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.begin(phaseRunning, ctx); err != nil {
		return err
	}
	defer w.finish()
	stop := context.AfterFunc(ctx, w.Stop)
	defer stop()

	w.logf(ctx, slog.LevelInfo, "worker started", slog.Int("concurrency", w.limit))
	w.recoverAndSweep()
	subCtx, cancel := context.WithCancel(w.base)
	notify := w.subscribe(subCtx)
	swept := make(chan struct{})
	go w.sweeper(subCtx, swept)
	var scheduling sync.WaitGroup
	for _, pj := range w.periodics {
		scheduling.Add(1)
		go func() {
			defer scheduling.Done()
			w.scheduler(subCtx, pj)
		}()
	}
	w.loop(notify)
	cancel()
	<-swept
	scheduling.Wait()
	w.shutdown()
	w.logf(w.base, slog.LevelInfo, "worker stopped")
	return nil
}

// begin moves the worker into phase p, refusing when it cannot.
func (w *Worker) begin(p phase, ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.phase == phaseRunning || w.phase == phaseDraining:
		return ErrRunning
	case p == phaseRunning && (w.phase == phaseDone || w.level > 0):
		return ErrStopped
	}
	w.phase = p
	w.base = context.WithoutCancel(ctx)
	w.endCh = make(chan struct{})
	if p == phaseRunning {
		w.halt = w.hardCh
	} else {
		w.halt = ctx.Done()
	}
	return nil
}

// writesStop returns the channel that stops the tries of the writes that
// end handlers' executions: closed when the grace period ends.
func (w *Worker) writesStop() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endCh
}

// givingBackStop returns the channel that stops the tries of give-backs:
// closed by a hard stop.
func (w *Worker) givingBackStop() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.halt
}

// finish ends Run or Drain.
func (w *Worker) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase == phaseRunning {
		w.phase = phaseDone
		close(w.done)
		return
	}
	w.phase = phaseIdle
	w.budget = -1
	w.ended = false
}

func (w *Worker) draining() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.phase == phaseDraining
}

// recoverAndSweep ends what a previous process of the same name held,
// then sweeps once.
func (w *Worker) recoverAndSweep() {
	ctx := w.base
	if w.named {
		m := w.out.mark()
		rep, err := w.eng.RecoverWorker(ctx, w.name)
		switch {
		case unavailable(err):
			// The executions left behind are recovered by the sweep when
			// their leases lapse.
			w.out.failed(ctx, m, "recover", err)
		case err != nil:
			w.out.answered(ctx, m, err)
			w.logf(ctx, slog.LevelError, "recovering the worker's executions failed", slog.Any("error", err))
		default:
			w.out.answered(ctx, m, nil)
			if rep.Jobs > 0 {
				w.logf(ctx, slog.LevelInfo, "recovered the executions of a previous run", slog.Int("finalized", rep.Finalized), slog.Int("aborted", rep.Aborted))
			}
		}
	}
	w.sweepOnce(ctx)
}

// subscribe returns the store's wake-up channel, or nil when the store
// does not notify.
func (w *Worker) subscribe(ctx context.Context) <-chan struct{} {
	n, ok := w.eng.Store().(jobstate.Notifier)
	if !ok {
		return nil
	}
	machines := make([]string, len(w.routes))
	for i, r := range w.routes {
		machines[i] = r.machine
	}
	ch, _, err := n.Subscribe(ctx, machines...)
	if err != nil {
		w.logf(ctx, slog.LevelWarn, "store notifications unavailable: polling only", slog.Any("error", err))
		return nil
	}
	return ch
}

// loop claims until the first stop signal.
func (w *Worker) loop(notify <-chan struct{}) {
	// The poll timer is armed once the first round is done, so that a
	// worker with its timers armed is a worker at rest.
	var poll Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		if w.stopping() {
			return
		}
		if w.claimRound(w.base) {
			continue
		}
		if poll == nil {
			poll = w.clock.NewTimer(w.jittered(w.poll))
		} else {
			poll.Reset(w.jittered(w.poll))
		}
		select {
		case <-w.graceCh:
			return
		case _, ok := <-notify:
			if !ok {
				notify = nil
				w.logf(w.base, slog.LevelWarn, "store notifications ended: polling only")
			}
		case <-w.wake:
		case <-poll.C():
		}
	}
}

// claimRound claims, for each machine in turn, as many due jobs as it has
// free slots, and starts them. It reports whether a machine got all it
// asked for and still has free slots: another round may find more.
func (w *Worker) claimRound(ctx context.Context) (more bool) {
	w.starved.Store(false)
	n := len(w.routes)
	if n == 0 {
		return false // a runtime that only creates periodic jobs
	}
	first := w.rr
	w.rr = (w.rr + 1) % n
	// One wait for freed slots per round, shared by its machines.
	var deadline time.Time
	if w.batch {
		now := time.Now()
		for _, r := range w.routes {
			if d := r.gatherDeadline(now); d.After(deadline) {
				deadline = d
			}
		}
	}
	for i := 0; i < n; i++ {
		r := w.routes[(first+i)%n]
		if w.stopping() {
			return false
		}
		if !r.enter() {
			r.rewake.Store(true)
			continue // the claim of the machine in flight fills its free slots
		}
		w.gather(r, 0, deadline)
		g, starved := w.reserve(r, int64(r.limit))
		if g == 0 {
			r.leave()
			r.rewake.Store(true)
			r.more.Store(true) // its goroutines claim on as they finish
			if starved {
				w.starved.Store(true)
			}
			continue
		}
		got, asked, full := w.claimReserved(ctx, r, 0, g)
		if asked == 0 {
			return false // Drain's limit reached
		}
		for _, c := range got {
			w.launch(r, c)
		}
		if full && w.hasFree(r) {
			more = true
		}
	}
	return more
}

// claimReserved claims for the slots of r the caller holds: own of its
// own, which it keeps, and extra taken by reserve, all within Drain's
// limit, with the claim of r in flight (enter), which it ends (leave).
// Slots left unused are released, the caller's own last. It returns the
// jobs claimed, how many it asked for (0: Drain's limit left none), and
// whether it got them all; it logs a failed claim and records in r.more
// whether r may have more due jobs.
func (w *Worker) claimReserved(ctx context.Context, r *route, own, extra int64) (got []jobstate.Claimed, asked int64, full bool) {
	g := own + extra
	if n := int64(w.take(int(g))); n < g {
		back := min(g-n, extra)
		w.release(r, back)
		extra -= back
		g = n
	}
	if g == 0 {
		r.leave()
		return nil, 0, false
	}
	t0 := time.Now()
	m := w.out.mark()
	got, err := w.eng.ClaimMany(ctx, r.request(w.name), int(g))
	r.noteClaim(time.Since(t0), len(got))
	r.leave()
	if unused := g - int64(len(got)); unused > 0 {
		w.release(r, min(unused, extra))
		w.refund(int(unused))
	}
	w.claimed(ctx, m, r, err)
	full = err == nil && int64(len(got)) == g
	r.more.Store(full)
	return got, g, full
}

// claimed records the result of a claim of r started at mark m: a store
// that cannot be reached is an outage (the claim is made again at the
// next round: the next poll, wake-up or freed slot); any other failure,
// which no round will mend by itself, is an ERROR.
func (w *Worker) claimed(ctx context.Context, m uint64, r *route, err error) {
	switch {
	case err == nil || errors.Is(err, jobstate.ErrNoJob):
		w.out.answered(ctx, m, nil)
	case unavailable(err):
		w.out.failed(ctx, m, "claim", err, slog.String("machine", r.machine))
		w.out.retry()
	default:
		w.out.answered(ctx, m, err)
		w.logf(ctx, slog.LevelError, "claim failed", slog.String("machine", r.machine), slog.Any("error", err))
	}
}

// hasFree reports whether r has a free slot that is free overall too.
func (w *Worker) hasFree(r *route) bool {
	return int64(r.limit)-r.running.Load() > 0 && int64(w.limit)-w.running.Load() > 0
}

// enter marks a claim of r in flight, unless one is. One at a time:
// concurrent claims of one machine skip each other's rows and take
// smaller batches.
func (r *route) enter() bool { return r.claiming.CompareAndSwap(false, true) }

// leave ends the claim marked by enter.
func (r *route) leave() { r.claiming.Store(false) }

// reserve takes up to want free slots of r that are free overall too,
// atomically against other claimers, and returns how many; starved
// reports that r had free slots but the overall limit left none.
func (w *Worker) reserve(r *route, want int64) (g int64, starved bool) {
	for {
		cur := r.running.Load()
		g = min(want, int64(r.limit)-cur)
		if g <= 0 {
			return 0, false
		}
		if r.running.CompareAndSwap(cur, cur+g) {
			break
		}
	}
	for {
		cur := w.running.Load()
		o := min(g, int64(w.limit)-cur)
		if o <= 0 {
			r.running.Add(-g)
			return 0, true
		}
		if w.running.CompareAndSwap(cur, cur+o) {
			if o < g {
				r.running.Add(o - g)
			}
			return o, false
		}
	}
}

// release gives back n slots of r taken by reserve.
func (w *Worker) release(r *route, n int64) {
	r.running.Add(-n)
	w.running.Add(-n)
	r.freed()
}

// take reserves up to n of Drain's remaining claims and returns how many
// (n outside Drain's limit).
func (w *Worker) take(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.budget < 0 {
		return n
	}
	n = min(n, w.budget)
	w.budget -= n
	return n
}

// refund returns unused claims to Drain's limit.
func (w *Worker) refund(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.budget >= 0 {
		w.budget += n
	}
}

// sweeper sweeps every (jittered) sweep interval until ctx ends.
func (w *Worker) sweeper(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := w.clock.NewTimer(w.jittered(w.sweep))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		w.sweepOnce(ctx)
		t.Reset(w.jittered(w.sweep))
	}
}

// sweepOnce sweeps, and wakes the claim loop when jobs became ready.
func (w *Worker) sweepOnce(ctx context.Context) jobstate.SweepReport {
	m := w.out.mark()
	rep, err := w.eng.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopped by the shutdown: what was swept stays swept.
		w.logf(ctx, slog.LevelDebug, "sweep stopped", slog.Any("error", err))
	case unavailable(err):
		// Swept again at the next interval.
		w.out.failed(ctx, m, "sweep", err, slog.Int("failures", len(rep.Failures)))
		w.out.retry()
	case err != nil:
		// Jobs the sweep cannot move (a guard or an effect refusing) stay
		// stuck until someone looks.
		w.out.answered(ctx, m, err)
		w.logf(ctx, slog.LevelWarn, "sweep failed", slog.Int("failures", len(rep.Failures)), slog.Any("error", err))
	default:
		w.out.answered(ctx, m, nil)
	}
	if rep.Requeued+rep.Retried > 0 {
		w.poke()
	}
	if rep.Jobs > 0 {
		w.logf(ctx, slog.LevelDebug, "swept", slog.Int("jobs", rep.Jobs), slog.Int("requeued", rep.Requeued),
			slog.Int("retried", rep.Retried), slog.Int("failed", rep.Failed), slog.Int("finalized", rep.Finalized), slog.Int("expired", rep.Expired))
	}
	return rep
}
