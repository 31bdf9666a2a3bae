package jobstate_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
)

var benchEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkStep measures the pure core: one transition (QUEUED --claim-->
// RUNNING) of the queue machine.
func BenchmarkStep(b *testing.B) {
	def := m.Queue()
	ctx := context.Background()
	job := jobstate.Job{Machine: "queue", State: m.Queued, Kind: jobstate.KindReady, Version: 2}
	in := jobstate.Input{Event: jobstate.EventClaim, Now: benchEpoch}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		job.State = m.Queued // step the same job again and again
		if _, err := def.Step(ctx, &job, in); err != nil {
			b.Fatal(err)
		}
	}
	if job.State != m.Running {
		b.Fatal(job.State)
	}
}

// BenchmarkLifecycle runs the queue machine's six steps
// CREATED→QUEUED→RUNNING→RETRYING→QUEUED→RUNNING→SUCCEEDED through the
// pure core.
func BenchmarkLifecycle(b *testing.B) {
	def := m.Queue()
	ctx := context.Background()
	events := []jobstate.Event{m.Submit, jobstate.EventClaim, jobstate.EventRetry, jobstate.EventRequeue, jobstate.EventClaim, jobstate.EventSucceed}
	start := jobstate.Job{Machine: "queue", State: m.Created, Kind: jobstate.KindInitial, Version: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		job := start
		for _, ev := range events {
			if _, err := def.Step(ctx, &job, jobstate.Input{Event: ev, Now: benchEpoch}); err != nil {
				b.Fatal(err)
			}
		}
		if job.State != m.Succeeded {
			b.Fatal(job.State)
		}
	}
}

func benchEngine(b *testing.B, spec jobstate.Spec) (*jobstate.Engine, *jobstate.ManualClock, *memstore.Store) {
	b.Helper()
	clock := jobstate.NewManualClock(benchEpoch)
	store := memstore.New()
	eng, err := jobstate.New(store, jobstate.WithMachines(m.Must(spec)), jobstate.WithClock(clock))
	if err != nil {
		b.Fatal(err)
	}
	return eng, clock, store
}

// toggleSpec is SmallSpec with a user event back from ready to new
// ("unsubmit"), so that Fire can run forever on one job.
func toggleSpec() jobstate.Spec {
	spec := m.SmallSpec()
	spec.Name = "toggle"
	spec.Rules = append(spec.Rules, jobstate.Rule{From: m.States("ready"), Event: "unsubmit", To: "new"})
	return spec
}

