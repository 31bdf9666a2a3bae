package memstore

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// fillFinished stores n finished jobs as the engine would leave them: a
// creation (one record), then a success (one record, one DONE execution),
// half of them under a key. Job i is completed after cut when i%every ==
// 0, before it otherwise. It returns the ids of the former.
func fillFinished(b *testing.B, s *Store, n, every int, cut time.Time) []uuid.UUID {
	ctx := context.Background()
	var kept []uuid.UUID
	payload, result := make([]byte, 32), make([]byte, 16)
	recs := make([]jobstate.Transition, 1)
	execs := make([]jobstate.Execution, 1)
	for i := 0; i < n; i++ {
		created := cut.Add(-time.Hour)
		j := readyJob("m", created)
		j.Payload = payload
		if i%2 == 0 {
			j.IdempotencyKey = uuid.NewString()
		}
		if _, _, err := s.Create(ctx, j.Machine, j.IdempotencyKey, func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			return creation(j), nil
		}); err != nil {
			b.Fatal(err)
		}
		done := cut.Add(-time.Minute)
		if i%every == 0 {
			done = cut.Add(time.Minute)
			kept = append(kept, j.ID)
		}
		_, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			j := cur.Job
			j.Version++
			j.State, j.Kind, j.Outcome, j.Result = "done", jobstate.KindTerminal, jobstate.OutcomeSucceeded, result
			j.StartedAt, j.CompletedAt, j.UpdatedAt, j.Attempt = created, done, done, 1
			recs[0] = jobstate.Transition{JobID: j.ID, Version: j.Version, From: "q", Event: jobstate.EventSucceed, To: "done", Actor: "w", At: done}
			execs[0] = jobstate.Execution{ID: uuid.New(), JobID: j.ID, Attempt: 1, Owner: "w", Status: jobstate.ExecDone, ClaimedAt: created, FinishedAt: done}
			return jobstate.Write{Job: j, Transitions: recs, Executions: execs}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return kept
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkPruneMemory stores 1,000,000 finished jobs, keeps one in 1,000
// and prunes the rest, while another goroutine reads and writes a kept
// job in a loop. It reports the heap after filling (peak-MB) and retained
// after pruning (retained-MB, B/live-job), what the kept jobs need in a
// store holding only them (need-B/live-job), the time Prune took
// (prune-ms), the number of its batches, between which it releases the
// store's lock, and their 99th-percentile and longest durations
// (p99-batch-ms, max-batch-ms), the 99.9th-percentile and longest single
// Get or Update of the loop during pruning (p999-pause-ms, max-pause-ms),
// and, for comparison, the longest in 200,000 of them with no pruning
// (idle-max-pause-ms), which is the machine's own noise. Run it once:
//
//	go test -run '^$' -bench PruneMemory -benchtime 1x ./memstore/
func BenchmarkPruneMemory(b *testing.B) {
	const n, every = 1_000_000, 1000
	ctx := context.Background()
	cut := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		// What the kept jobs need: a store holding only them.
		base := heapInUse()
		only := New()
		fillFinished(b, only, n/every, 1, cut)
		need := float64(heapInUse()-base) / float64(n/every)
		runtime.KeepAlive(only)
		only = nil

		base = heapInUse()
		s := New()
		kept := fillFinished(b, s, n, every, cut)
		peak := heapInUse() - base

		// The loop alone first, for the machine's own hiccups.
		var idle []time.Duration
		for len(idle) < 200_000 {
			idle = timeOps(b, s, kept, idle)
		}

		// Prune, timing each batch: the time from one batch's end to the
		// next one's bounds each hold of the store's lock.
		var batches []time.Duration
		var pruned int
		var err error
		var took time.Duration
		busy := loopWhile(b, s, kept, func() {
			t0 := time.Now()
			last := t0
			s.testBetweenBatches = func() {
				now := time.Now()
				batches = append(batches, now.Sub(last))
				last = now
			}
			pruned, err = s.Prune(ctx, cut, 0)
			took = time.Since(t0)
			s.testBetweenBatches = nil
		})
		if err != nil || pruned != n-len(kept) {
			b.Fatalf("pruned %d of %d: %v", pruned, n-len(kept), err)
		}
		p99Batch, maxBatch := quantile(batches, 0.99), quantile(batches, 1)
		p999Pause, maxPause, idleMax := quantile(busy, 0.999), quantile(busy, 1), quantile(idle, 1)
		nBatches := len(batches)
		batches, busy, idle = nil, nil, nil
		retained := heapInUse() - base
		runtime.KeepAlive(s)

		b.ReportMetric(float64(peak)/1e6, "peak-MB")
		b.ReportMetric(float64(retained)/1e6, "retained-MB")
		b.ReportMetric(float64(retained)/float64(len(kept)), "B/live-job")
		b.ReportMetric(need, "need-B/live-job")
		b.ReportMetric(ms(took), "prune-ms")
		b.ReportMetric(float64(nBatches), "batches")
		b.ReportMetric(ms(p99Batch), "p99-batch-ms")
		b.ReportMetric(ms(maxBatch), "max-batch-ms")
		b.ReportMetric(ms(p999Pause), "p999-pause-ms")
		b.ReportMetric(ms(maxPause), "max-pause-ms")
		b.ReportMetric(ms(idleMax), "idle-max-pause-ms")
	}
}

// loopWhile reads and writes kept jobs in a loop while during runs, and
// returns how long each operation took.
func loopWhile(b *testing.B, s *Store, kept []uuid.UUID, during func()) []time.Duration {
	stop := make(chan struct{})
	var ops []time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				ops = timeOps(b, s, kept, ops)
			}
		}
	}()
	during()
	close(stop)
	wg.Wait()
	return ops
}

// timeOps gets one kept job and updates another, appending how long each
// took to ds.
func timeOps(b *testing.B, s *Store, kept []uuid.UUID, ds []time.Duration) []time.Duration {
	ctx := context.Background()
	t0 := time.Now()
	if _, err := s.Get(ctx, kept[0]); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	_, err := s.Update(ctx, kept[1], func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		j := cur.Job
		j.Version++
		return jobstate.Write{Job: j}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return append(ds, t1.Sub(t0), time.Since(t1))
}

// quantile returns the q-quantile of ds (q = 1: the largest).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
