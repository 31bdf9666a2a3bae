package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// requireUnavailable asserts that err is a *jobstate.UnavailableError of
// the store operation op, saying whether the write may have been applied.
func requireUnavailable(t *testing.T, err error, op string, mayHaveApplied bool) {
	t.Helper()
	require.ErrorIs(t, err, jobstate.ErrUnavailable)
	var ue *jobstate.UnavailableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, op, ue.Op, "%v", err)
	assert.Equal(t, mayHaveApplied, ue.MayHaveApplied, "%v", err)
	assert.Equal(t, mayHaveApplied, errors.Is(err, jobstate.ErrOutcomeUnknown), "%v", err)
	assert.NotNil(t, ue.Err)
}

// terminate ends the backend pid (from a connection of admin) and waits
// until it has exited.
func terminate(t *testing.T, admin *pgxpool.Pool, pid uint32) {
	t.Helper()
	var ok bool
	require.NoError(t, admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 30000)", int32(pid)).Scan(&ok))
	require.True(t, ok, "backend %d did not exit", pid)
}

// storeOn returns a store on pool, in a migrated schema of its own, and
// an engine on it running workSpec (with spec's changes, if any) on a
// manual clock.
func storeOn(t *testing.T, pool *pgxpool.Pool, opts pgstore.Options, change func(*jobstate.Spec)) (*pgstore.Store, *jobstate.Engine, *jobstate.ManualClock) {
	t.Helper()
	opts.Schema = pgtest.Schema(t)
	store, err := pgstore.New(pool, opts)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	spec := workSpec()
	if change != nil {
		change(&spec)
	}
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	clock := jobstate.NewManualClock(epoch)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock))
	require.NoError(t, err)
	return store, eng, clock
}

