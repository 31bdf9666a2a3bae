package jobstate_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// TestDefaultIDs: the engine's default ids are UUIDv7 (version 7, RFC
// 9562 variant), carry the creation's millisecond, and increase strictly
// in the order they are drawn.
func TestDefaultIDs(t *testing.T) {
	def, err := jobstate.NewDefinition(queueSpec())
	require.NoError(t, err)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	require.NoError(t, err)
	ctx := context.Background()
	var prev uuid.UUID
	for i := 0; i < 1000; i++ {
		before := time.Now().UnixMilli()
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
		require.NoError(t, err)
		after := time.Now().UnixMilli()
		id := c.Job.ID
		require.Equal(t, uuid.Version(7), id.Version(), "%s", id)
		require.Equal(t, uuid.RFC4122, id.Variant(), "%s", id)
		ms := id.Time() // 100 ns intervals since 1582 for v7: the Unix milliseconds
		sec, nsec := ms.UnixTime()
		at := sec*1000 + nsec/int64(time.Millisecond)
		assert.GreaterOrEqual(t, at, before-1)
		assert.LessOrEqual(t, at, after+1)
		require.Positive(t, bytes.Compare(id[:], prev[:]), "ids increase: %s after %s", id, prev)
		prev = id
	}
}

// TestDefaultIDsConcurrent: ids drawn at once by many goroutines are all
// distinct.
func TestDefaultIDsConcurrent(t *testing.T) {
	def, err := jobstate.NewDefinition(queueSpec())
	require.NoError(t, err)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[uuid.UUID]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				c, err := eng.Create(context.Background(), jobstate.NewJob{Machine: "queue"})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				assert.False(t, seen[c.Job.ID], "id drawn twice")
				seen[c.Job.ID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, 4000)
}
