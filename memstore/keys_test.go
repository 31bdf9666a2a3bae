package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// finishes fails the test if run has not returned within a generous
// bound: a deadlock shows as a failure rather than a hung test.
func finishes(t *testing.T, bound time.Duration, run func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("still running after %s: deadlock", bound)
	}
}

// TestNestedCreatesDistinctKeys: a Create's function may create a job
// under another key (a creation effect creating further jobs), and update
// another job, since it holds the lock of its own key only: no lock is
// shared between keys, so no nesting deadlocks.
func TestNestedCreatesDistinctKeys(t *testing.T) {
	s := New()
	ctx := context.Background()
	other := put(t, s, readyJob("m", sec(0)))
	const n = 10_000
	const workers = 4
	errs := make(chan error, workers)
	finishes(t, 2*time.Minute, func() {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					outer := readyJob("m", sec(0))
					outer.IdempotencyKey = fmt.Sprintf("outer-%d", i)
					_, _, err := s.Create(ctx, "m", outer.IdempotencyKey, func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
						inner := readyJob("m", sec(0))
						inner.IdempotencyKey = fmt.Sprintf("inner-%d", i)
						if _, _, err := s.Create(ctx, "m", inner.IdempotencyKey, func(context.Context, *jobstate.Job) (jobstate.Write, error) {
							return creation(inner), nil
						}); err != nil {
							return jobstate.Write{}, err
						}
						if i%100 == 0 {
							if _, err := s.Update(ctx, other.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
								j := cur.Job
								j.Version++
								return jobstate.Write{Job: j}, nil
							}); err != nil {
								return jobstate.Write{}, err
							}
						}
						return creation(outer), nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 2*n+1, s.Len())
	got, err := s.Get(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1+n/100), got.Version)
	s.keyLocks.mu.Lock()
	assert.Empty(t, s.keyLocks.locks, "no key lock is kept once its Creates are done")
	s.keyLocks.mu.Unlock()
}

// TestSameKeySerialised: Creates of one key run one at a time, and the
// second sees the first's job.
func TestSameKeySerialised(t *testing.T) {
	s := New()
	ctx := context.Background()
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, created := 0, 0
	finishes(t, time.Minute, func() {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := s.Create(ctx, "m", "k", func(_ context.Context, existing *jobstate.Job) (jobstate.Write, error) {
					mu.Lock()
					inside++
					assert.Equal(t, 1, inside, "one function at a time per key")
					mu.Unlock()
					defer func() { mu.Lock(); inside--; mu.Unlock() }()
					if existing != nil {
						return jobstate.Write{}, nil
					}
					j := readyJob("m", sec(0))
					j.IdempotencyKey = "k"
					return creation(j), nil
				})
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					created++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	})
	assert.Equal(t, 1, created)
	assert.Equal(t, 1, s.Len())
}