// receipts makes a table in the store's schema recording the effects
// that ran, and returns an effect inserting the job's id through the
// store's transaction, and a count of a job's receipts.
func receipts(t *testing.T, store *pgstore.Store) (jobstate.EffectFunc, func(id uuid.UUID) int) {
	t.Helper()
	admin := pgtest.Pool(t)
	table := store.Schema() + ".receipts"
	_, err := admin.Exec(context.Background(), "CREATE TABLE "+table+" (job uuid NOT NULL)")
	require.NoError(t, err)
	effect := func(ctx context.Context, j jobstate.Job) error {
		tx, ok := pgstore.Tx(ctx)
		if !ok {
			return errors.New("no transaction in the effect's context")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", j.ID)
		return err
	}
	count := func(id uuid.UUID) int {
		var n int
		require.NoError(t, admin.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE job = $1", id).Scan(&n))
		return n
	}
	return effect, count
}

// events counts the transitions of a job's history made by ev.
func events(t *testing.T, eng *jobstate.Engine, id uuid.UUID, ev jobstate.Event) int {
	t.Helper()
	h, err := eng.History(context.Background(), id)
	require.NoError(t, err)
	n := 0
	for _, tr := range h {
		if tr.Event == ev {
			n++
		}
	}
	return n
}

// killer terminates, when armed, the backend of the next connection its
// pool hands out, before the store sends anything on it.
type killer struct {
	admin *pgxpool.Pool
	armed atomic.Bool
	kills atomic.Int32
	t     *testing.T
}

func (k *killer) arm() { k.armed.Store(true) }

// pool opens a pool of at most n connections on the shared cluster,
// whose acquisitions k watches.
func (k *killer) pool(n int32) *pgxpool.Pool {
	cluster, _ := pgtest.Shared(k.t)
	cfg, err := pgxpool.ParseConfig(cluster.URL)
	require.NoError(k.t, err)
	cfg.MaxConns = n
	cfg.BeforeAcquire = func(ctx context.Context, c *pgx.Conn) bool {
		if k.armed.CompareAndSwap(true, false) {
			var ok bool
			if err := k.admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 30000)", int32(c.PgConn().PID())).Scan(&ok); err == nil && ok {
				k.kills.Add(1)
			}
		}
		return true
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(k.t, err)
	k.t.Cleanup(p.Close)
	return p
}

// TestUnavailableConnectionTerminated: every Engine operation whose
// connection was terminated before it sent anything fails with
// ErrUnavailable, nothing applied; retried, it succeeds, once.
func TestUnavailableConnectionTerminated(t *testing.T) {
	k := &killer{admin: pgtest.Pool(t), t: t}
	pool := k.pool(1)
	store, eng, clock := storeOn(t, pool, pgstore.Options{}, nil)
	effect, count := receipts(t, store)
	ctx := context.Background()
	killed := func() {
		t.Helper()
		require.Equal(t, int32(1), k.kills.Swap(0), "the connection was terminated")
	}
	jobs := func() int {
		n, err := eng.Counts(ctx, "work")
		require.NoError(t, err)
		total := 0
		for _, c := range n {
			total += c
		}
		return total
	}

	// Create, without and with a key: nothing is created, and a retry
	// creates the job once.
	k.arm()
	_, err := eng.Create(ctx, jobstate.NewJob{Machine: "work"})
	killed()
	requireUnavailable(t, err, "create", false)
	k.arm()
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k"})
	killed()
	requireUnavailable(t, err, "create", false)
	assert.Equal(t, 0, jobs())
	c1, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Priority: 1})
	require.NoError(t, err)
	c2, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k"})
	require.NoError(t, err)
	assert.False(t, c2.Existing)
	again, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k"})
	require.NoError(t, err)
	assert.True(t, again.Existing)
	assert.Equal(t, c2.Job.ID, again.Job.ID)
	assert.Equal(t, 2, jobs())

	// A read.
	k.arm()
	_, err = eng.Get(ctx, c1.Job.ID)
	killed()
	requireUnavailable(t, err, "get", false)

	// Claim: the job stays ready; retried, it is claimed.
	req := jobstate.ClaimRequest{Machine: "work", Worker: "w"}
	k.arm()
	_, err = eng.Claim(ctx, req)
	killed()
	requireUnavailable(t, err, "claim", false)
	j, err := eng.Get(ctx, c1.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("queued"), j.State)
	cl, err := eng.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, c1.Job.ID, cl.Job.ID)

	// Heartbeat: the lease is not renewed; retried, it is.
	clock.Advance(10 * time.Second)
	k.arm()
	_, err = eng.Heartbeat(ctx, cl.Lease)
	killed()
	requireUnavailable(t, err, "update", false)
	j, err = eng.Get(ctx, c1.Job.ID)
	require.NoError(t, err)
	assert.True(t, j.LeaseExpiresAt.Equal(cl.Lease.ExpiresAt), "the lease was not renewed")
	lease, err := eng.Heartbeat(ctx, cl.Lease)
	require.NoError(t, err)
	assert.True(t, lease.ExpiresAt.After(cl.Lease.ExpiresAt))

	// Succeed: neither the commit nor its effect is applied; retried,
	// both are, once.
	k.arm()
	_, err = eng.Succeed(ctx, lease, jobstate.CommitInput{Effect: effect})
	killed()
	requireUnavailable(t, err, "update", false)
	assert.Equal(t, 0, count(c1.Job.ID))
	j, err = eng.Get(ctx, c1.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("running"), j.State)
	j, err = eng.Succeed(ctx, lease, jobstate.CommitInput{Effect: effect})
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("done"), j.State)
	assert.Equal(t, 1, count(c1.Job.ID))
	assert.Equal(t, 1, events(t, eng, c1.Job.ID, jobstate.EventSucceed))

	// Fail: the failure is not recorded; retried, it is, once.
	cl2, err := eng.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, c2.Job.ID, cl2.Job.ID)
	k.arm()
	_, err = eng.Fail(ctx, cl2.Lease, errors.New("boom"))
	killed()
	requireUnavailable(t, err, "update", false)
	j, err = eng.Get(ctx, c2.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("running"), j.State)
	j, err = eng.Fail(ctx, cl2.Lease, errors.New("boom"))
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("queued"), j.State)
	assert.Equal(t, 1, events(t, eng, c2.Job.ID, jobstate.EventRetry))
}

// TestUnavailableCallersTransactionTerminated: store calls in a caller's
// transaction (WithTx) whose connection was terminated fail with
// ErrUnavailable, nothing applied.
func TestUnavailableCallersTransactionTerminated(t *testing.T) {
	e := newEnv(t)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	_, err = tx.Exec(e.ctx, "SELECT 1")
	require.NoError(t, err)
	terminate(t, e.pool, tx.Conn().PgConn().PID())
	ctx := pgstore.WithTx(e.ctx, tx)
	_, err = e.eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "in-tx"})
	requireUnavailable(t, err, "create", false)
	_, err = e.eng.Create(ctx, jobstate.NewJob{Machine: "work"})
	requireUnavailable(t, err, "create", false)
	_, err = e.eng.Get(ctx, c.Job.ID)
	requireUnavailable(t, err, "get", false)
	_, err = e.eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	requireUnavailable(t, err, "claim", false)
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"queued": 1}, n)
}

