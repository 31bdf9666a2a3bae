// Command crashworker is the worker process of pgstore's crash tests: it
// claims jobs of the "crash" machine in batches and commits each with an
// effect that inserts the job's id into a table of the test, in the
// store's transaction, until it is killed.
//
// Environment: CRASH_URL (the database), CRASH_SCHEMA (the store's
// schema), CRASH_TABLE (the effect's table), CRASH_WORKER (its name),
// CRASH_GROUP (when set, the store has group commit and the jobs of a
// batch are committed concurrently, so that their commits share
// transactions).
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
	"github.com/jobstate/jobstate/pgstore/internal/workerprog"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	group := os.Getenv("CRASH_GROUP") != ""
	opts := pgstore.Options{Schema: os.Getenv("CRASH_SCHEMA")}
	if group {
		opts.GroupCommit = 16
	}
	env, err := workerprog.Open(ctx, os.Getenv("CRASH_URL"), 0, opts, crashmachine.Spec())
	if err != nil {
		return err
	}
	defer env.Close()
	eng, name := env.Engine, os.Getenv("CRASH_WORKER")
	effect := workerprog.InsertEffect(os.Getenv("CRASH_TABLE"))
	// A restarted worker first gives back what its previous life held.
	for {
		if _, err := eng.RecoverWorker(ctx, name); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		cs, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: name}, 10)
		if err != nil {
			// Nothing to claim, or the server is away: poll again.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !group {
			for _, c := range cs {
				_, _ = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: effect})
			}
			continue
		}
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func(c jobstate.Claimed) {
				defer wg.Done()
				_, _ = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: effect})
			}(c)
		}
		wg.Wait()
	}
}
