// Command periodicworker is the worker process of pgstore's test of
// periodic jobs across processes (TestPeriodicThreeProcesses): it runs
// worker.New(...).Run on pgstore with a periodic schedule of the tick
// machine (package tickmachine), worker.Every(PERIODIC_EVERY) on the
// machine's real clock, and a handler for that machine whose commit
// effect inserts the job's id into a table of the test through the
// store's transaction, so that the row is written if and only if the
// commit is. Each job's payload is the name of the process that created
// it.
//
// Start: the process connects, builds its runtime and prints "ready" on
// standard output; it then waits for a line on standard input before it
// calls Run, so that the test decides when the schedule starts, whatever
// the process's own start-up took.
//
// Stop: the first SIGTERM or SIGINT, or the end of standard input (the
// test is gone) or a second line on it, ends Run's context: a graceful
// shutdown. A second signal
// calls Worker.Stop, a hard stop. The process exits 0 once Run has
// returned (or when stopped before it started), 1 on an error.
//
// Environment: PERIODIC_URL (the database), PERIODIC_SCHEMA (the store's
// schema), PERIODIC_TABLE (the effect's table), PERIODIC_WORKER (the
// worker's name, kept across restarts so that Run recovers the previous
// process's leases at start), PERIODIC_EVERY (the schedule's interval,
// default 1s), PERIODIC_CATCHUP ("none", the default, or "last"),
// PERIODIC_LOG (when set, the runtime logs at Info level to standard
// error).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/periodicworker/tickmachine"
	"github.com/jobstate/jobstate/pgstore/internal/workerprog"
	"github.com/jobstate/jobstate/worker"
)

// gracePeriod is how long running handlers may finish after SIGTERM.
const gracePeriod = time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "periodicworker:", err)
		os.Exit(1)
	}
}

// config is the process's settings, read from the environment.
type config struct {
	url, schema, table, name string
	every                    time.Duration
	catchUp                  worker.CatchUp
	log                      bool
}

func readConfig() (config, error) {
	c := config{
		url:    os.Getenv("PERIODIC_URL"),
		schema: os.Getenv("PERIODIC_SCHEMA"),
		table:  os.Getenv("PERIODIC_TABLE"),
		name:   os.Getenv("PERIODIC_WORKER"),
		every:  time.Second,
		log:    os.Getenv("PERIODIC_LOG") != "",
	}
	if c.url == "" || c.schema == "" || c.table == "" || c.name == "" {
		return c, errors.New("PERIODIC_URL, PERIODIC_SCHEMA, PERIODIC_TABLE and PERIODIC_WORKER are required")
	}
	if v := os.Getenv("PERIODIC_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("PERIODIC_EVERY: %w", err)
		}
		c.every = d
	}
	switch v := os.Getenv("PERIODIC_CATCHUP"); v {
	case "", "none":
		c.catchUp = worker.CatchUpNone
	case "last":
		c.catchUp = worker.CatchUpLast
	default:
		return c, fmt.Errorf("PERIODIC_CATCHUP: %q is neither none nor last", v)
	}
	return c, nil
}

func run() error {
	// Signals are handled from the start, for the life of the process, so
	// that none, not even one arriving while the process starts or
	// exits, kills it by the default action.
	sigs := workerprog.Signals()

	c, err := readConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 8 connections: 2 handlers, the claims, the sweeps, the schedule and
	// the notification listener.
	env, err := workerprog.Open(ctx, c.url, 8, pgstore.Options{Schema: c.schema}, tickmachine.Spec())
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	succeed := jobstate.CommitInput{Effect: workerprog.InsertEffect(c.table)}
	handler := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return succeed, nil
	})
	creator := []byte(c.name)
	wopts := []worker.Option{
		worker.WithName(c.name),
		worker.Handle(tickmachine.Name, handler, 2),
		worker.Periodic(tickmachine.Schedule, tickmachine.Name, worker.Every(c.every),
			worker.PeriodicPayload(creator), worker.PeriodicCatchUp(c.catchUp)),
		worker.WithPollInterval(100 * time.Millisecond),
		worker.WithSweepInterval(500 * time.Millisecond),
		worker.WithGracePeriod(gracePeriod),
	}
	w, err := worker.New(env.Engine, append(wopts, workerprog.LogOptions(c.log)...)...)
	if err != nil {
		return fmt.Errorf("the worker: %w", err)
	}

	fmt.Println("ready")
	// The first line on standard input starts the runtime; its end (the
	// test is gone) or a signal before it stops the process.
	lines := make(chan error, 2)
	go func() {
		in := bufio.NewReader(os.Stdin)
		for {
			_, err := in.ReadString('\n')
			lines <- err
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-sigs:
		return nil
	case err := <-lines:
		if err != nil {
			return nil
		}
	}
	// A signal, the end of standard input or any further line on it
	// starts a graceful shutdown; a second signal, a hard stop.
	workerprog.StopOnSignals(sigs, lines, cancel, w)
	if err := w.Run(ctx); err != nil {
		return fmt.Errorf("running the worker: %w", err)
	}
	return nil
}
