// Command crashworker is the worker process of sqlitestore's crash test:
// it opens the database file, claims jobs of the "crash" machine in
// batches and commits each with an effect that inserts the job's id into
// the program's own table (crashmachine.Table) in the store's
// transaction, until it is killed.
//
// Environment: CRASH_DB (the database file), CRASH_WORKER (its name, kept
// across restarts so that a restarted worker recovers its leases first).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/sqlitestore/internal/crashmachine"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "crashworker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	store, err := sqlitestore.Open(ctx, os.Getenv("CRASH_DB"), sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	def, err := jobstate.NewDefinition(crashmachine.Spec())
	if err != nil {
		return err
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	if err != nil {
		return err
	}
	name := os.Getenv("CRASH_WORKER")
	effect := func(ctx context.Context, j jobstate.Job) error {
		tx, ok := sqlitestore.Tx(ctx)
		if !ok {
			return errors.New("no store transaction")
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (?, ?)", j.ID[:], name)
		return err
	}
	// A restarted worker first gives back what its previous life held.
	for {
		if _, err := eng.RecoverWorker(ctx, name); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		cs, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: name}, 10)
		if err != nil || len(cs) == 0 {
			// Nothing to claim, or the file is busy: poll again.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, c := range cs {
			_, _ = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: effect})
		}
	}
}