// TestUnavailableConnectionLostInFunction: a connection terminated while
// the engine's function runs (here, a commit's effect), before the
// COMMIT was sent, applied nothing, which the error says, whether or not
// the effect wrote through the transaction first; with group commit too.
// Retried, the commit and its effect are applied once.
//
// The store runs on a pool of its own: on a connection whose statement
// cache is full, pgx first deallocates evicted statements in a round
// trip of its own, which reports the loss as a closed connection rather
// than the server's message, and the store then answers "may have been
// applied", as for any loss it cannot place before the COMMIT.
func TestUnavailableConnectionLostInFunction(t *testing.T) {
	for _, group := range []int{0, 4} {
		t.Run("group="+strconv.Itoa(group), func(t *testing.T) {
			admin := pgtest.Pool(t)
			cluster, _ := pgtest.Shared(t)
			pool, err := pgtest.NewPool(context.Background(), cluster.URL, 4)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			store, eng, _ := storeOn(t, pool, pgstore.Options{GroupCommit: group}, nil)
			effect, count := receipts(t, store)
			ctx := context.Background()
			for _, write := range []bool{false, true} {
				c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work"})
				require.NoError(t, err)
				cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
				require.NoError(t, err)
				require.Equal(t, c.Job.ID, cl.Job.ID)
				_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
					if write {
						if err := effect(ctx, j); err != nil {
							return err
						}
					}
					tx, _ := pgstore.Tx(ctx)
					terminate(t, admin, tx.Conn().PgConn().PID())
					return nil
				}})
				requireUnavailable(t, err, "update", false)
				j, err := eng.Get(ctx, c.Job.ID)
				require.NoError(t, err)
				assert.Equal(t, jobstate.State("running"), j.State, "write=%v", write)
				assert.Equal(t, 0, count(c.Job.ID), "write=%v", write)
				j, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: effect})
				require.NoError(t, err)
				assert.Equal(t, jobstate.State("done"), j.State)
				assert.Equal(t, 1, count(c.Job.ID))
				assert.Equal(t, 1, events(t, eng, c.Job.ID, jobstate.EventSucceed))
			}
		})
	}
}

// TestUnavailableLostCommit: a connection lost once the batch holding a
// COMMIT was sent gives ErrUnavailable with MayHaveApplied, both when the
// COMMIT ran and its answer was lost and when it never reached the
// server; with group commit too. The caller then reads the job: a commit
// that was applied shows its execution DONE (and a repeated Succeed is
// refused, applying nothing), one that was not is retried and applied
// once.
func TestUnavailableLostCommit(t *testing.T) {
	for _, group := range []int{0, 4} {
		for _, mode := range []cutMode{cutAnswer, cutRequest} {
			t.Run(fmt.Sprintf("group=%d/%s", group, mode), func(t *testing.T) {
				pool, proxy := proxiedPool(t, 4)
				store, eng, _ := storeOn(t, pool, pgstore.Options{GroupCommit: group}, nil)
				effect, count := receipts(t, store)
				ctx := context.Background()
				c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work"})
				require.NoError(t, err)
				cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
				require.NoError(t, err)
				var pid uint32
				_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
					if mode == cutAnswer {
						if err := effect(ctx, j); err != nil {
							return err
						}
					}
					tx, _ := pgstore.Tx(ctx)
					pid = tx.Conn().PgConn().PID()
					proxy.arm(pid, mode)
					return nil
				}})
				proxy.requireCut(t, pid)
				requireUnavailable(t, err, "update", true)

				// The caller reads the job to learn the outcome.
				j, err := eng.Get(ctx, c.Job.ID)
				require.NoError(t, err)
				xs, err := eng.Executions(ctx, c.Job.ID)
				require.NoError(t, err)
				require.Len(t, xs, 1)
				if mode == cutAnswer {
					assert.Equal(t, jobstate.State("done"), j.State)
					assert.Equal(t, jobstate.ExecDone, xs[0].Status)
					assert.Equal(t, 1, count(c.Job.ID))
					_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: effect})
					assert.True(t, errors.Is(err, jobstate.ErrLeaseLost) || errors.Is(err, jobstate.ErrAlreadyCommitted), "%v", err)
				} else {
					assert.Equal(t, jobstate.State("running"), j.State)
					assert.NotEqual(t, jobstate.ExecDone, xs[0].Status)
					assert.Equal(t, 0, count(c.Job.ID))
					j, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: effect})
					require.NoError(t, err)
					assert.Equal(t, jobstate.State("done"), j.State)
				}
				assert.Equal(t, 1, count(c.Job.ID))
				assert.Equal(t, 1, events(t, eng, c.Job.ID, jobstate.EventSucceed))
			})
		}
	}
}

