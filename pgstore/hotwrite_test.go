package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// updates counts the updates of many jobs a pool's connections send in
// batches: hot (update_many_hot, which sets the state, the lease, the
// executions and a few instants) and full (update_many, every column).
type updates struct {
	mu        sync.Mutex
	hot, full int
}

func (u *updates) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (u *updates) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (u *updates) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (u *updates) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	sql := strings.Join(strings.Fields(data.SQL), " ")
	if !strings.Contains(sql, "FROM unnest(") || !strings.HasPrefix(sql, "WITH u AS ( UPDATE") {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if strings.Contains(sql, "SET state = v.state") {
		u.hot++
	} else {
		u.full++
	}
}

func (u *updates) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// counts returns the updates counted since the last call.
func (u *updates) counts() (hot, full int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	hot, full = u.hot, u.full
	u.hot, u.full = 0, 0
	return hot, full
}

// TestHotUpdatesForClaimsAndCommits: a batch claim of jobs never claimed
// is written by its claim statement (the engine's plan, claim_planned),
// and a group of commits by the statement of their plans
// (commit_planned), with neither update of many jobs; a group of starts
// is sent as update_many_hot; a group holding a retry (which changes the retry
// count, the last error and the not-before instant, columns
// update_many_hot leaves alone) as update_many. Every job reads back as
// the engine returned it.
func TestHotUpdatesForClaimsAndCommits(t *testing.T) {
	u := &updates{}
	pool := sharedPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 8
		cfg.ConnConfig.Tracer = u
	})
	store, err := pgstore.New(pool, pgstore.Options{Schema: pgtest.Schema(t), GroupCommit: 16})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	eng := workEngine(t, store)
	ctx := context.Background()

	jobs := make([]jobstate.NewJob, 8)
	for i := range jobs {
		jobs[i] = jobstate.NewJob{Machine: "work", Payload: []byte(`{"n":1}`)}
	}
	_, err = eng.CreateMany(ctx, jobs)
	require.NoError(t, err)
	u.counts()

	// ends runs end on every claimed job at once, so that the store groups
	// them, and checks that each reads back as the engine returned it.
	ends := func(claimed []jobstate.Claimed, end func(jobstate.Claimed) (jobstate.Job, error)) {
		t.Helper()
		got := make([]jobstate.Job, len(claimed))
		errs := make([]error, len(claimed))
		var wg sync.WaitGroup
		for i, c := range claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = end(c)
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		for _, j := range got {
			read, err := eng.Get(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, j, read)
		}
	}

	claimed, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"}, 4)
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	hot, full := u.counts()
	require.Equal(t, 0, hot, "claim batches sent as update_many_hot")
	require.Equal(t, 0, full, "claim batches sent as update_many")
	for _, c := range claimed {
		read, err := eng.Get(ctx, c.Job.ID)
		require.NoError(t, err)
		require.Equal(t, c.Job, read)
	}
	ends(claimed, func(c jobstate.Claimed) (jobstate.Job, error) {
		return eng.Start(ctx, c.Lease)
	})
	hot, full = u.counts()
	require.True(t, hot >= 1, "groups of starts sent as update_many_hot: %d", hot)
	require.Equal(t, 0, full, "groups of starts sent as update_many")
	ends(claimed, func(c jobstate.Claimed) (jobstate.Job, error) {
		return eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte(`"ok"`)})
	})
	hot, full = u.counts()
	require.Equal(t, 0, hot+full, "commit groups written by their plans sent updates of many jobs")

	claimed, err = eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"}, 4)
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	u.counts()
	ends(claimed, func(c jobstate.Claimed) (jobstate.Job, error) {
		if c.Job.ID == claimed[0].Job.ID {
			j, err := eng.Fail(ctx, c.Lease, errors.New("try again"))
			if err == nil && (j.RetryCount != 1 || j.LastError != "try again") {
				err = errors.New("the failure was not a retry")
			}
			return j, err
		}
		return eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
	})
	_, full = u.counts()
	require.True(t, full >= 1, "a group holding a retry sent as update_many: %d", full)
}
