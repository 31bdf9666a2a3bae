package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// RunKeyLimits checks Policy.MaxPerKey, the limit of live executions per
// concurrency key, on a store that enforces it (jobstate.KeyLimiter): the
// claims skip a key at its limit and take the other keys' jobs in claim
// order, a batch claim counts the jobs it took itself, a claim of a named
// job at its key's limit is refused and changes nothing, an expired lease
// counts until it is reclaimed, concurrent claims never pass the limit,
// and a random sequence of operations never leaves more live executions
// on a key than the limit, nor a claimable job unclaimed. On a store that
// does not enforce it, it checks that the engine refuses such a machine.
func RunKeyLimits(t *testing.T, newStore NewStore) {
	if kl, ok := newStore(t).(jobstate.KeyLimiter); !ok || !kl.LimitsKeys() {
		t.Run("RefusedWithoutEnforcement", func(t *testing.T) {
			def, err := jobstate.NewDefinition(keySpec("keyed", 1))
			require.NoError(t, err)
			_, err = jobstate.New(newStore(t), jobstate.WithMachines(def))
			assert.ErrorIs(t, err, jobstate.ErrUnsupported)
			plain, err := jobstate.NewDefinition(keySpec("plain", 0))
			require.NoError(t, err)
			eng, err := jobstate.New(newStore(t), jobstate.WithMachines(plain))
			require.NoError(t, err)
			_, err = eng.Create(context.Background(), jobstate.NewJob{Machine: "plain", ConcurrencyKey: "a"})
			assert.ErrorIs(t, err, jobstate.ErrUnsupported, "a concurrency key the store would not enforce")
		})
		return
	}
	t.Run("ClaimSkipsKeysAtLimit", func(t *testing.T) { testKeySkip(t, newStore) })
	t.Run("LimitAboveOne", func(t *testing.T) { testKeyLimitTwo(t, newStore) })
	t.Run("BatchCountsItsOwnClaims", func(t *testing.T) { testKeyBatchCounts(t, newStore) })
	t.Run("ClaimJobRefusedAtLimit", func(t *testing.T) { testKeyClaimJob(t, newStore) })
	t.Run("StoreRefusesWrite", func(t *testing.T) { testKeyStoreRefuses(t, newStore) })
	t.Run("LimitPerMachine", func(t *testing.T) { testKeyPerMachine(t, newStore) })
	t.Run("ExpiredLeaseCountsUntilReclaimed", func(t *testing.T) { testKeyExpired(t, newStore) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testKeyConcurrent(t, newStore, 2, false) })
	t.Run("ConcurrentBatchClaims", func(t *testing.T) { testKeyConcurrent(t, newStore, 2, true) })
	t.Run("ConcurrentClaimsOneAtATimeInOrder", func(t *testing.T) { testKeyConcurrent(t, newStore, 1, false) })
	t.Run("NeverAboveLimit", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propKeyLimit(rt, t, newStore) })
	})
}

// keySpec is a queue whose jobs may run at most limit at once per
// concurrency key: QUEUED, RUNNING while claimed, retried to QUEUED after
// a failure (a fixed one-second backoff), DONE or FAILED.
func keySpec(name string, limit int) jobstate.Spec {
	from := func(s ...jobstate.State) []jobstate.State { return s }
	return jobstate.Spec{
		Name: name,
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: from("QUEUED"), Event: jobstate.EventClaim, To: "RUNNING"},
			{From: from("RUNNING"), Event: jobstate.EventSucceed, To: "DONE"},
			{From: from("RUNNING"), Event: jobstate.EventRetry, To: "QUEUED"},
			{From: from("RUNNING"), Event: jobstate.EventFail, To: "FAILED"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:  30 * time.Second,
			MaxPerKey: limit,
			Retry:     jobstate.RetryPolicy{MaxRetries: jobstate.Unlimited, Backoff: jobstate.FixedBackoff(time.Second)},
		},
	}
}

// keyed creates a job of machine with concurrency key k, one second after
// the previous one, so that creation order is claim order.
func (f *fixture) keyed(machine, k string) jobstate.Job {
	f.T.Helper()
	f.Clock.Advance(time.Second)
	return f.Create(machine, jobstate.NewJob{ConcurrencyKey: k})
}

