package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// keyedEngine returns an engine on s running queueSpec with a limit of
// limit live executions per key, on a manual clock.
func keyedEngine(t *testing.T, s jobstate.Store, limit int) *jobstate.Engine {
	t.Helper()
	spec := queueSpec()
	spec.Policy.MaxPerKey = limit
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	eng, err := jobstate.New(s, jobstate.WithMachines(def),
		jobstate.WithClock(jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	require.NoError(t, err)
	return eng
}

// guardLimit adds a trigger to s's file that fails any write leaving a
// key of machine "queue" with more than limit live executions, so that a
// write past the limit fails in the database itself, whoever made it.
func guardLimit(t *testing.T, s *sqlitestore.Store, limit int) {
	t.Helper()
	_, err := s.DB().ExecContext(context.Background(), fmt.Sprintf(`CREATE TRIGGER key_limit_guard AFTER UPDATE OF leases ON jobs
 WHEN NEW.concurrency_key <> '' AND (SELECT sum(leases) FROM jobs WHERE machine = NEW.machine AND concurrency_key = NEW.concurrency_key) > %d
 BEGIN SELECT RAISE(ABORT, 'key above its limit'); END`, limit))
	require.NoError(t, err)
}

// TestClaimBatchRechecksKeys: a batch claim takes a key's first job and
// passes over its others in the same transaction, taking the other
// keys' jobs and those without a key in claim order.
func TestClaimBatchRechecksKeys(t *testing.T) {
	ctx := context.Background()
	s := open(t, sqlitestore.Options{Synchronous: "NORMAL"})
	guardLimit(t, s, 1)
	eng := keyedEngine(t, s, 1)
	var ids []uuid.UUID
	for _, k := range []string{"a", "a", "b", "a", "", "b"} {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", ConcurrencyKey: k})
		require.NoError(t, err)
		ids = append(ids, c.Job.ID)
	}
	got, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"}, 6)
	require.NoError(t, err)
	var taken []uuid.UUID
	for _, c := range got {
		taken = append(taken, c.Job.ID)
	}
	assert.Equal(t, []uuid.UUID{ids[0], ids[2], ids[4]}, taken, "a's first job, b's first job, the job without a key")
	_, err = eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"}, 6)
	assert.ErrorIs(t, err, jobstate.ErrNoJob, "every key is at its limit")
	_, err = eng.Succeed(ctx, got[0].Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	again, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"}, 6)
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.Equal(t, ids[1], again[0].Job.ID, "a's next job once its first finished")
}

// TestKeyLimitAcrossHandles runs engines on two stores opened on one file
// (two writer connections, which take turns through the file's write
// lock as two processes do), claiming and finishing the jobs of a few
// keys at once, single and batched. A trigger fails any write that
// leaves a key above the limit, and the claims' own count of live
// executions never passes it; every job ends done.
func TestKeyLimitAcrossHandles(t *testing.T) {
	const limit, keys, perKey, perStore = 1, 4, 15, 3
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	stores := []*sqlitestore.Store{
		openAt(t, path, sqlitestore.Options{Synchronous: "NORMAL"}),
		openAt(t, path, sqlitestore.Options{Synchronous: "NORMAL"}),
	}
	guardLimit(t, stores[0], limit)
	var engs []*jobstate.Engine
	for _, s := range stores {
		for i := 0; i < perStore; i++ {
			engs = append(engs, keyedEngine(t, s, limit))
		}
	}
	var ids []uuid.UUID
	for i := 0; i < keys*perKey; i++ {
		c, err := engs[0].Create(ctx, jobstate.NewJob{Machine: "queue", ConcurrencyKey: fmt.Sprint("k", i%keys)})
		require.NoError(t, err)
		ids = append(ids, c.Job.ID)
	}
	var mu sync.Mutex
	live := make(map[string]int)
	most := 0
	var wg sync.WaitGroup
	for n, eng := range engs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := jobstate.ClaimRequest{Machine: "queue", Worker: fmt.Sprint("w", n)}
			for idle := 0; idle < 30; {
				var got []jobstate.Claimed
				var err error
				if n%2 == 0 {
					got, err = eng.ClaimMany(ctx, req, 2)
				} else {
					var c jobstate.Claimed
					if c, err = eng.Claim(ctx, req); err == nil {
						got = []jobstate.Claimed{c}
					}
				}
				if err != nil && !errors.Is(err, jobstate.ErrNoJob) {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					idle++
					continue
				}
				idle = 0
				mu.Lock()
				for _, c := range got {
					live[c.Job.ConcurrencyKey]++
					most = max(most, live[c.Job.ConcurrencyKey])
				}
				mu.Unlock()
				for _, c := range got {
					mu.Lock()
					live[c.Job.ConcurrencyKey]--
					mu.Unlock()
					if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most, limit, "live executions of one key")
	for _, id := range ids {
		j, err := stores[1].Get(ctx, id)
		require.NoError(t, err)
		if j.State != "DONE" {
			// Engines that saw no job for a while stopped: finish the rest.
			c, err := engs[0].ClaimJob(ctx, id, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
			require.NoError(t, err, "job %s in %s", id, j.State)
			_, err = engs[0].Succeed(ctx, c.Lease, jobstate.CommitInput{})
			require.NoError(t, err)
		}
	}
}
