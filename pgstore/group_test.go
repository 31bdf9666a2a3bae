package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// In a group, a member whose function fails, or whose write the server
// refuses, is rolled back alone: the others' writes, and what their
// functions wrote through the transaction, commit.
func TestGroupCommitMembersFailAlone(t *testing.T) {
	e := newEnv(t)
	store := pgtest.StoreWith(t, pgstore.Options{GroupCommit: 64, GroupCommitters: 1})
	marks := e.table("marks", "job uuid PRIMARY KEY")
	const n = 40
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		j := jobstate.Job{ID: ids[i], Machine: "work", State: "queued", Kind: jobstate.KindReady, Version: 1, CreatedAt: epoch, UpdatedAt: epoch}
		_, _, err := store.Create(e.ctx, "work", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: 1, Event: jobstate.EventCreate, To: "queued", At: epoch}}}, nil
		})
		require.NoError(t, err)
	}
	boom := errors.New("boom")
	mark := func(ctx context.Context, id uuid.UUID) error {
		tx, ok := pgstore.Tx(ctx)
		if !ok {
			return errors.New("no transaction")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+marks+" VALUES ($1)", id)
		return err
	}
	// The first update holds the committer until every other one is
	// queued, so that they go in one group.
	hold, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i > 0 {
				<-held
			}
			_, errs[i] = store.Update(e.ctx, ids[i], func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
				if i == 0 {
					close(held)
					<-hold
				}
				j := cur.Job
				j.Version++
				j.Priority = 7
				switch i % 4 {
				case 1: // writes, then fails: nothing of it stays
					if err := mark(ctx, cur.Job.ID); err != nil {
						return jobstate.Write{}, err
					}
					return jobstate.Write{}, boom
				case 2: // a statement fails and the error is swallowed: the server refuses the write
					tx, _ := pgstore.Tx(ctx)
					_, _ = tx.Exec(ctx, "SELECT 1/0")
					return jobstate.Write{Job: j}, nil
				case 3: // no write through the transaction
					return jobstate.Write{Job: j}, nil
				}
				if err := mark(ctx, cur.Job.ID); err != nil {
					return jobstate.Write{}, err
				}
				return jobstate.Write{Job: j}, nil
			})
		}(i)
	}
	<-held
	deadline := time.Now().Add(30 * time.Second)
	for pgstore.GroupQueued(store) < n-1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	for i, id := range ids {
		got, err := store.Get(e.ctx, id)
		require.NoError(t, err)
		var marked bool
		require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT EXISTS (SELECT 1 FROM "+marks+" WHERE job = $1)", id).Scan(&marked))
		switch i % 4 {
		case 1:
			assert.ErrorIs(t, errs[i], boom, "job %d", i)
			assert.Equal(t, int64(1), got.Version, "job %d", i)
			assert.False(t, marked, "job %d", i)
		case 2:
			assert.Error(t, errs[i], "job %d", i)
			assert.Equal(t, int64(1), got.Version, "job %d", i)
		case 3:
			assert.NoError(t, errs[i], "job %d", i)
			assert.Equal(t, int64(2), got.Version, "job %d", i)
		default:
			assert.NoError(t, errs[i], "job %d", i)
			assert.Equal(t, int64(2), got.Version, "job %d", i)
			assert.True(t, marked, "job %d", i)
		}
	}
}

// CreateBatch inserts every job of the batch, readable as returned, or,
// with a duplicate id, none.
func TestCreateBatch(t *testing.T) {
	e := newEnv(t)
	mk := func(id uuid.UUID) jobstate.Write {
		j := jobstate.Job{ID: id, Machine: "work", State: "queued", Kind: jobstate.KindReady, Version: 1, CreatedAt: epoch.Add(1), UpdatedAt: epoch, Payload: []byte("p")}
		return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: id, Version: 1, Event: jobstate.EventCreate, To: "queued", At: epoch}}}
	}
	ws := make([]jobstate.Write, 50)
	for i := range ws {
		ws[i] = mk(uuid.New())
	}
	created, err := e.store.CreateBatch(e.ctx, make([]jobstate.BatchKey, len(ws)), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) { return ws[i], nil })
	require.NoError(t, err)
	require.Len(t, created, len(ws))
	for i, c := range created {
		j := c.Job
		got, err := e.store.Get(e.ctx, ws[i].Job.ID)
		require.NoError(t, err)
		assert.Equal(t, got, j)
		h, err := e.store.History(e.ctx, j.ID)
		require.NoError(t, err)
		assert.Len(t, h, 1)
	}
	cl, err := e.eng.Claim(e.ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)
	_, err = e.eng.Succeed(e.ctx, cl.Lease, jobstate.CommitInput{})
	require.NoError(t, err)

	// A duplicate id fails the whole batch.
	fresh := mk(uuid.New())
	_, err = e.store.CreateBatch(e.ctx, make([]jobstate.BatchKey, 2), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
		if i == 0 {
			return fresh, nil
		}
		return ws[0], nil
	})
	require.ErrorIs(t, err, jobstate.ErrDuplicateJob)
	_, err = e.store.Get(e.ctx, fresh.Job.ID)
	require.ErrorIs(t, err, jobstate.ErrNotFound)
	// The function's error is returned as it is.
	boom := errors.New("boom")
	_, err = e.store.CreateBatch(e.ctx, make([]jobstate.BatchKey, 3), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
		if i == 2 {
			return jobstate.Write{}, boom
		}
		return mk(uuid.New()), nil
	})
	require.ErrorIs(t, err, boom)
	n, err := e.store.Count(e.ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, len(ws), n["queued"]+n["done"], fmt.Sprint(n))
}

// The round trip of a group's COMMIT is measured whichever way the
// members' writes go: in the statement that writes every member's job
// (functions that send nothing), or one by one in their savepoints (a
// commit whose effect writes through Tx, in the engine's savepoint). It
// sets how long Updates wait before another group starts for them.
func TestGroupCommitMeasuresItsRoundTrip(t *testing.T) {
	ctx := context.Background()
	t.Run("shared statement", func(t *testing.T) {
		store := pgtest.StoreWith(t, pgstore.Options{GroupCommit: 8})
		jobs := createJobs(t, store, "m", 1)
		_, err := store.Update(ctx, jobs[0].ID, bump)
		require.NoError(t, err)
		assert.True(t, pgstore.GroupRoundTrip(store) > 0, "round trip measured: %s", pgstore.GroupRoundTrip(store))
	})
	t.Run("one by one", func(t *testing.T) {
		store := pgtest.StoreWith(t, pgstore.Options{GroupCommit: 8})
		eng := workEngine(t, store)
		_, err := eng.Create(ctx, jobstate.NewJob{Machine: "work"})
		require.NoError(t, err)
		cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
		require.NoError(t, err)
		_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: func(ctx context.Context, _ jobstate.Job) error {
			tx, ok := pgstore.Tx(ctx)
			if !ok {
				return errors.New("no transaction")
			}
			_, err := tx.Exec(ctx, "SELECT 1")
			return err
		}})
		require.NoError(t, err)
		assert.True(t, pgstore.GroupRoundTrip(store) > 0, "round trip measured: %s", pgstore.GroupRoundTrip(store))
	})
}