// claimOrNone claims the next job of machine, or returns the zero Claimed
// when none may be claimed.
func (f *fixture) claimOrNone(machine string) jobstate.Claimed {
	f.T.Helper()
	c, err := f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"})
	if errors.Is(err, jobstate.ErrNoJob) {
		return jobstate.Claimed{}
	}
	require.NoError(f.T, err)
	return c
}

func testKeySkip(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("keyed", 1))
	a1, a2 := f.keyed("keyed", "a"), f.keyed("keyed", "a")
	b1, none := f.keyed("keyed", "b"), f.keyed("keyed", "")
	first := f.claimOrNone("keyed")
	assert.Equal(t, a1.ID, first.Job.ID)
	assert.Equal(t, b1.ID, f.claimOrNone("keyed").Job.ID, "a's second job waits behind a1; b's is next")
	assert.Equal(t, none.ID, f.claimOrNone("keyed").Job.ID, "a job without a key is not limited")
	assert.Equal(t, uuid.Nil, f.claimOrNone("keyed").Job.ID, "a2 waits while a1 runs")
	assert.Equal(t, "QUEUED", string(f.Get(a2.ID).State))
	_, err := f.Eng.Succeed(f.Ctx, first.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	assert.Equal(t, a2.ID, f.claimOrNone("keyed").Job.ID, "a's next job once a1 finished")
}

func testKeyLimitTwo(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("keyed", 2))
	var jobs []jobstate.Job
	for i := 0; i < 3; i++ {
		jobs = append(jobs, f.keyed("keyed", "a"))
	}
	assert.Equal(t, jobs[0].ID, f.claimOrNone("keyed").Job.ID)
	assert.Equal(t, jobs[1].ID, f.claimOrNone("keyed").Job.ID)
	assert.Equal(t, uuid.Nil, f.claimOrNone("keyed").Job.ID, "two run; the third waits")
	got, err := f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"}, 5)
	assert.ErrorIs(t, err, jobstate.ErrNoJob, "a batch claim passes the limit no more than a single one")
	assert.Empty(t, got)
}

// testKeyBatchCounts: one batch claim takes a key's jobs only up to the
// limit, counting the live execution the key had before it and each job
// of the key the batch itself took. The key's jobs have priorities of
// their own, so that a store that offers a key's first job per priority
// (pgstore's heads) may offer several of them to one batch.
func testKeyBatchCounts(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("keyed", 3))
	keyed := func(k string, priority int) jobstate.Job {
		f.Clock.Advance(time.Second)
		return f.Create("keyed", jobstate.NewJob{ConcurrencyKey: k, Priority: priority})
	}
	first := keyed("a", 5)
	assert.Equal(t, first.ID, f.claimOrNone("keyed").Job.ID)
	a2, a1, a0, b := keyed("a", 2), keyed("a", 1), keyed("a", 0), keyed("b", 0)
	got, err := f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"}, 6)
	require.NoError(t, err)
	var ids []uuid.UUID
	for _, c := range got {
		ids = append(ids, c.Job.ID)
	}
	assert.Equal(t, []uuid.UUID{a2.ID, a1.ID, b.ID}, ids, "a's live execution and the two the batch took make three")
	assert.Equal(t, "QUEUED", string(f.Get(a0.ID).State))
}

func testKeyClaimJob(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("keyed", 1))
	a1, a2 := f.keyed("keyed", "a"), f.keyed("keyed", "a")
	f.claimOrNone("keyed")
	before := f.Snapshot(a2.ID)
	_, err := f.Eng.ClaimJob(f.Ctx, a2.ID, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
	assert.ErrorIs(t, err, jobstate.ErrKeyLimit)
	assert.Equal(t, before, f.Snapshot(a2.ID), "a refused claim changes nothing")
	assert.Equal(t, 1, f.Get(a1.ID).Leases)
}

