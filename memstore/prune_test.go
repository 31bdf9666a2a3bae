package memstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
// terminal or completed too late. (It deleted in map order before.)
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
// many jobs. (It held the lock for the whole deletion before.)
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
// store holds is sized for the jobs left: the history log's chunks, the
// maps and the heaps. (Before, one live job pinned a whole chunk of the
// log, and the maps kept the room of every job ever stored.)
func TestPruneMemoryFollowsLiveJobs(t *testing.T) {
	s := New()
	ctx := context.Background()
	const n, keep = 40_000, 1000 // one job in keep stays
	var live []uuid.UUID
	var ids []uuid.UUID
	for i := 0; i < n; i++ {
		j := readyJob("m", sec(0))
		if i%2 == 0 {
			j.IdempotencyKey = uuid.NewString()
		}
		ids = append(ids, put(t, s, j).ID)
	}
	require.Len(t, s.machines["m"].available.items, n)
	for i, id := range ids {
		done := sec(1)
		if i%keep == 0 {
			done = sec(100) // completed after the cut: kept
			live = append(live, id)
		}
		finish(t, s, id, done)
	}
	before := s.log.chunksInUse()
	got, err := s.Prune(ctx, sec(50), 0)
	require.NoError(t, err)
	require.Equal(t, n-len(live), got)

	records := 2 * len(live)
	assert.LessOrEqual(t, s.log.chunksInUse(), 2*records/logChunk+1,
		"log chunks at least half full, plus the tail (from %d chunks)", before)
	assert.Nil(t, s.jobs.old, "the job map's rebuild is complete")
	assert.Equal(t, len(live), len(s.jobs.cur))
	assert.LessOrEqual(t, s.jobs.peak, len(live), "the job map was rebuilt at the live jobs' size")
	assert.Nil(t, s.keys.old)
	assert.LessOrEqual(t, s.keys.peak, len(live))
	assert.LessOrEqual(t, cap(s.done.items), minHeapCap*2, "the terminal queue's array shrank")
	assert.LessOrEqual(t, cap(s.machines["m"].available.items), minHeapCap*2, "the claim heap's array shrank")
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
