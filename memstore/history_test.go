package memstore

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// checkLog checks the history log's invariants after a Prune: its chunks
// but the tail are at least half full overall, every one less than half
// full is queued, and the live records are exactly those the jobs'
// histories point at.
func checkLog(t rapid.TB, s *Store) {
	t.Helper()
	l := &s.log
	pointed := map[int]uuid.UUID{}
	s.jobs.each(func(id uuid.UUID, e *entry) {
		for _, pos := range e.history {
			pointed[pos] = id
		}
	})
	live := 0
	for ci, c := range l.chunks {
		if c == nil {
			continue
		}
		n := 0
		for i := 0; i < c.n; i++ {
			if id := c.recs[i].JobID; id != uuid.Nil {
				n++
				if pointed[ci*logChunk+i] != id {
					t.Fatalf("chunk %d record %d of job %s: its job does not point at it", ci, i, id)
				}
			}
		}
		if n != c.live {
			t.Fatalf("chunk %d: %d live records counted, %d recorded", ci, n, c.live)
		}
		if ci != l.tail && c.live < logChunk/2 && (c.qpos < 0 || l.sparse[c.qpos] != c) {
			t.Fatalf("chunk %d is not the tail, holds %d live records and is not queued", ci, c.live)
		}
		live += n
	}
	if live != len(pointed) || live != l.live {
		t.Fatalf("%d live records in the log (%d counted), %d in the jobs' histories", live, l.live, len(pointed))
	}
	if (l.chunksInUse()-1)*logChunk > 2*live {
		t.Fatalf("%d chunks in use for %d live records", l.chunksInUse(), live)
	}
}

// TestHistoryLogCompaction: jobs of random history lengths are pruned at
// random while others grow; every history reads back whole and in order,
// and the log stays compact.
func TestHistoryLogCompaction(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		ctx := context.Background()
		lengths := map[uuid.UUID]int{}
		var ids []uuid.UUID
		for round, rounds := 0, rapid.IntRange(1, 6).Draw(rt, "rounds"); round < rounds; round++ {
			for i, n := 0, rapid.IntRange(0, 1500).Draw(rt, "create"); i < n; i++ {
				j := put(rt, s, readyJob("m", sec(0)))
				ids = append(ids, j.ID)
				lengths[j.ID] = 1
			}
			for i, n := 0, rapid.IntRange(0, 600).Draw(rt, "grow"); i < n && len(ids) > 0; i++ {
				id := ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "grown")]
				if _, ok := lengths[id]; ok {
					change(rt, s, id, func(*jobstate.Job) {})
					lengths[id]++
				}
			}
			// Finish some jobs and prune them.
			every := rapid.IntRange(1, 20).Draw(rt, "keepOneIn")
			for i, id := range ids {
				if _, ok := lengths[id]; ok && i%every != 0 {
					change(rt, s, id, func(j *jobstate.Job) { j.State, j.Kind, j.CompletedAt = "done", jobstate.KindTerminal, sec(round) })
					delete(lengths, id)
				}
			}
			_, err := s.Prune(ctx, sec(round+1), 0)
			require.NoError(rt, err)
			checkLog(rt, s)
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

// TestPruneReleasesHistoryChunks: once the records of a chunk of the
// history log belong to pruned jobs, the chunk is released.
func TestPruneReleasesHistoryChunks(t *testing.T) {
	s := New()
	ctx := context.Background()
	for i := 0; i < logChunk+10; i++ {
		put(t, s, terminalJob("m", sec(0)))
	}
	require.Len(t, s.log.chunks, 2)
	n, err := s.Prune(ctx, sec(1), 0)
	require.NoError(t, err)
	assert.Equal(t, logChunk+10, n)
	assert.Equal(t, 1, s.log.chunksInUse(), "only the tail is kept")
	assert.Zero(t, s.Len())
}

// TestReleasedChunkIsReused: the records of a released chunk, all zero,
// become the next chunk's, instead of a new allocation; the chunks after
// it are allocated as before.
func TestReleasedChunkIsReused(t *testing.T) {
	s := New()
	ctx := context.Background()
	for i := 0; i < logChunk+10; i++ {
		put(t, s, terminalJob("m", sec(0)))
	}
	first := &s.log.chunks[0].recs[0]
	_, err := s.Prune(ctx, sec(1), 0)
	require.NoError(t, err)
	require.NotNil(t, s.log.spare, "the released chunk is kept as the spare")
	for i := range s.log.spare {
		require.Zero(t, s.log.spare[i], "record %d of the spare", i)
	}
	for i := 0; i < logChunk; i++ { // fill the tail, then start a new chunk
		put(t, s, terminalJob("m", sec(2)))
	}
	tail := s.log.chunks[s.log.tail]
	assert.Same(t, first, &tail.recs[0], "the new tail took the spare's records")
	assert.Nil(t, s.log.spare)
	checkLog(t, s)
}
