package memstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// finish writes job id terminal, completed at done, with one execution.
func finish(t *testing.T, s *Store, id uuid.UUID, done time.Time) {
	t.Helper()
	change(t, s, id, func(j *jobstate.Job) {
		j.State, j.Kind, j.Outcome, j.CompletedAt = "done", jobstate.KindTerminal, jobstate.OutcomeSucceeded, done
	})
}

// TestPruneOldestFirst: Prune deletes the jobs completed longest ago
// first, whatever their order of creation, and never a job that is not
// terminal or completed too late.
func TestPruneOldestFirst(t *testing.T) {
	s := New()
	ctx := context.Background()
	const n = 3000
	done := rand.Perm(n)
	ids := make([]uuid.UUID, n)
	for i := range done {
		j := put(t, s, readyJob("m", sec(0)))
		finish(t, s, j.ID, sec(done[i]))
		ids[done[i]] = j.ID // by completion
	}
	active := readyJob("m", sec(0))
	active.State, active.Kind = "run", jobstate.KindActive
	put(t, s, active)
	for from := 0; from < n; from += 500 {
		got, err := s.Prune(ctx, sec(n), 500)
		require.NoError(t, err)
		require.Equal(t, 500, got)
		for k := from; k < from+500; k++ {
			_, err := s.Get(ctx, ids[k])
			require.ErrorIs(t, err, jobstate.ErrNotFound, "job completed at %d s", k)
		}
		if from+500 < n {
			_, err := s.Get(ctx, ids[from+500])
			require.NoError(t, err, "the next oldest job stays")
		}
	}
	got, err := s.Prune(ctx, sec(n), 0)
	require.NoError(t, err)
	assert.Zero(t, got)
	assert.Equal(t, 1, s.Len())
}

// TestPruneReleasesLockBetweenBatches: Prune holds the store's lock for
// one batch at a time, so other operations go ahead while it deletes
// many jobs.
func TestPruneReleasesLockBetweenBatches(t *testing.T) {
	s := New()
	ctx := context.Background()
	const n = 5500
	live := put(t, s, readyJob("m", sec(0)))
	for i := 0; i < n; i++ {
		put(t, s, terminalJob("m", sec(i)))
	}
	pauses := 0
	s.testBetweenBatches = func() {
		pauses++
		// Another writer can take the lock: Prune does not hold it.
		require.True(t, s.mu.TryLock(), "the store's lock is free between batches")
		s.mu.Unlock()
		change(t, s, live.ID, func(j *jobstate.Job) {})
	}
	got, err := s.Prune(ctx, sec(n), 0)
	require.NoError(t, err)
	assert.Equal(t, n, got)
	assert.GreaterOrEqual(t, pauses, n/pruneBatch)
	j, err := s.Get(ctx, live.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1+pauses), j.Version)
}

// TestPruneLeavesLockedJob: a terminal job being updated is not deleted,
// and a later Prune deletes it.
func TestPruneLeavesLockedJob(t *testing.T) {
	s := New()
	ctx := context.Background()
	a := put(t, s, terminalJob("m", sec(0)))
	b := put(t, s, terminalJob("m", sec(1)))
	_, err := s.Update(ctx, a.ID, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		n, err := s.Prune(ctx, sec(10), 0)
		assert.NoError(t, err)
		assert.Equal(t, 1, n, "b only: a is locked")
		j := cur.Job
		j.Version++
		return jobstate.Write{Job: j}, nil
	})
	require.NoError(t, err, "the write of a job Prune passed over is applied")
	_, err = s.Get(ctx, b.ID)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	n, err := s.Prune(ctx, sec(10), 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, s.Len())
}

