package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// headsMismatch returns the rows by which key_heads differs from what it
// must hold: for each (machine, key, priority) with ready jobs with a
// key, the first of them in claim order with its claim-order columns
// ("want"), and no other row ("have").
func headsMismatch(tb testing.TB, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) []string {
	tb.Helper()
	jobs := pgx.Identifier{schema, "jobs"}.Sanitize()
	heads := pgx.Identifier{schema, "key_heads"}.Sanitize()
	rows, err := pool.Query(context.Background(), `WITH want AS (
  SELECT DISTINCT ON (machine, concurrency_key, priority) machine, concurrency_key, priority, id,
         due_at, due_ns, created_at, created_ns, not_before, not_before_ns
    FROM `+jobs+` WHERE kind = 'ready' AND concurrency_key <> ''
   ORDER BY machine, concurrency_key, priority, due_at, due_ns, created_at, created_ns, id),
 have AS (SELECT machine, concurrency_key, priority, job_id, due_at, due_ns, created_at, created_ns,
         not_before, not_before_ns FROM `+heads+`)
(SELECT 'want', w::text FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have) w)
UNION ALL
(SELECT 'have', h::text FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want) h)`)
	if err != nil {
		tb.Fatalf("reading key_heads: %v", err)
	}
	var out []string
	for rows.Next() {
		var side, row string
		if err := rows.Scan(&side, &row); err != nil {
			tb.Fatalf("reading key_heads: %v", err)
		}
		out = append(out, side+" "+row)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("reading key_heads: %v", err)
	}
	return out
}

// requireHeads fails the test when key_heads breaks its invariant.
func requireHeads(tb testing.TB, s *pgstore.Store, after string) {
	tb.Helper()
	if bad := headsMismatch(tb, s.Pool(), s.Schema()); len(bad) > 0 {
		tb.Fatalf("after %s, key_heads differs from the first ready job of each key and priority:\n%s", after, strings.Join(bad, "\n"))
	}
}

// storeFault fails the test on an error of the server or the connection
// (a deadlock, a lost connection): the engine's refusals are expected in
// a random sequence, these never.
func storeFault(tb testing.TB, op string, err error) {
	tb.Helper()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, jobstate.ErrUnavailable) {
		tb.Fatalf("%s: %v", op, err)
	}
}

