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
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
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
	pool, err := pgxpool.New(context.Background(), os.Getenv("CRASH_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	opts := pgstore.Options{Schema: os.Getenv("CRASH_SCHEMA")}
	if os.Getenv("CRASH_GROUP") != "" {
		opts.GroupCommit = 16
	}
	store, err := pgstore.New(pool, opts)
	if err != nil {
		return err
	}
	defer store.Close()
	def, err := jobstate.NewDefinition(crashmachine.RuntimeSpec())
	if err != nil {
		return err
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	if err != nil {
		return err
	}
	table := os.Getenv("CRASH_TABLE")
	effect := func(ctx context.Context, j jobstate.Job) error {
		tx, ok := pgstore.Tx(ctx)
		if !ok {
			return errors.New("no store transaction")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" (job) VALUES ($1)", j.ID)
		return err
	}
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
	w, err := worker.New(eng,
		worker.WithName(os.Getenv("CRASH_WORKER")),
		worker.Handle(crashmachine.RuntimeName, handler, 8),
		worker.WithPollInterval(50*time.Millisecond),
		worker.WithSweepInterval(500*time.Millisecond),
		worker.WithGracePeriod(gracePeriod),
	)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done() // the first signal: Run starts a graceful shutdown
		stop()
		second := make(chan os.Signal, 1)
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		<-second // the second: a hard stop
		w.Stop()
	}()
	return w.Run(ctx)
}