// TestPruneMemoryFollowsLiveJobs: after most jobs are pruned, what the
// store holds is sized for the jobs left: the maps are rebuilt at their
// size, every index holds the live jobs alone, and the heap the store
// retains is within a bound per live job, far below what the pruned jobs
// took.
func TestPruneMemoryFollowsLiveJobs(t *testing.T) {
	ctx := context.Background()
	const n, keep = 40_000, 100 // one job in keep stays
	base := heapInUse()
	s := New()
	_, err := s.List(ctx, jobstate.ListQuery{Limit: 1}) // the listing indexes are kept from here on
	require.NoError(t, err)
	var live []uuid.UUID
	var ids []uuid.UUID
	for i := 0; i < n; i++ {
		j := readyJob("m", sec(0))
		j.Owner = "o"
		if i%2 == 0 {
			j.IdempotencyKey = uuid.NewString()
		}
		ids = append(ids, put(t, s, j).ID)
	}
	require.Equal(t, n, s.machines["m"].available.Len())
	for i, id := range ids {
		done := sec(1)
		if i%keep == 0 {
			done = sec(100) // completed after the cut: kept
			live = append(live, id)
		}
		finish(t, s, id, done)
	}
	peak := heapInUse() - base
	got, err := s.Prune(ctx, sec(50), 0)
	require.NoError(t, err)
	require.Equal(t, n-len(live), got)

	assert.Len(t, s.jobs, len(live))
	assert.Equal(t, len(live), s.peakJobs, "the job map was rebuilt at the live jobs' size")
	assert.Equal(t, len(live), s.peakKeys, "the key map was rebuilt at the live keys' size (every kept job has a key)")
	m := s.machines["m"]
	for name, tree := range map[string]interface{ Len() int }{
		"done": s.done, "owners": s.owners, "keyed": s.keyed, "created": m.created, "updated": m.updated,
	} {
		assert.Equal(t, len(live), tree.Len(), "index %s", name)
	}
	assert.Zero(t, m.available.Len()+m.scheduled.Len()+s.leased.Len()+m.wake.Len())
	assert.Equal(t, map[jobstate.State]int{"done": len(live)}, m.counts)
	retained := heapInUse() - base
	t.Logf("heap: %d bytes at the peak, %d retained for %d live jobs", peak, retained, len(live))
	assert.Less(t, retained, uint64(len(live))*8<<10, "retained heap per live job")
	assert.Less(t, retained, peak/20, "retained heap against the peak")
	for _, id := range live {
		h, err := s.History(ctx, id)
		require.NoError(t, err)
		require.Len(t, h, 2)
		assert.Equal(t, jobstate.EventCreate, h[0].Event)
		assert.Equal(t, int64(2), h[1].Version)
		assert.Equal(t, id, h[1].JobID)
	}
	// The store goes on working, and grows again.
	for _, id := range live {
		change(t, s, id, func(j *jobstate.Job) {})
		h, err := s.History(ctx, id)
		require.NoError(t, err)
		require.Len(t, h, 3)
		assert.Equal(t, int64(3), h[2].Version)
	}
	for i := 0; i < 10_000; i++ {
		put(t, s, terminalJob("m", sec(2)))
	}
	assert.Equal(t, len(live)+10_000, s.Len())
}

// TestPruneKeepsLiveHistories: jobs of random history lengths are pruned
// at random while others grow; every history of a job left reads back
// whole and in order.
func FuzzPruneKeepsLiveHistories(f *testing.F) {
	addInputs(f, 100, 2048)
	f.Fuzz(func(rt *testing.T, data []byte) {
		d := &draws{data: data}
		s := New()
		ctx := context.Background()
		lengths := map[uuid.UUID]int{}
		var ids []uuid.UUID
		for round, rounds := 0, d.IntRange(1, 4); round < rounds; round++ {
			for i, n := 0, d.IntRange(0, 300); i < n; i++ {
				j := put(rt, s, readyJob("m", sec(0)))
				ids = append(ids, j.ID)
				lengths[j.ID] = 1
			}
			for i, n := 0, d.IntRange(0, 300); i < n && len(ids) > 0; i++ {
				id := ids[d.IntRange(0, len(ids)-1)]
				if _, ok := lengths[id]; ok {
					change(rt, s, id, func(*jobstate.Job) {})
					lengths[id]++
				}
			}
			every := d.IntRange(1, 20)
			for i, id := range ids {
				if _, ok := lengths[id]; ok && i%every != 0 {
					change(rt, s, id, func(j *jobstate.Job) { j.State, j.Kind, j.CompletedAt = "done", jobstate.KindTerminal, sec(round) })
					delete(lengths, id)
				}
			}
			_, err := s.Prune(ctx, sec(round+1), 0)
			require.NoError(rt, err)
		}
		require.Equal(rt, len(lengths), s.Len())
		for id, n := range lengths {
			h, err := s.History(ctx, id)
			require.NoError(rt, err)
			require.Len(rt, h, n)
			for v, rec := range h {
				require.Equal(rt, id, rec.JobID)
				require.Equal(rt, int64(v+1), rec.Version)
			}
		}
	})
}