// The store itself refuses a write that would take a key above the limit
// the write carries, whatever function produced it.
func testKeyStoreRefuses(t *testing.T, newStore NewStore) {
	s := newStore(t)
	ctx := context.Background()
	mk := func(leases int) jobstate.Job {
		j := mkJob(Epoch)
		j.ConcurrencyKey = "a"
		j.Leases = leases
		return insert(t, s, j)
	}
	mk(1)
	other := mk(0)
	raise := func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		n := cur.Job
		n.Version++
		n.Leases++
		return jobstate.Write{Job: n, MaxPerKey: 1}, nil
	}
	_, err := s.Update(ctx, other.ID, raise)
	assert.ErrorIs(t, err, jobstate.ErrKeyLimit)
	assert.Equal(t, other, load(t, s, other.ID).Job, "the refused write changed nothing")
	// A write that does not raise the job's leases is not limited, nor one
	// that carries no limit.
	_, err = s.Update(ctx, other.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		n := cur.Job
		n.Version++
		return jobstate.Write{Job: n, MaxPerKey: 1}, nil
	})
	assert.NoError(t, err)
	_, err = s.Update(ctx, other.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		n := cur.Job
		n.Version++
		n.Leases++
		return jobstate.Write{Job: n}, nil
	})
	assert.NoError(t, err)
}

func testKeyPerMachine(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("one", 1), keySpec("two", 1))
	a, b := f.keyed("one", "k"), f.keyed("two", "k")
	assert.Equal(t, a.ID, f.claimOrNone("one").Job.ID)
	assert.Equal(t, b.ID, f.claimOrNone("two").Job.ID, "a key is limited within its machine")
}

func testKeyExpired(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, keySpec("keyed", 1))
	a1, a2 := f.keyed("keyed", "a"), f.keyed("keyed", "a")
	f.claimOrNone("keyed")
	f.Clock.Advance(time.Minute) // a1's lease expired; not yet reclaimed
	assert.Equal(t, uuid.Nil, f.claimOrNone("keyed").Job.ID, "an expired lease counts until the sweep reclaims it")
	f.Sweep()
	assert.Equal(t, 0, f.Get(a1.ID).Leases)
	assert.Equal(t, a2.ID, f.claimOrNone("keyed").Job.ID, "the key's next job once the lease was reclaimed")
}

