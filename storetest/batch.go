package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// RunBatch checks the BatchClaimer capability, directly and through
// Engine.ClaimMany. It skips a store without it.
func RunBatch(t *testing.T, newStore NewStore) {
	if _, ok := newStore(t).(jobstate.BatchClaimer); !ok {
		t.Skip("the store has no BatchClaimer capability")
	}
	t.Run("ClaimOrderAndCount", func(t *testing.T) { testBatchOrder(t, newStore) })
	t.Run("ErrorStopsBatch", func(t *testing.T) { testBatchError(t, newStore) })
	t.Run("ConcurrentBatchesDisjoint", func(t *testing.T) { testBatchConcurrent(t, newStore) })
}

func testBatchOrder(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.TransferSpec())
	var want []uuid.UUID
	low := f.Create("transfer", jobstate.NewJob{})
	f.Clock.Advance(time.Second)
	high := f.Create("transfer", jobstate.NewJob{Priority: 3})
	later := f.Create("transfer", jobstate.NewJob{NotBefore: f.Clock.Now().Add(time.Hour)})
	other := f.Create("transfer", jobstate.NewJob{})
	want = append(want, high.ID, low.ID)
	got, err := f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, c := range got {
		assert.Equal(t, want[i], c.Job.ID, "claim order")
		assert.Equal(t, m.TClaimed, c.Job.State)
		assert.Equal(t, c.Job, f.Get(c.Job.ID), "the job returned is the job written")
		_, err := f.Eng.Heartbeat(f.Ctx, c.Lease)
		assert.NoError(t, err, "each claim has its own live lease")
	}
	got, err = f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "fewer than asked when fewer are due")
	assert.Equal(t, other.ID, got[0].Job.ID)
	_, err = f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 10)
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
	assert.Equal(t, m.TQueued, f.Get(later.ID).State, "a job not yet due is not taken")
	_, err = f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 0)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}

// testBatchError: an error other than a skip, from any job's function,
// takes no job a store could leave untaken.
func testBatchError(t *testing.T, newStore NewStore) {
	store := newStore(t)
	bc := store.(jobstate.BatchClaimer)
	var ids []uuid.UUID
	for i := 0; i < 3; i++ {
		j := mkJob(Epoch.Add(time.Duration(i) * time.Second))
		ids = append(ids, insert(t, store, j).ID)
	}
	before := make([]state, len(ids))
	for i, id := range ids {
		before[i] = load(t, store, id)
	}
	boom := errors.New("boom")
	calls := 0
	jobs, err := bc.ClaimBatch(context.Background(), jobstate.ClaimQuery{Machine: "m", Now: Epoch.Add(time.Hour)}, 3, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		calls++
		if calls == 3 {
			return jobstate.Write{}, boom
		}
		return next(cur.Job, "r", jobstate.KindActive), nil
	})
	assert.ErrorIs(t, err, boom)
	// A transactional store takes nothing; one that cannot undo returns the
	// jobs it took before the error. Either way, the jobs returned are
	// exactly the jobs taken, and the one whose function failed is intact.
	taken := make(map[uuid.UUID]bool)
	for _, j := range jobs {
		taken[j.ID] = true
		assert.Equal(t, j, load(t, store, j.ID).Job, "a job returned with the error is the job written")
	}
	assert.LessOrEqual(t, len(jobs), 2)
	for i, id := range ids {
		if !taken[id] {
			assert.Equal(t, before[i], load(t, store, id), "a job not returned is not taken")
		}
	}
	if len(jobs) > 0 {
		// Put the taken jobs out of the way of the checks below.
		ids = ids[len(jobs):]
		for _, id := range ids {
			require.False(t, taken[id], "the jobs taken are the first in claim order")
		}
		for len(ids) < 3 {
			j := mkJob(Epoch.Add(time.Duration(10+len(ids)) * time.Second))
			ids = append(ids, insert(t, store, j).ID)
		}
	}
	// A skip passes over one job only.
	jobs, err = bc.ClaimBatch(context.Background(), jobstate.ClaimQuery{Machine: "m", Now: Epoch.Add(time.Hour)}, 3, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		if cur.Job.ID == ids[1] {
			return jobstate.Write{}, errors.Join(jobstate.ErrSkip, boom)
		}
		return next(cur.Job, "r", jobstate.KindActive), nil
	})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	assert.Equal(t, ids[0], jobs[0].ID)
	assert.Equal(t, ids[2], jobs[1].ID)
	jobs, err = bc.ClaimBatch(context.Background(), jobstate.ClaimQuery{Machine: "m", Now: Epoch.Add(time.Hour)}, 3, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		return jobstate.Write{}, errors.Join(jobstate.ErrSkip, boom)
	})
	require.NoError(t, err, "nothing to take is no error")
	assert.Empty(t, jobs)
}

// testBatchConcurrent: batches claimed at once never share a job, and
// together take every job.
func testBatchConcurrent(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.TransferSpec())
	const n = 400
	for i := 0; i < n; i++ {
		f.Create("transfer", jobstate.NewJob{})
	}
	var mu sync.Mutex
	seen := make(map[uuid.UUID]int)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := f.Eng.ClaimMany(context.Background(), jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 7)
				if errors.Is(err, jobstate.ErrNoJob) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.Job.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, n, "every job taken")
	for id, k := range seen {
		assert.Equal(t, 1, k, "job %s taken %d times", id, k)
	}
}

// RunNotify checks the Notifier capability: a subscriber hears of a job
// that becomes claimable, and an ended subscription closes its channel. It
// skips a store without it.
func RunNotify(t *testing.T, newStore NewStore) {
	store := newStore(t)
	nt, ok := store.(jobstate.Notifier)
	if !ok {
		t.Skip("the store has no Notifier capability")
	}
	clock := jobstate.NewManualClock(Epoch)
	eng, err := jobstate.New(store, jobstate.WithClock(clock), jobstate.WithMachines(m.Queue(), m.Must(m.TransferSpec())))
	require.NoError(t, err)
	ctx := context.Background()
	ch, stop, err := nt.Subscribe(ctx, "transfer")
	require.NoError(t, err)
	others, stopOthers, err := nt.Subscribe(ctx, "queue")
	require.NoError(t, err)
	defer stopOthers()
	drain := func(c <-chan struct{}) {
		for {
			select {
			case <-c:
			default:
				return
			}
		}
	}
	// A bound turns a missing signal into a failure instead of a hang.
	wait := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case _, ok := <-c:
			require.True(t, ok, "%s: channel closed", what)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no signal", what)
		}
	}
	drain(ch)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: "transfer"})
	require.NoError(t, err)
	wait(ch, "a job created ready")

	// A job retried back to ready is signalled too.
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"})
	require.NoError(t, err)
	_, err = eng.Advance(ctx, cl.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	drain(ch)
	_, err = eng.Fail(ctx, cl.Lease, errors.New("flaky"))
	require.NoError(t, err)
	wait(ch, "a job retried to ready")

	// A queue job created in its initial state is not claimable: the
	// queue's subscriber hears of it only when it is submitted.
	drain(others)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
	require.NoError(t, err)
	_, err = eng.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
	require.NoError(t, err)
	wait(others, "a job submitted to ready")

	stop()
	for range ch {
	}
	stop() // ending twice is harmless
}
