package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestPruneReleasesHistoryChunks: once every record of a full chunk of the
// history log belongs to pruned jobs, the chunk is released.
func TestPruneReleasesHistoryChunks(t *testing.T) {
	s := New()
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < logChunk+10; i++ {
		j := jobstate.Job{ID: uuid.New(), Machine: "m", State: "done", Kind: jobstate.KindTerminal, Version: 1, CompletedAt: at}
		_, _, err := s.Create(ctx, "m", "", func(context.Context, *jobstate.Job) (*jobstate.Write, error) {
			return &jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: 1, Event: jobstate.EventCreate, To: "done"}}}, nil
		})
		require.NoError(t, err)
	}
	require.Len(t, s.log.chunks, 2)
	n, err := s.Prune(ctx, at.Add(time.Second), 0)
	require.NoError(t, err)
	assert.Equal(t, logChunk+10, n)
	assert.Nil(t, s.log.chunks[0], "the full chunk is released")
	assert.NotNil(t, s.log.chunks[1], "the chunk still being filled stays")
	assert.Zero(t, s.Len())
}
