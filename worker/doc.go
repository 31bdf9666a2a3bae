// Package worker is the runtime that runs jobstate jobs: register a
// handler per machine, and Run claims due jobs and runs their handlers
// within per-machine and overall concurrency limits.
//
//	w, err := worker.New(eng,
//		worker.WithName("queue-worker-1"),
//		worker.Handle("queue", worker.HandlerFunc(process), 8),
//	)
//	if err != nil {
//		return err // a *worker.ConfigError naming every problem
//	}
//	return w.Run(ctx) // until ctx ends, then a graceful shutdown
//
// A handler receives its job through a *Task, which holds the lease: it
// may move the job between active states (Task.Advance), and it returns
// the result and effect to commit (a nil error: Engine.Succeed, the
// effect applied exactly once), Snooze(d) (Engine.Snooze), or an error
// (Engine.Fail, classified by the machine into a retry or a failure). A
// panic fails the execution with the panic value and stack.
//
// The runtime renews leases (every third of the TTL by default) and
// cancels the handler's context at once when the lease is lost, the job
// is cancelled, the handler's timeout passes or the shutdown's grace
// period ends; context.Cause tells which (*LeaseLostError,
// *JobCancelledError, *TimeoutError, *ShutdownError). It sweeps (with
// jitter) in every process, recovers a restarted worker's executions at
// start, claims in batches sized to the free slots (Engine.ClaimMany),
// wakes on the store's notifications where it has them
// (jobstate.Notifier) and polls otherwise, and sits still when idle.
// A handler's slot is freed when it returns, and the write that ends its
// job's execution (the commit with its effect, a failure or a snooze) is
// made after, bounded by WithCommitsAhead: the job counts as done only
// once that write has committed.
//
// A store that cannot be reached (jobstate.ErrUnavailable) is never a
// failure of a job: the runtime makes the write that ends an execution
// again with backoff while the lease is live, reads the execution to
// settle a write whose answer was lost (jobstate.ErrOutcomeUnknown), and
// logs the outage once: a WARN record when it begins, an INFO record when
// it ends.
//
// Its own timers come from a Clock (SystemClock by default), so tests
// drive it with a manual clock (jobstatetest.Clock) and never sleep;
// everything about job state follows the engine's clock. Logs go to a
// log/slog logger (WithLogger), silent by default.
//
// See docs/worker.md for the full behaviour, shutdown included.
package worker
