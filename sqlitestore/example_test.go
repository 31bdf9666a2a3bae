package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// exampleSpec is a small queue: queued → running → sent, or failed.
func exampleSpec() jobstate.Spec {
	return jobstate.Spec{
		Name:    "email",
		Initial: "queued",
		States: []jobstate.StateSpec{
			{Name: "queued", Kind: jobstate.KindReady},
			{Name: "running", Kind: jobstate.KindActive},
			{Name: "sent", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"queued"}, Event: jobstate.EventClaim, To: "running"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventSucceed, To: "sent"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventFail, To: "failed"},
		},
	}
}

// Open a store in a file, run a job, and commit its effect (a row of the
// program's own table) in the store's transaction, exactly once.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitestore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"), sqlitestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE outbox (job BLOB PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	def, err := jobstate.NewDefinition(exampleSpec())
	if err != nil {
		log.Fatal(err)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "email", Payload: []byte(`{"to":"ann"}`)}); err != nil {
		log.Fatal(err)
	}
	c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "email", Worker: "w1"})
	if err != nil {
		log.Fatal(err)
	}
	job, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
		tx, _ := sqlitestore.Tx(ctx)
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox (job) VALUES (?)`, j.ID[:])
		return err
	}})
	if err != nil {
		log.Fatal(err)
	}
	var rows int
	if err := store.DB().QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&rows); err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, rows)
	// Output: sent 1
}

// A program's own row and a job commit together, or not at all.
func ExampleWithTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitestore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"), sqlitestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	def, err := jobstate.NewDefinition(exampleSpec())
	if err != nil {
		log.Fatal(err)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}

	tx, err := store.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (1)`); err != nil {
		log.Fatal(err)
	}
	c, err := eng.Create(sqlitestore.WithTx(ctx, tx), jobstate.NewJob{Machine: "email", Key: "order-1"})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Rollback(); err != nil { // the order is dropped: so is its job
		log.Fatal(err)
	}
	_, err = eng.Get(ctx, c.Job.ID)
	fmt.Println(err != nil)
	// Output: true
}
