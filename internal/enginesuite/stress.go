package enginesuite

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/require"
)

// testStress runs 8 workers over n jobs (1,000 at most with -short) while a sweeper moves the fake
// clock: workers crash before and after commits, fail, and lose leases.
// Every job must end terminal, with its effect applied exactly once if it
// succeeded and never otherwise.
func testStress(t *testing.T, newStore NewStore, n int) {
	if testing.Short() {
		n = min(n, 1_000)
	}
	var terminal atomic.Int64
	obs := jobstate.WithObserver(func(_ context.Context, j jobstate.Job, tr jobstate.Transition) {
		if j.Terminal() && tr.To == j.State {
			terminal.Add(1)
		}
	})
	f := NewFixture(t, newStore, []jobstate.Option{obs}, m.ProjectedSpec())
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = f.Create("projected", jobstate.NewJob{}).ID
	}
	var mu sync.Mutex
	effects := make(map[uuid.UUID]int, n)
	effect := func(_ context.Context, j jobstate.Job) error {
		mu.Lock()
		effects[j.ID]++
		mu.Unlock()
		return nil
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			worker := string(rune('A' + w))
			for {
				select {
				case <-done:
					return
				default:
				}
				c, err := f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: "projected", Worker: worker})
				if errors.Is(err, jobstate.ErrNoJob) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = f.Eng.Start(f.Ctx, c.Lease)
				switch r := rnd.IntN(20); {
				case r == 0: // crash before commit: the lease is abandoned
				case r == 1: // crash after commit
					_, _ = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: effect})
				case r < 4:
					_, _ = f.Eng.Fail(f.Ctx, c.Lease, errors.New("transient"))
				case r == 4:
					_, _ = f.Eng.Fail(f.Ctx, c.Lease, jobstate.Permanent(errors.New("bad input")))
				case r == 5: // duplicate delivery of the commit
					_, _ = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: effect})
					_, _ = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: effect})
					_, _ = f.Eng.Finish(f.Ctx, c.Lease)
					_, _ = f.Eng.Finish(f.Ctx, c.Lease)
				default:
					_, _ = f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{Effect: effect})
				}
			}
		}(w)
	}
	// The sweeper: time passes, leases expire, recovery runs.
	for rounds := 0; terminal.Load() < int64(n); rounds++ {
		if rounds > 100_000 {
			t.Fatalf("only %d of %d jobs terminal", terminal.Load(), n)
		}
		f.Clock.Advance(3 * time.Second)
		_, err := f.Eng.Sweep(f.Ctx)
		require.NoError(t, err)
		runtime.Gosched()
	}
	close(done)
	wg.Wait()

	succeeded := 0
	for _, id := range ids {
		st := f.Snapshot(id)
		require.True(t, st.Job.Terminal(), "job %s ended %s", id, st.Job.State)
		require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
		if st.Job.Outcome == jobstate.OutcomeSucceeded {
			succeeded++
			assert.Equal(t, 1, effects[id], "job %s succeeded: effect exactly once", id)
		} else {
			assert.Zero(t, effects[id], "job %s did not succeed: no effect", id)
		}
		assert.LessOrEqual(t, st.Job.RetryCount, st.Job.MaxRetries)
	}
	assert.Positive(t, succeeded)
}