// freshStore is a store with opts in a freshly migrated schema of its
// own, which no earlier test used (key_heads starts empty).
func freshStore(tb testing.TB, opts pgstore.Options) *pgstore.Store {
	tb.Helper()
	opts.Schema = pgtest.Schema(tb)
	s, err := pgstore.New(pgtest.Pool(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// keyedSpecs are the machines of the key_heads tests: "lim" limited to
// one live execution per key, "two" to two, "free" without a limit; each
// redrives its failed jobs, and retries without a backoff.
func keyedSpecs() []jobstate.Spec {
	var out []jobstate.Spec
	for name, limit := range map[string]int{"lim": 1, "two": 2, "free": 0} {
		s := workSpec()
		s.Name = name
		s.Policy.MaxPerKey = limit
		s.Policy.RedriveFrom = []jobstate.State{machines.WFailed}
		s.Policy.Retry.MaxRetries = 2
		out = append(out, s)
	}
	return out
}

// keyedEngine is an engine with keyedSpecs on store, with a manual clock.
func keyedEngine(tb testing.TB, store *pgstore.Store, clock *jobstate.ManualClock) *jobstate.Engine {
	tb.Helper()
	var defs []*jobstate.Definition
	for _, s := range keyedSpecs() {
		d, err := jobstate.NewDefinition(s)
		if err != nil {
			tb.Fatal(err)
		}
		defs = append(defs, d)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(defs...), jobstate.WithClock(clock))
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

// TestKeyHeadsRandomOperations: after every operation of a random
// sequence (creations one by one and in batches with keys, priorities and
// not-befores, claims limited or not, one by one and in batches,
// successes, retries, snoozes, cancellations, leases expiring and swept,
// redrives), key_heads holds exactly the first ready job of each
// (machine, key, priority); once the clock has passed every not-before
// and the machines are drained, no job is left ready and key_heads is
// empty. With and without group commit, three sequences each, drawn from
// fixed PCG states.
func TestKeyHeadsRandomOperations(t *testing.T) {
	for _, group := range []int{0, 4} {
		for stream := uint64(1); stream <= 3; stream++ {
			t.Run(fmt.Sprintf("group%d/stream%d", group, stream), func(t *testing.T) {
				store := freshStore(t, pgstore.Options{GroupCommit: group})
				clock := jobstate.NewManualClock(epoch)
				eng := keyedEngine(t, store, clock)
				randomKeyedOps(t, rand.New(rand.NewPCG(stream, uint64(group))), store, eng, clock, 160)
			})
		}
	}
}

func randomKeyedOps(t *testing.T, rng *rand.Rand, store *pgstore.Store, eng *jobstate.Engine, clock *jobstate.ManualClock, steps int) {
	ctx := context.Background()
	names := []string{"lim", "two", "free"}
	keys := []string{"a", "b", "c", ""}
	var leases []jobstate.Lease
	var ids []uuid.UUID
	newJob := func() jobstate.NewJob {
		nj := jobstate.NewJob{
			Machine:        names[rng.IntN(len(names))],
			ConcurrencyKey: keys[rng.IntN(len(keys))],
			Priority:       rng.IntN(3),
		}
		if rng.IntN(3) == 0 {
			nj.NotBefore = clock.Now().Add(time.Duration(rng.IntN(60)) * time.Second)
		}
		return nj
	}
	takeLease := func() (jobstate.Lease, bool) {
		if len(leases) == 0 {
			return jobstate.Lease{}, false
		}
		i := rng.IntN(len(leases))
		l := leases[i]
		leases = append(leases[:i], leases[i+1:]...)
		return l, true
	}
	pickJob := func() (uuid.UUID, bool) {
		if len(ids) == 0 {
			return uuid.Nil, false
		}
		return ids[rng.IntN(len(ids))], true
	}
	for step := 0; step < steps; step++ {
		var op string
		var err error
		switch r := rng.IntN(12); r {
		case 0, 1:
			op = "create"
			var c jobstate.Created
			if c, err = eng.Create(ctx, newJob()); err == nil {
				ids = append(ids, c.Job.ID)
			}
		case 2:
			op = "create many"
			news := make([]jobstate.NewJob, 1+rng.IntN(5))
			for i := range news {
				news[i] = newJob()
			}
			var created []jobstate.Created
			if created, err = eng.CreateMany(ctx, news); err == nil {
				for _, c := range created {
					ids = append(ids, c.Job.ID)
				}
			}
		case 3, 4:
			op = "claim"
			var c jobstate.Claimed
			if c, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: names[rng.IntN(len(names))], Worker: "w"}); err == nil {
				leases = append(leases, c.Lease)
			}
		case 5:
			op = "claim many"
			var cs []jobstate.Claimed
			if cs, err = eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: names[rng.IntN(len(names))], Worker: "w"}, 1+rng.IntN(4)); err == nil {
				for _, c := range cs {
					leases = append(leases, c.Lease)
				}
			}
		case 6:
			op = "succeed"
			if l, ok := takeLease(); ok {
				_, err = eng.Succeed(ctx, l, jobstate.CommitInput{})
			}
		case 7:
			op = "fail"
			if l, ok := takeLease(); ok {
				_, err = eng.Fail(ctx, l, errors.New("flaky"))
			}
		case 8:
			op = "snooze"
			if l, ok := takeLease(); ok {
				_, err = eng.Snooze(ctx, l, time.Duration(rng.IntN(30))*time.Second)
			}
		case 9:
			op = "cancel"
			if id, ok := pickJob(); ok {
				_, err = eng.Cancel(ctx, id, jobstate.Call{})
			}
		case 10:
			op = "expire and sweep"
			clock.Advance(time.Duration(rng.IntN(90)) * time.Second)
			_, err = eng.Sweep(ctx)
		case 11:
			op = "redrive"
			if id, ok := pickJob(); ok {
				var j jobstate.Job
				if j, err = eng.Redrive(ctx, id, jobstate.Call{}); err == nil {
					ids = append(ids, j.ID)
				}
			}
		}
		if err != nil {
			storeFault(t, op, err)
		}
		requireHeads(t, store, fmt.Sprintf("step %d (%s)", step, op))
	}
	// Past every not-before and lease: every ready job is claimed, and
	// runs to its end.
	clock.Advance(time.Hour)
	if _, err := eng.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	for _, l := range leases {
		if _, err := eng.Succeed(ctx, l, jobstate.CommitInput{}); err != nil {
			storeFault(t, "succeed", err)
		}
	}
	for _, m := range names {
		for {
			c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: m, Worker: "w"})
			if errors.Is(err, jobstate.ErrNoJob) {
				break
			}
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
				t.Fatalf("succeed: %v", err)
			}
		}
	}
	requireHeads(t, store, "the drain")
	var ready, heads int
	if err := store.Pool().QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{store.Schema(), "jobs"}.Sanitize()+" WHERE kind = 'ready'").Scan(&ready); err != nil {
		t.Fatal(err)
	}
	if err := store.Pool().QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{store.Schema(), "key_heads"}.Sanitize()).Scan(&heads); err != nil {
		t.Fatal(err)
	}
	if ready != 0 || heads != 0 {
		t.Fatalf("after the drain: %d ready jobs, %d rows in key_heads; want none", ready, heads)
	}
}

