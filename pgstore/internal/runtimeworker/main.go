// Command runtimeworker is a worker process of pgstore's crash test of the
// worker runtime (TestRuntimeCrashSignals): it runs worker.New(...).Run on
// pgstore for the crash machine's jobs (package crashmachine), with a
// handler whose commit effect inserts the job's id into a table of the
// test through the store's transaction, so that the row is written if and
// only if the commit is.
//
// The handler works 1–5 ms. A job whose payload is "slow" works much
// longer on its first attempt: it is still running when the process is
// stopped, so that its lease must be given back. With CRASH_STUBBORN set,
// such a handler also ignores its context once it is cancelled and never
// returns, like a handler stuck in a call that takes no context: a
// graceful shutdown then waits for it after giving its lease back, and
// only a second signal (a hard stop) ends the process.
//
// Signals: the first SIGTERM or SIGINT ends Run's context, which starts
// the runtime's graceful shutdown (no more claims, running handlers
// finish within the grace period, the others are cancelled and their
// leases given back at once); the second calls Worker.Stop, a hard stop.
// The process exits 0 once Run has returned, 1 on an error. It prints
// "ready" on standard output once it handles the signals.
//
// Environment: CRASH_URL (the database), CRASH_SCHEMA (the store's
// schema), CRASH_TABLE (the effect's table), CRASH_WORKER (the worker's
// name, kept across restarts so that Run recovers the previous process's
// leases at start), CRASH_GROUP (when set, the store has group commit),
// CRASH_STUBBORN (see above), CRASH_GRACE (the grace period, default
// 300ms), CRASH_LEASE (the lease TTL, default 2s), CRASH_SLOW (how long a
// slow job works, default 2s), CRASH_LOG (when set, the runtime logs at
// Info level to standard error).
package main

import (
	"context"
	"errors"
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

// slowPayload marks the jobs that work long on their first attempt; the
// test creates them with this payload.
const slowPayload = "slow"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runtimeworker:", err)
		os.Exit(1)
	}
}

// config is the process's settings, read from the environment.
type config struct {
	url, schema, table, name string
	group, stubborn, log     bool
	grace, lease, slow       time.Duration
}

func readConfig() (config, error) {
	c := config{
		url:      os.Getenv("CRASH_URL"),
		schema:   os.Getenv("CRASH_SCHEMA"),
		table:    os.Getenv("CRASH_TABLE"),
		name:     os.Getenv("CRASH_WORKER"),
		group:    os.Getenv("CRASH_GROUP") != "",
		stubborn: os.Getenv("CRASH_STUBBORN") != "",
		log:      os.Getenv("CRASH_LOG") != "",
	}
	if c.url == "" || c.schema == "" || c.table == "" || c.name == "" {
		return c, errors.New("CRASH_URL, CRASH_SCHEMA, CRASH_TABLE and CRASH_WORKER are required")
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
		def time.Duration
	}{
		{"CRASH_GRACE", &c.grace, 300 * time.Millisecond},
		{"CRASH_LEASE", &c.lease, 2 * time.Second},
		{"CRASH_SLOW", &c.slow, 2 * time.Second},
	} {
		*d.to = d.def
		if v := os.Getenv(d.env); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("%s: %w", d.env, err)
			}
			*d.to = p
		}
	}
	return c, nil
}

// handler is the worker's handler for the crash machine.
type handler struct {
	slow     time.Duration
	stubborn bool
	effect   jobstate.EffectFunc // inserts the job's id into the test's table
}

// Work works a few milliseconds (a slow job on its first attempt: h.slow,
// or, stubborn, until it is cancelled and then forever) and returns a
// commit with h.effect.
func (h *handler) Work(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
	d := time.Duration(1+rand.IntN(5)) * time.Millisecond
	if string(t.Job().Payload) == slowPayload && t.Lease().Token == 1 {
		if h.stubborn {
			<-ctx.Done()
			select {} // ignores its context: only the process's exit ends it
		}
		d = h.slow
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return jobstate.CommitInput{Effect: h.effect}, nil
	case <-ctx.Done():
		return jobstate.CommitInput{}, context.Cause(ctx)
	}
}

func run() error {
	// The signals are registered first, for the life of the process, so
	// that none can kill it by the default action: it exits 0 after a
	// stop. Signals before Run are kept in the channel.
	sigs := workerprog.Signals()
	fmt.Println("ready") // the signals are handled from here on

	c, err := readConfig()
	if err != nil {
		return err
	}
	opts := pgstore.Options{Schema: c.schema}
	if c.group {
		opts.GroupCommit = 16
	}
	// 12 connections: 8 handlers, the claims, the sweeps and the
	// notification listener.
	env, err := workerprog.Open(context.Background(), c.url, 12, opts, crashmachine.Spec())
	if err != nil {
		return err
	}
	defer env.Close()
	h := &handler{slow: c.slow, stubborn: c.stubborn, effect: workerprog.InsertEffect(c.table)}
	wopts := []worker.Option{
		worker.WithName(c.name),
		worker.Handle(crashmachine.Name, h, 8, worker.LeaseTTL(c.lease)),
		worker.WithPollInterval(50 * time.Millisecond),
		worker.WithSweepInterval(250 * time.Millisecond),
		worker.WithGracePeriod(c.grace),
	}
	w, err := worker.New(env.Engine, append(wopts, workerprog.LogOptions(c.log)...)...)
	if err != nil {
		return fmt.Errorf("the worker: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workerprog.StopOnSignals(sigs, nil, cancel, w)
	err = w.Run(ctx)
	if errors.Is(err, worker.ErrStopped) {
		return nil // two signals before Run: stopped hard before it claimed anything
	}
	if err != nil {
		return fmt.Errorf("running the worker: %w", err)
	}
	return nil
}