// BenchmarkFire measures Engine.Fire of a user event through memstore: one
// atomic update with its transition record, each move entering or leaving
// the claim index. It cycles over 100 jobs (hot in the cache: the cost of
// the library) and over 10,000 (mostly cold: the cost a large store adds).
func BenchmarkFire(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			eng, _, _ := benchEngine(b, toggleSpec())
			ctx := context.Background()
			ids := make([]uuid.UUID, n)
			for i := range ids {
				c, err := eng.Create(ctx, jobstate.NewJob{Machine: "toggle"})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = c.Job.ID
			}
			events := [2]jobstate.Event{"submit", "unsubmit"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Each pass over the jobs fires one event on each, alternating.
				if _, err := eng.Fire(ctx, ids[i%n], events[(i/n)&1], jobstate.Call{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreatePayload measures Create with payloads of several sizes:
// the engine copies the caller's payload before keeping it, and this
// shows what the copy costs.
func BenchmarkCreatePayload(b *testing.B) {
	for _, size := range []int{0, 1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			eng, _, _ := benchEngine(b, toggleSpec())
			ctx := context.Background()
			payload := make([]byte, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "toggle", Payload: payload}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimCommitFinish measures one claim + commit + finish cycle
// with n ready jobs waiting in memstore.
func BenchmarkClaimCommitFinish(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("ready=%d", n), func(b *testing.B) {
			eng, _, store := benchEngine(b, m.ProjectedSpec())
			ctx := context.Background()
			create := func() {
				if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "projected"}); err != nil {
					b.Fatal(err)
				}
			}
			const refill = 256
			for i := 0; i < n+refill; i++ {
				create()
			}
			req := jobstate.ClaimRequest{Machine: "projected", Worker: "w"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := eng.Claim(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := eng.Commit(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
					b.Fatal(err)
				}
				if _, err := eng.Finish(ctx, c.Lease); err != nil {
					b.Fatal(err)
				}
				if i%refill == refill-1 { // keep between n and n+refill jobs ready
					b.StopTimer()
					for j := 0; j < refill; j++ {
						create()
					}
					// Finished jobs are pruned, as a long-running process
					// would, so the heap holds the ready jobs, not every job
					// the benchmark ever finished.
					if _, err := store.Prune(ctx, benchEpoch.Add(time.Hour), 0); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkThroughput runs the full lifecycle (create → claim → commit →
// finish) from g goroutines at once.
func BenchmarkThroughput(b *testing.B) {
	for _, g := range []int{2, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			eng, _, _ := benchEngine(b, m.ProjectedSpec())
			ctx := context.Background()
			var worker atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(g)
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((g + procs - 1) / procs)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := jobstate.ClaimRequest{Machine: "projected", Worker: fmt.Sprint("w", worker.Add(1))}
				for pb.Next() {
					if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "projected"}); err != nil {
						b.Fatal(err)
					}
					c, err := eng.Claim(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPerFinishedJob reports the heap held per finished job
// (job, execution, history; no payload) with 1,000,000 jobs in memstore.
func BenchmarkMemoryPerFinishedJob(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		eng, _, store := benchEngine(b, m.ProjectedSpec())
		ctx := context.Background()
		for j := 0; j < n; j++ {
			if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "projected"}); err != nil {
				b.Fatal(err)
			}
			c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "projected", Worker: "w"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/job")
		runtime.KeepAlive(store)
	}
}

// BenchmarkScaling runs create → claim → succeed on 1 and 2 goroutines
// splitting b.N jobs between them: ns/op is the wall time per job, so
// the ratio of the two is the speed-up from a second goroutine (the
// machine of docs/performance.md has two cores).
//
//   - goroutines=g: one engine and store, every job kept.
//   - pruned/goroutines=g: the same, each goroutine deleting the finished
//     jobs every 1,024 jobs it finished (inside the timing), as a
//     long-running process prunes: the heap then holds the jobs in
//     flight, not every job the benchmark ever ran, and the garbage
//     collector's work and the kernel's page faults stop growing with b.N.
//   - separate/goroutines=g: pruned, each goroutine with an engine and a
//     store of its own, sharing nothing but the process: the speed-up a
//     perfectly partitioned store could reach on this machine.
func BenchmarkScaling(b *testing.B) {
	for _, mode := range []scalingMode{{}, {prune: true}, {prune: true, separate: true}} {
		for _, g := range []int{1, 2} {
			b.Run(fmt.Sprintf("%sgoroutines=%d", mode, g), func(b *testing.B) { scaling(b, g, mode) })
		}
	}
}

// scalingMode is a variant of BenchmarkScaling.
type scalingMode struct{ prune, separate bool }

func (m scalingMode) String() string {
	switch {
	case m.separate:
		return "separate/"
	case m.prune:
		return "pruned/"
	}
	return ""
}

// scaling runs BenchmarkScaling's jobs on g goroutines.
func scaling(b *testing.B, g int, mode scalingMode) {
	type shard struct {
		eng   *jobstate.Engine
		store *memstore.Store
	}
	shards := make([]shard, g)
	for w := range shards {
		if w == 0 || mode.separate {
			eng, _, store := benchEngine(b, m.ProjectedSpec())
			shards[w] = shard{eng, store}
		} else {
			shards[w] = shards[0]
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		n := b.N / g
		if w == 0 {
			n += b.N % g
		}
		wg.Add(1)
		go func(worker string, n int, sh shard) {
			defer wg.Done()
			req := jobstate.ClaimRequest{Machine: "projected", Worker: worker}
			for i := 0; i < n; i++ {
				if _, err := sh.eng.Create(ctx, jobstate.NewJob{Machine: "projected"}); err != nil {
					b.Error(err)
					return
				}
				c, err := sh.eng.Claim(ctx, req)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := sh.eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
					b.Error(err)
					return
				}
				if mode.prune && i%1024 == 1023 {
					if _, err := sh.store.Prune(ctx, benchEpoch.Add(time.Hour), 0); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}(fmt.Sprint("w", w), n, shards[w])
	}
	wg.Wait()
}
