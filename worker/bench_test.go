package worker_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// benchEngine is an engine on memstore with the task machine and n due
// jobs.
func benchEngine(b *testing.B, store jobstate.Store, n int) *jobstate.Engine {
	b.Helper()
	eng, err := jobstate.New(store, jobstate.WithMachines(taskMachine(b, "task")))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "task"}); err != nil {
			b.Fatal(err)
		}
	}
	return eng
}

// BenchmarkDirect is the baseline: the engine called in a loop, claim then
// succeed, one no-op job per iteration, on memstore.
func BenchmarkDirect(b *testing.B) {
	eng := benchEngine(b, memstore.New(), b.N)
	ctx := context.Background()
	req := jobstate.ClaimRequest{Machine: "task", Worker: "bench"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := eng.Claim(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkRun runs b.N no-op jobs through Worker.Run on memstore at a
// concurrency of 1, 10 and 100: claims, handler goroutines, heartbeat
// timers, contexts, commits. One op is one job; compare c1 with
// BenchmarkDirect for the runtime's overhead.
func BenchmarkRun(b *testing.B) {
	for _, c := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) { benchRun(b, c, worker.WithPollInterval(worker.DefaultPollInterval)) })
		b.Run(fmt.Sprintf("c%d/ahead0", c), func(b *testing.B) { benchRun(b, c, worker.WithCommitsAhead(0)) })
	}
}

// benchRun is one BenchmarkRun case: concurrency c, with opt.
func benchRun(b *testing.B, c int, opt worker.Option) {
	{
		{
			eng := benchEngine(b, memstore.New(), b.N)
			var handled atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
				if handled.Add(1) == n {
					close(all)
				}
				return jobstate.CommitInput{}, nil
			})
			w, err := worker.New(eng, worker.Handle("task", h, c), opt)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			errc := runWorker(ctx, w)
			<-all
			cancel()
			if err := <-errc; err != nil { // the last commits are in
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		}
	}
}

// BenchmarkDrain is BenchmarkRun through Drain (no timers of its own).
func BenchmarkDrain(b *testing.B) {
	for _, c := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) {
			eng := benchEngine(b, memstore.New(), b.N)
			w, err := worker.New(eng, worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
				return jobstate.CommitInput{}, nil
			}), c))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			got, err := w.Drain(context.Background(), 0)
			if err != nil || got != b.N {
				b.Fatalf("drained %d of %d: %v", got, b.N, err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkLatency measures, in an idle system, the time from Create to
// the start of the job's handler, one job at a time, on a memstore that
// notifies (memstore itself when it has the capability, else a wrapper
// that signals after each write leaving a job ready). It reports the
// median and the 99th percentile.
func BenchmarkLatency(b *testing.B) {
	var store jobstate.Store = memstore.New()
	if _, ok := store.(jobstate.Notifier); !ok {
		store = newNotifyStore()
	}
	eng := benchEngine(b, store, 0)
	var created atomic.Int64 // UnixNano of the last Create
	started := make(chan time.Duration, 1)
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		started <- time.Duration(time.Now().UnixNano() - created.Load())
		return jobstate.CommitInput{}, nil
	})
	w, err := worker.New(eng, worker.Handle("task", h, 10))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		created.Store(time.Now().UnixNano())
		if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "task"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-started)
	}
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
}
