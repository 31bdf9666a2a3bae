package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
)

// A service creates a job in the same transaction as its own order row,
// and a worker commits the job's effect, a row of the service's own
// table, in the store's transaction: the order and its job exist
// together or not at all, and the shipment is recorded exactly once.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("JOBSTATE_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: "shop_jobs"}); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.Options{Schema: "shop_jobs"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name:    "ship",
		Initial: "queued",
		States: []jobstate.StateSpec{
			{Name: "queued", Kind: jobstate.KindReady},
			{Name: "shipping", Kind: jobstate.KindActive},
			{Name: "shipped", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"queued"}, Event: jobstate.EventClaim, To: "shipping"},
			{From: []jobstate.State{"shipping"}, Event: jobstate.EventSucceed, To: "shipped"},
			{From: []jobstate.State{"shipping"}, Event: jobstate.EventRetry, To: "queued"},
			{From: []jobstate.State{"shipping"}, Event: jobstate.EventFail, To: "failed"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}

	// The service: the order and its shipping job in one transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ('o-1')`); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Create(pgstore.WithTx(ctx, tx), jobstate.NewJob{Machine: "ship", Payload: []byte("o-1"), Key: "o-1"}); err != nil {
		log.Fatal(err) // the order is rolled back with the job
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// A worker: the shipment row commits with the job's commit, or not
	// at all.
	c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "ship", Worker: "worker-1"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
		tx, _ := pgstore.Tx(ctx)
		_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id) VALUES ($1)`, string(j.Payload))
		return err
	}})
	if err != nil {
		log.Fatal(err)
	}
}