// testKeyConcurrent runs several engines (as processes would) on one store
// over the jobs of a few keys: each claims, notes the live executions of
// the key it took, and finishes the job. The noted count never passes the
// limit, and every job is done. With a limit of 1 the claims of a key are
// linearizable: each key's jobs were claimed one at a time, in the order
// they were created (their claim order).
func testKeyConcurrent(t *testing.T, newStore NewStore, limit int, batch bool) {
	const keys, perKey, engines = 4, 25, 6
	s := newStore(t)
	def, err := jobstate.NewDefinition(keySpec("keyed", limit))
	require.NoError(t, err)
	ctx := context.Background()
	var engs []*jobstate.Engine
	for i := 0; i < engines; i++ {
		eng, err := jobstate.New(s, jobstate.WithMachines(def), jobstate.WithClock(jobstate.NewManualClock(Epoch)))
		require.NoError(t, err)
		engs = append(engs, eng)
	}
	var ids []uuid.UUID
	for i := 0; i < keys*perKey; i++ {
		c, err := engs[0].Create(ctx, jobstate.NewJob{Machine: "keyed", ConcurrencyKey: fmt.Sprint("k", i%keys)})
		require.NoError(t, err)
		ids = append(ids, c.Job.ID)
	}
	var mu sync.Mutex
	live := make(map[string]int)
	claimed := make(map[string][]uuid.UUID)
	most := 0
	enter := func(k string, id uuid.UUID) {
		mu.Lock()
		defer mu.Unlock()
		live[k]++
		most = max(most, live[k])
		claimed[k] = append(claimed[k], id)
	}
	leave := func(k string) {
		mu.Lock()
		defer mu.Unlock()
		live[k]--
	}
	var wg sync.WaitGroup
	for _, eng := range engs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 50; {
				var got []jobstate.Claimed
				if batch {
					cs, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"}, 3)
					if err != nil && !errors.Is(err, jobstate.ErrNoJob) {
						t.Error(err)
						return
					}
					got = cs
				} else {
					c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"})
					switch {
					case errors.Is(err, jobstate.ErrNoJob):
					case err != nil:
						t.Error(err)
						return
					default:
						got = append(got, c)
					}
				}
				if len(got) == 0 {
					idle++
					continue
				}
				idle = 0
				for _, c := range got {
					enter(c.Job.ConcurrencyKey, c.Job.ID)
				}
				for _, c := range got {
					// The count leaves before the store's, so it is never
					// above the store's own.
					leave(c.Job.ConcurrencyKey)
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
	if limit == 1 {
		for k := 0; k < keys; k++ {
			var mine []jobstate.Job
			for i := k; i < len(ids); i += keys {
				j, err := s.Get(ctx, ids[i])
				require.NoError(t, err)
				mine = append(mine, j)
			}
			sort.Slice(mine, func(a, b int) bool { return claimsBefore(&mine[a], &mine[b]) })
			var want []uuid.UUID
			for _, j := range mine {
				want = append(want, j.ID)
			}
			key := fmt.Sprint("k", k)
			got := claimed[key]
			assert.Equal(t, want[:len(got)], got, "key %s: its jobs claimed one at a time in claim order", key)
		}
	}
	for _, id := range ids {
		j, err := s.Get(ctx, id)
		require.NoError(t, err)
		if j.State != "DONE" {
			// Engines that saw no job for a while stopped: finish the rest.
			c, err := engs[0].ClaimJob(ctx, id, jobstate.ClaimRequest{Machine: "keyed", Worker: "w"})
			require.NoError(t, err, "job %s in %s", id, j.State)
			_, err = engs[0].Succeed(ctx, c.Lease, jobstate.CommitInput{})
			require.NoError(t, err)
		}
	}
}

// propKeyLimit drives one engine over keyed jobs with random operations
// (creations, claims one at a time or in batches, claims of a named job,
// successes, retried failures, heartbeats, time passing beyond leases,
// sweeps) and checks after each that no key holds more live executions
// than the limit, and that a claim finding no job left no claimable job:
// every due ready job then had a key at its limit, and that a claim took
// the first claimable job in claim order.
func propKeyLimit(rt *rapid.T, t *testing.T, newStore NewStore) {
	limit := rapid.IntRange(1, 3).Draw(rt, "limit")
	def, err := jobstate.NewDefinition(keySpec("keyed", limit))
	if err != nil {
		rt.Fatal(err)
	}
	s := newStore(t)
	clock := jobstate.NewManualClock(Epoch)
	eng, err := jobstate.New(s, jobstate.WithMachines(def), jobstate.WithClock(clock))
	if err != nil {
		rt.Fatal(err)
	}
	ctx := context.Background()
	var ids []uuid.UUID
	var leases []jobstate.Lease
	keys := []string{"", "a", "b", "c"}
	req := jobstate.ClaimRequest{Machine: "keyed", Worker: "w"}

	jobs := func() []jobstate.Job {
		out := make([]jobstate.Job, 0, len(ids))
		for _, id := range ids {
			j, err := s.Get(ctx, id)
			if err != nil {
				rt.Fatal(err)
			}
			out = append(out, j)
		}
		return out
	}
	liveOf := func(all []jobstate.Job) map[string]int {
		live := make(map[string]int)
		for _, j := range all {
			if j.ConcurrencyKey != "" {
				live[j.ConcurrencyKey] += j.Leases
			}
		}
		return live
	}
	// next returns the job a claim must take: the first in claim order of
	// the due ready jobs whose key is below the limit; nil when none is.
	next := func() *jobstate.Job {
		all := jobs()
		live := liveOf(all)
		var first *jobstate.Job
		for i := range all {
			j := &all[i]
			if j.Kind != jobstate.KindReady || j.Leases != 0 || j.NotBefore.After(clock.Now()) ||
				(j.ConcurrencyKey != "" && live[j.ConcurrencyKey] >= limit) {
				continue
			}
			if first == nil || claimsBefore(j, first) {
				first = j
			}
		}
		return first
	}
	noted := func(err error) {
		// An operation on a lease that ended, or a claim of a job that
		// cannot be claimed now, is refused; nothing else may fail.
		if err != nil && !errors.Is(err, jobstate.ErrLeaseLost) && !errors.Is(err, jobstate.ErrNotClaimable) &&
			!errors.Is(err, jobstate.ErrAlreadyCommitted) {
			rt.Fatalf("unexpected error: %v", err)
		}
	}
	rt.Repeat(map[string]func(*rapid.T){
		"create": func(rt *rapid.T) {
			c, err := eng.Create(ctx, jobstate.NewJob{
				Machine: "keyed", ConcurrencyKey: rapid.SampledFrom(keys).Draw(rt, "key"),
				Priority: rapid.IntRange(0, 2).Draw(rt, "priority"),
			})
			if err != nil {
				rt.Fatal(err)
			}
			ids = append(ids, c.Job.ID)
		},
		"claim": func(rt *rapid.T) {
			want := next()
			c, err := eng.Claim(ctx, req)
			switch {
			case errors.Is(err, jobstate.ErrNoJob):
				if want != nil {
					rt.Fatalf("no job claimed while job %s (key %q) could be", want.ID, want.ConcurrencyKey)
				}
			case err != nil:
				rt.Fatal(err)
			default:
				if want == nil || c.Job.ID != want.ID {
					rt.Fatalf("claimed job %s (key %q), want the first claimable in claim order: %v", c.Job.ID, c.Job.ConcurrencyKey, want)
				}
				leases = append(leases, c.Lease)
			}
		},
		"claimMany": func(rt *rapid.T) {
			cs, err := eng.ClaimMany(ctx, req, rapid.IntRange(1, 4).Draw(rt, "n"))
			if err != nil && !errors.Is(err, jobstate.ErrNoJob) {
				rt.Fatal(err)
			}
			for _, c := range cs {
				leases = append(leases, c.Lease)
			}
		},
		"claimJob": func(rt *rapid.T) {
			if len(ids) == 0 {
				rt.Skip("no job")
			}
			c, err := eng.ClaimJob(ctx, rapid.SampledFrom(ids).Draw(rt, "job"), req)
			if err == nil {
				leases = append(leases, c.Lease)
			}
			noted(err)
		},
		"succeed": func(rt *rapid.T) {
			if len(leases) == 0 {
				rt.Skip("no lease")
			}
			_, err := eng.Succeed(ctx, rapid.SampledFrom(leases).Draw(rt, "lease"), jobstate.CommitInput{})
			noted(err)
		},
		"fail": func(rt *rapid.T) {
			if len(leases) == 0 {
				rt.Skip("no lease")
			}
			_, err := eng.Fail(ctx, rapid.SampledFrom(leases).Draw(rt, "lease"), errors.New("retry me"))
			noted(err)
		},
		"heartbeat": func(rt *rapid.T) {
			if len(leases) == 0 {
				rt.Skip("no lease")
			}
			_, err := eng.Heartbeat(ctx, rapid.SampledFrom(leases).Draw(rt, "lease"))
			noted(err)
		},
		"time": func(rt *rapid.T) {
			clock.Advance(time.Duration(rapid.IntRange(1, 40).Draw(rt, "seconds")) * time.Second)
		},
		"sweep": func(rt *rapid.T) {
			if _, err := eng.Sweep(ctx); err != nil {
				rt.Fatal(err)
			}
		},
		"": func(rt *rapid.T) {
			for k, n := range liveOf(jobs()) {
				if n > limit {
					rt.Fatalf("key %q holds %d live executions, above the limit %d", k, n, limit)
				}
			}
		},
	})
}

// claimsBefore reports whether a comes before b in claim order: higher
// priority first, then the earlier due time, then the earlier creation,
// then the smaller id.
func claimsBefore(a, b *jobstate.Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if c := a.DueAt().Compare(b.DueAt()); c != 0 {
		return c < 0
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.ID[:], b.ID[:]) < 0
}
