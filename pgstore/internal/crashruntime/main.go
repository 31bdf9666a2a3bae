// Command crashruntime is a worker process of pgstore's crash tests that
// runs the worker runtime (package worker): a handler for the crash
// machine's runtime variant that works a few milliseconds, one job in
// twenty much longer, and commits an effect inserting the job's id into a
// table of the test, in the store's transaction.
//
// SIGTERM (or SIGINT) starts the runtime's graceful shutdown: no more
// claims, running handlers finish within the grace period, the others are
// cancelled and their leases given back at once. A second signal stops
// hard. The process exits 0 once Run has returned.
//
// Environment: CRASH_URL (the database), CRASH_SCHEMA (the store's
// schema), CRASH_TABLE (the effect's table), CRASH_WORKER (the worker's
// name, kept across restarts so that the runtime recovers its leases at
// start), CRASH_GROUP (when set, the store has group commit).
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
	"github.com/jobstate/jobstate/pgstore/internal/workerprog"
	"github.com/jobstate/jobstate/worker"
)

// gracePeriod is how long running handlers may finish after SIGTERM.
const gracePeriod = 300 * time.Millisecond

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashruntime:", err)
		os.Exit(1)
	}
}

func run() error {
	// The signals are registered first, for the life of the process: the
	// first starts the graceful shutdown, the second stops hard.
	sigs := workerprog.Signals()
	opts := pgstore.Options{Schema: os.Getenv("CRASH_SCHEMA")}
	if os.Getenv("CRASH_GROUP") != "" {
		opts.GroupCommit = 16
	}
	env, err := workerprog.Open(context.Background(), os.Getenv("CRASH_URL"), 0, opts, crashmachine.RuntimeSpec())
	if err != nil {
		return err
	}
	defer env.Close()
	effect := workerprog.InsertEffect(os.Getenv("CRASH_TABLE"))
	handler := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		d := time.Duration(1+rand.IntN(5)) * time.Millisecond
		if rand.IntN(20) == 0 {
			d = 5 * time.Second // outlasts the grace period: given back at shutdown
		}
		select {
		case <-time.After(d):
			return jobstate.CommitInput{Effect: effect}, nil
		case <-ctx.Done():
			return jobstate.CommitInput{}, context.Cause(ctx)
		}
	})
	w, err := worker.New(env.Engine,
		worker.WithName(os.Getenv("CRASH_WORKER")),
		worker.Handle(crashmachine.RuntimeName, handler, 8),
		worker.WithPollInterval(50*time.Millisecond),
		worker.WithSweepInterval(500*time.Millisecond),
		worker.WithGracePeriod(gracePeriod),
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workerprog.StopOnSignals(sigs, nil, cancel, w)
	return w.Run(ctx)
}