// TestUnavailableLostCreate: a keyed Create whose COMMIT ran and whose
// answer was lost gives ErrUnavailable with MayHaveApplied; created again
// with the same key, it returns the job it made, and its creation effect
// ran once.
func TestUnavailableLostCreate(t *testing.T) {
	pool, proxy := proxiedPool(t, 4)
	var arm atomic.Bool
	var pid atomic.Uint32
	var effect jobstate.EffectFunc
	store, eng, _ := storeOn(t, pool, pgstore.Options{}, func(s *jobstate.Spec) {
		s.Create.Effect = func(ctx context.Context, j jobstate.Job) error {
			if err := effect(ctx, j); err != nil {
				return err
			}
			if arm.CompareAndSwap(true, false) {
				tx, _ := pgstore.Tx(ctx)
				pid.Store(tx.Conn().PgConn().PID())
				proxy.arm(pid.Load(), cutAnswer)
			}
			return nil
		}
	})
	effect, count := receipts(t, store)
	ctx := context.Background()
	arm.Store(true)
	_, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "order-1"})
	proxy.requireCut(t, pid.Load())
	requireUnavailable(t, err, "create", true)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "order-1"})
	require.NoError(t, err)
	assert.True(t, c.Existing, "the lost create had been applied")
	assert.Equal(t, 1, count(c.Job.ID))
	n, err := eng.Counts(ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"queued": 1}, n)
}

// TestUnavailableServerStopped: while the server is stopped, a read, a
// Create, a Claim and Migrate fail with ErrUnavailable, nothing applied;
// once it is back, the same operations succeed, and nothing was doubled.
func TestUnavailableServerStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own; not in -short")
	}
	ctx := context.Background()
	cluster, err := pgtest.Start(ctx, pgtest.Settings{Own: true})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	pool, err := pgtest.NewPool(ctx, cluster.URL, 1)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := pgstore.Options{Schema: "stopped"}
	_, err = pgstore.Migrate(ctx, pool, opts)
	require.NoError(t, err)
	store, err := pgstore.New(pool, opts)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	eng := workEngine(t, store)
	first, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Priority: 1})
	require.NoError(t, err)

	require.NoError(t, cluster.Halt(ctx, "fast"))
	_, err = eng.Get(ctx, first.Job.ID)
	requireUnavailable(t, err, "get", false)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k"})
	requireUnavailable(t, err, "create", false)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: "work"})
	requireUnavailable(t, err, "create", false)
	req := jobstate.ClaimRequest{Machine: "work", Worker: "w"}
	_, err = eng.Claim(ctx, req)
	requireUnavailable(t, err, "claim", false)
	_, err = pgstore.Migrate(ctx, pool, opts)
	requireUnavailable(t, err, "migrate", false)

	require.NoError(t, cluster.Resume(ctx))
	got, err := eng.Get(ctx, first.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("queued"), got.State)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k"})
	require.NoError(t, err)
	assert.False(t, c.Existing, "the create was not applied while the server was stopped")
	cl, err := eng.Claim(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, first.Job.ID, cl.Job.ID)
	n, err := eng.Counts(ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"queued": 1, "running": 1}, n)
}

// TestNilPoolRefused: the exported functions taking a pool refuse nil
// with ErrInvalidArgument.
func TestNilPoolRefused(t *testing.T) {
	_, err := pgstore.Migrate(context.Background(), nil, pgstore.Options{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = pgstore.New(nil, pgstore.Options{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}

// TestNilTransactionRefused: a context WithTx gave a nil transaction (or
// a nil pointer of a transaction type) makes every store call fail with
// ErrInvalidArgument, calling no function and writing nothing, rather
// than run outside the transaction the caller meant.
func TestNilTransactionRefused(t *testing.T) {
	e := newEnv(t)
	c, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work"})
	require.NoError(t, err)
	for _, tx := range []pgx.Tx{nil, (*pgxpool.Tx)(nil)} {
		ctx := pgstore.WithTx(e.ctx, tx)
		_, ok := pgstore.Tx(ctx)
		assert.False(t, ok)
		called := false
		_, _, err := e.store.Create(ctx, "work", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			called = true
			return jobstate.Write{}, errors.New("called")
		})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		_, err = e.store.Update(ctx, c.Job.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			called = true
			return jobstate.Write{Job: cur.Job}, nil
		})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		assert.False(t, called)
		_, err = e.eng.Create(ctx, jobstate.NewJob{Machine: "work"})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		_, err = e.eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		_, err = e.eng.Get(ctx, c.Job.ID)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		_, err = e.store.Count(ctx, "work")
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		_, err = e.store.Prune(ctx, epoch, 0)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	}
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"queued": 1}, n)
}

// TestIndexRowTooLargeIsInvalidArgument: a key too large for the key
// index (program_limit_exceeded) is a bad argument, and nothing is
// created.
func TestIndexRowTooLargeIsInvalidArgument(t *testing.T) {
	e := newEnv(t)
	raw := make([]byte, 6000)
	_, _ = rand.Read(raw)
	_, err := e.eng.Create(e.ctx, jobstate.NewJob{Machine: "work", Key: hex.EncodeToString(raw)})
	require.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.NotErrorIs(t, err, jobstate.ErrUnavailable)
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Empty(t, n)
}
