package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// claimWorkers is how many goroutines claim and finish jobs at once in
// the claim benchmarks.
const claimWorkers = 4

// claimBench is an engine on a fresh store with the machine "q" (spec
// workSpec, limited to limit live executions per key when limit > 0),
// holding jobs created with the keys given (one job per entry, in that
// order, which is their claim order).
func claimBench(b *testing.B, limit int, keys []string) *jobstate.Engine {
	b.Helper()
	spec := workSpec()
	spec.Name = "q"
	spec.Policy.MaxPerKey = limit
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := jobstate.New(pgtest.Store(b), jobstate.WithMachines(def))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		jobs := make([]jobstate.NewJob, n)
		for i := range jobs {
			jobs[i] = jobstate.NewJob{Machine: "q", ConcurrencyKey: keys[i]}
		}
		if _, err := eng.CreateMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		keys = keys[n:]
	}
	return eng
}

// drain claims and succeeds jobs of "q" with claimWorkers goroutines until
// a claim finds none or enough reports that enough were done, calling
// done with each finished job's key and the time since start.
func drain(b *testing.B, eng *jobstate.Engine, done func(key string, at time.Duration), enough func() bool) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < claimWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 3 && !enough(); {
				c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "q", Worker: "w"})
				if errors.Is(err, jobstate.ErrNoJob) {
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					failed.Store(err)
					return
				}
				idle = 0
				if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
					failed.Store(err)
					return
				}
				done(c.Job.ConcurrencyKey, time.Since(start))
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
}

// never is an enough of drain that waits for every job.
func never() bool { return false }

// BenchmarkClaimFinish claims and succeeds 10,000 jobs with four
// goroutines (one iteration: -benchtime=1x), reporting jobs/s:
//
//   - unkeyed: a machine without MaxPerKey, jobs without a key (the
//     claim statement every machine without a limit runs);
//   - keys1000: 1,000 keys of 10 jobs each, limited to 1 each, the
//     jobs of a key created one after another;
//   - hotkey: 9,000 jobs of one key then 1,000 jobs of 1,000 other keys,
//     limited to 1 each, drained until the other keys' jobs are done:
//     "other/s" is their throughput, "hot" how many of the hot key's
//     jobs were done meanwhile (one at a time).
//
// drainAll runs b.N times: an engine with limit per key over the jobs
// of keys (one job per entry, "" for none), drained by drain until all
// are done; it reports jobs/s.
func drainAll(b *testing.B, limit int, keys []string) {
	jobs := int64(len(keys))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		eng := claimBench(b, limit, keys)
		b.StartTimer()
		var n atomic.Int64
		drain(b, eng, func(string, time.Duration) { n.Add(1) }, never)
		if n.Load() != jobs {
			b.Fatalf("%d jobs finished", n.Load())
		}
	}
	b.ReportMetric(float64(jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkClaimFinish(b *testing.B) {
	const jobs = 10000
	b.Run("unkeyed", func(b *testing.B) {
		drainAll(b, 0, make([]string, jobs))
	})
	b.Run("keys1000", func(b *testing.B) {
		keys := make([]string, jobs)
		for i := range keys {
			keys[i] = fmt.Sprint("k", i/10)
		}
		drainAll(b, 1, keys)
	})
	b.Run("hotkey", func(b *testing.B) {
		const hot = 9000
		keys := make([]string, jobs)
		for i := range keys {
			keys[i] = "hot"
			if i >= hot {
				keys[i] = fmt.Sprint("k", i)
			}
		}
		var other time.Duration
		var nHot int
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			eng := claimBench(b, 1, keys)
			b.StartTimer()
			var mu sync.Mutex
			nOther := 0
			nHot = 0
			drain(b, eng, func(k string, at time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if k == "hot" {
					nHot++
				} else {
					nOther++
					other = max(other, at)
				}
			}, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return nOther == jobs-hot
			})
			if nOther != jobs-hot {
				b.Fatalf("%d other jobs finished", nOther)
			}
		}
		b.ReportMetric(float64(jobs-hot)/other.Seconds(), "other/s")
		b.ReportMetric(float64(nHot), "hot")
	})
}

// BenchmarkClaimHotBacklog measures one claim of an other key's job on a
// machine limited to 1 per key whose hot key, at its limit, has a
// backlog of ready jobs ahead of it in claim order: the claim's cost as
// the backlog grows.
func BenchmarkClaimHotBacklog(b *testing.B) {
	for _, backlog := range []int{100, 1000, 9000} {
		b.Run(fmt.Sprint("backlog", backlog), func(b *testing.B) {
			keys := make([]string, backlog+1)
			for i := range keys {
				keys[i] = "hot"
			}
			eng := claimBench(b, 1, keys)
			ctx := context.Background()
			if _, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "q", Worker: "w"}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "q", ConcurrencyKey: fmt.Sprint("k", i)}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "q", Worker: "w"})
				if err != nil {
					b.Fatal(err)
				}
				if c.Job.ConcurrencyKey == "hot" {
					b.Fatal("the hot key passed its limit")
				}
			}
		})
	}
}
