package pgtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/jobstatetest/envtest"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestNewEnvPassesEnvChecks runs jobstatetest's checks of an Env on
// PostgreSQL: outcomes, histories, the clock's instants to the nanosecond,
// lapsed leases, backoffs and snoozes, and the assertions' messages.
func TestNewEnvPassesEnvChecks(t *testing.T) {
	envtest.Run(t, func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env {
		e, _ := pgtest.NewEnv(t, opts...)
		return e
	})
}

// TestNewEnvWithGroupCommitPassesEnvChecks runs the same checks on a
// store that groups its commits.
func TestNewEnvWithGroupCommitPassesEnvChecks(t *testing.T) {
	envtest.Run(t, func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env {
		e, store := pgtest.NewEnvWith(t, pgstore.Options{GroupCommit: 4}, opts...)
		if !store.GroupsWrites() {
			t.Fatalf("the store options were not applied: no group commit")
		}
		return e
	})
}

// shipBackoff is the ship machine's delay before a retry.
const shipBackoff = 5 * time.Second

// shipMachine ships an order: queued → shipping → shipped, back to queued
// after shipBackoff on a failure.
func shipMachine(t *testing.T) *jobstate.Definition {
	t.Helper()
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
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(shipBackoff)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// shipEnv is an Env with the ship machine and the service's own table of
// shipments, in the Env's schema.
func shipEnv(t *testing.T) (*jobstatetest.Env, *pgstore.Store) {
	t.Helper()
	e, store := pgtest.NewEnv(t, jobstate.WithMachines(shipMachine(t)))
	// No unique key: a shipment recorded twice would show as two rows.
	if _, err := store.Pool().Exec(e.Ctx, `CREATE TABLE shipments (order_id text NOT NULL, job_id uuid NOT NULL, shipped_at timestamptz NOT NULL)`); err != nil {
		t.Fatalf("creating the service's table: %v", err)
	}
	return e, store
}

// recordShipment is the commit effect: a row of the service's table,
// written in the store's transaction, with the unqualified name the
// service's own code uses.
func recordShipment(ctx context.Context, j jobstate.Job) error {
	tx, ok := pgstore.Tx(ctx)
	if !ok {
		return errors.New("the effect runs outside the store's transaction")
	}
	_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id, job_id, shipped_at) VALUES ($1, $2, $3)`, string(j.Payload), j.ID, j.CompletedAt)
	return err
}

type shipment struct {
	job uuid.UUID
	at  time.Time
}

// shipments returns the rows of the service's table for the order, read
// by the table's qualified name in the Env's schema.
func shipments(t *testing.T, store *pgstore.Store, order string) []shipment {
	t.Helper()
	table := pgx.Identifier{store.Schema(), "shipments"}.Sanitize()
	rows, err := store.Pool().Query(context.Background(), `SELECT job_id, shipped_at FROM `+table+` WHERE order_id = $1`, order)
	if err != nil {
		t.Fatalf("reading the shipments: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (shipment, error) {
		var s shipment
		err := r.Scan(&s.job, &s.at)
		return s, err
	})
	if err != nil {
		t.Fatalf("reading the shipments: %v", err)
	}
	return out
}

// TestNewEnvEffectWritesInStoreTx: a handler whose commit effect inserts
// a row of the service's own table in the store's transaction, run by
// Env.Run: the job succeeds, and the row exists once, stamped with the
// Env's clock.
func TestNewEnvEffectWritesInStoreTx(t *testing.T) {
	e, store := shipEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "ship", Payload: []byte("o-1")})
	e.Advance(time.Minute)
	n := e.Run("ship", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Result: []byte("shipped"), Effect: recordShipment}, nil
	}))
	if n != 1 {
		t.Errorf("ran %d jobs, want 1", n)
	}
	e.AssertState(job.ID, "shipped")
	e.AssertHistory(job.ID, "create", "claim", "succeed")
	e.AssertCommittedOnce(job.ID)
	rows := shipments(t, store, "o-1")
	if len(rows) != 1 {
		t.Fatalf("%d shipments recorded for the order, want exactly 1", len(rows))
	}
	if rows[0].job != job.ID || !rows[0].at.Equal(jobstatetest.Epoch.Add(time.Minute)) {
		t.Errorf("shipment of job %s at %s, want job %s at the Env's clock %s", rows[0].job, rows[0].at, job.ID, jobstatetest.Epoch.Add(time.Minute))
	}
	if got := string(e.Get(job.ID).Result); got != "shipped" {
		t.Errorf("result %q", got)
	}
	// The store's own rows hold the clock's instants, not the server's.
	var completed time.Time
	jobs := pgx.Identifier{store.Schema(), "jobs"}.Sanitize()
	if err := store.Pool().QueryRow(e.Ctx, `SELECT completed_at FROM `+jobs+` WHERE id = $1`, job.ID).Scan(&completed); err != nil {
		t.Fatalf("reading the job's row: %v", err)
	}
	if !completed.Equal(jobstatetest.Epoch.Add(time.Minute)) {
		t.Errorf("the jobs row says completed at %s, want the Env's clock %s", completed, jobstatetest.Epoch.Add(time.Minute))
	}
}

// TestNewEnvRetriesOnTheClock: the handler fails once; the job is retried
// when the Env's clock has passed the backoff, not before, and its commit
// then records the shipment once.
func TestNewEnvRetriesOnTheClock(t *testing.T) {
	e, store := shipEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "ship", Payload: []byte("o-2")})
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if tk.Lease().Token == 1 {
			return jobstate.CommitInput{}, errors.New("carrier unavailable")
		}
		return jobstate.CommitInput{Result: []byte("shipped"), Effect: recordShipment}, nil
	})
	if n := e.Run("ship", h); n != 1 {
		t.Fatalf("first run: %d jobs, want 1", n)
	}
	e.AssertState(job.ID, "queued")
	if nb := e.Get(job.ID).NotBefore; !nb.Equal(jobstatetest.Epoch.Add(shipBackoff)) {
		t.Errorf("retry not before %s, want the clock plus the backoff, %s", nb, jobstatetest.Epoch.Add(shipBackoff))
	}
	e.Advance(shipBackoff - time.Nanosecond)
	if n := e.Run("ship", h); n != 0 {
		t.Errorf("ran %d jobs before the backoff passed, want 0", n)
	}
	if rows := shipments(t, store, "o-2"); len(rows) != 0 {
		t.Errorf("%d shipments before the retry, want 0", len(rows))
	}
	e.Advance(time.Nanosecond)
	if n := e.Run("ship", h); n != 1 {
		t.Errorf("ran %d jobs once the backoff passed, want 1", n)
	}
	e.AssertState(job.ID, "shipped")
	e.AssertHistory(job.ID, "create", "claim", "retry", "claim", "succeed")
	e.AssertCommittedOnce(job.ID)
	if rows := shipments(t, store, "o-2"); len(rows) != 1 || !rows[0].at.Equal(jobstatetest.Epoch.Add(shipBackoff)) {
		t.Errorf("shipments %v, want exactly one, at %s", rows, jobstatetest.Epoch.Add(shipBackoff))
	}
}

// TestNewEnvFailedEffectRollsBackItsRow: an effect that inserts its row
// and then fails takes the row down with the refused commit (they share
// the store's transaction); the retry records the shipment once.
func TestNewEnvFailedEffectRollsBackItsRow(t *testing.T) {
	e, store := shipEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "ship", Payload: []byte("o-3")})
	w := e.Worker(worker.Handle("ship", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		first := tk.Lease().Token == 1
		return jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
			if err := recordShipment(ctx, j); err != nil {
				return err
			}
			if first {
				return errors.New("label printer jammed")
			}
			return nil
		}}, nil
	}), 1))
	if n := e.Drain(w); n != 1 {
		t.Fatalf("first drain: %d jobs, want 1", n)
	}
	if rows := shipments(t, store, "o-3"); len(rows) != 0 {
		t.Fatalf("%d shipments after the failed effect, want 0: its row must roll back with the commit", len(rows))
	}
	e.AssertState(job.ID, "queued")
	if n := e.RunFor(w, shipBackoff, shipBackoff); n != 1 {
		t.Errorf("ran %d jobs after the backoff, want 1", n)
	}
	e.AssertHistory(job.ID, "create", "claim", "retry", "claim", "succeed")
	e.AssertCommittedOnce(job.ID)
	if rows := shipments(t, store, "o-3"); len(rows) != 1 {
		t.Errorf("%d shipments, want exactly 1", len(rows))
	}
}

// TestNewEnvCleansUp: when the test ends, the Env's schema, with the
// service's table in it, is dropped and its pool closed.
func TestNewEnvCleansUp(t *testing.T) {
	var store *pgstore.Store
	t.Run("env", func(t *testing.T) {
		_, store = shipEnv(t)
	})
	if err := store.Pool().Ping(context.Background()); err == nil {
		t.Error("the Env's pool is still open")
	}
	var left int
	if err := pgtest.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, store.Schema()).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("the Env's schema %s is still there", store.Schema())
	}
}
