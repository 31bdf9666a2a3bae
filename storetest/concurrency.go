package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// RunConcurrency checks the contract's isolation clauses with many
// goroutines. Run it with -race.
func RunConcurrency(t *testing.T, newStore NewStore) {
	t.Run("UpdatesSerializePerJob", func(t *testing.T) { testUpdatesSerialize(t, newStore(t)) })
	t.Run("CreatesSerializePerKey", func(t *testing.T) { testCreatesSerialize(t, newStore(t)) })
	t.Run("ClaimNextTakesEachJobOnce", func(t *testing.T) { testClaimOnce(t, newStore(t)) })
	t.Run("ReadsDoNotWaitForUpdates", func(t *testing.T) { testReadsDoNotWait(t, newStore(t)) })
	t.Run("CreateReturnsTheJobAsCreated", func(t *testing.T) { testCreateReturnsCreated(t, newStore(t)) })
}

const workers = 8

func testUpdatesSerialize(t *testing.T, s jobstate.Store) {
	j := insert(t, s, mkJob(Epoch))
	const per = 50
	var inside atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				_, err := s.Update(context.Background(), j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
					if inside.Add(1) != 1 {
						t.Error("two update functions ran at once on one job")
					}
					defer inside.Add(-1)
					n := cur.Job
					n.Version++
					n.Attempt++
					return jobstate.Write{Job: n}, nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got := load(t, s, j.ID).Job
	assert.Equal(t, workers*per, got.Attempt, "no update may be lost")
	assert.Equal(t, int64(1+workers*per), got.Version)
}

func testCreatesSerialize(t *testing.T, s jobstate.Store) {
	var effects atomic.Int32
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			j, _, err := s.Create(context.Background(), "m", "same-key", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
				if ex != nil {
					return jobstate.Write{}, nil
				}
				effects.Add(1)
				return creation(mkJob(Epoch)), nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			ids[w] = j.ID
		}(w)
	}
	wg.Wait()
	assert.Equal(t, int32(1), effects.Load(), "one key, one creation")
	for _, id := range ids {
		assert.Equal(t, ids[0], id, "every create with the key returns the same job")
	}
}

func testClaimOnce(t *testing.T, s jobstate.Store) {
	const jobs = 200
	for i := 0; i < jobs; i++ {
		insert(t, s, mkJob(Epoch.Add(time.Duration(i))))
	}
	var mu sync.Mutex
	claimed := make(map[uuid.UUID]int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimNext(context.Background(), jobstate.ClaimQuery{Machine: "m", Now: Epoch.Add(time.Hour)}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
					if cur.Job.Kind != jobstate.KindReady {
						t.Error("offered a job that is no longer ready")
					}
					return next(cur.Job, "r", jobstate.KindActive), nil
				})
				if errors.Is(err, jobstate.ErrNoJob) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				claimed[got.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, claimed, jobs, "every job claimed")
	for id, n := range claimed {
		assert.Equal(t, 1, n, "job %s claimed %d times", id, n)
	}
}

// testCreateReturnsCreated creates jobs while other goroutines claim them
// as soon as they are stored: each Create returns the job as it created
// it, never a version a claim wrote meanwhile (and, under -race, reads
// nothing a claim is writing).
func testCreateReturnsCreated(t *testing.T, s jobstate.Store) {
	const jobs = 300
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: Epoch.Add(time.Hour)}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
					return next(cur.Job, "r", jobstate.KindActive), nil
				})
				if err != nil && !errors.Is(err, jobstate.ErrNoJob) && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < jobs; i++ {
		j := mkJob(Epoch.Add(time.Duration(i)))
		got := insert(t, s, j)
		if got.Version != j.Version || got.State != j.State {
			t.Errorf("Create returned version %d in %q, want the created version %d in %q", got.Version, got.State, j.Version, j.State)
		}
	}
	cancel()
	wg.Wait()
}

func testReadsDoNotWait(t *testing.T, s jobstate.Store) {
	j := insert(t, s, mkJob(Epoch))
	entered := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			close(entered)
			<-release
			return next(cur.Job, "r", jobstate.KindActive), nil
		})
		done <- err
	}()
	<-entered
	// While the update function runs, reads answer with the last written
	// version (a store that blocked here would deadlock the test).
	got, err := s.Get(context.Background(), j.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Version)
	_, err = s.History(context.Background(), j.ID)
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-done)
	got, err = s.Get(context.Background(), j.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Version)
}