// TestKeyHeadsConcurrent: six goroutines create jobs of four keys (with
// priorities) on a machine limited to one per key and on one without a
// limit, and claim (one by one and in batches) and finish them, with and
// without group commit. No operation fails (in particular with a
// deadlock, SQLSTATE 40P01), every job runs to its end, and key_heads is
// then empty.
func TestKeyHeadsConcurrent(t *testing.T) {
	for _, group := range []int{0, 4} {
		t.Run(fmt.Sprint("group", group), func(t *testing.T) {
			store := freshStore(t, pgstore.Options{GroupCommit: group})
			clock := jobstate.NewManualClock(epoch)
			eng := keyedEngine(t, store, clock)
			ctx := context.Background()
			const workers, perWorker = 6, 40
			total := int64(workers * perWorker)
			var finished, idle atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), uint64(group)))
					machine := []string{"lim", "free"}[w%2]
					created := 0
					for finished.Load() < total && failed.Load() == nil {
						if created < perWorker {
							n := 1 + rng.IntN(3)
							n = min(n, perWorker-created)
							news := make([]jobstate.NewJob, n)
							for i := range news {
								news[i] = jobstate.NewJob{Machine: machine, ConcurrencyKey: fmt.Sprint("k", rng.IntN(4)), Priority: rng.IntN(2)}
							}
							var err error
							if n == 1 {
								_, err = eng.Create(ctx, news[0])
							} else {
								_, err = eng.CreateMany(ctx, news)
							}
							if err != nil {
								failed.Store(fmt.Errorf("create: %w", err))
								return
							}
							created += n
						}
						var cs []jobstate.Claimed
						var err error
						if rng.IntN(2) == 0 {
							var c jobstate.Claimed
							if c, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"}); err == nil {
								cs = []jobstate.Claimed{c}
							}
						} else {
							cs, err = eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"}, 3)
						}
						if errors.Is(err, jobstate.ErrNoJob) || (err == nil && len(cs) == 0) {
							if idle.Add(1) > 200000 {
								failed.Store(errors.New("jobs left that no claim takes"))
								return
							}
							time.Sleep(100 * time.Microsecond)
							continue
						}
						if err != nil {
							failed.Store(fmt.Errorf("claim: %w", err))
							return
						}
						for _, c := range cs {
							if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
								failed.Store(fmt.Errorf("succeed: %w", err))
								return
							}
							finished.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if err, ok := failed.Load().(error); ok {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
					t.Fatalf("deadlock: %v", err)
				}
				t.Fatal(err)
			}
			if got := finished.Load(); got != total {
				t.Fatalf("%d jobs finished, want %d", got, total)
			}
			requireHeads(t, store, "the run")
			var heads int
			if err := store.Pool().QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{store.Schema(), "key_heads"}.Sanitize()).Scan(&heads); err != nil {
				t.Fatal(err)
			}
			if heads != 0 {
				t.Fatalf("%d rows left in key_heads", heads)
			}
		})
	}
}
