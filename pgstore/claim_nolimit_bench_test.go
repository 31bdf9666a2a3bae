package pgstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClaimFinishKeysNoLimit claims and succeeds 10,000 jobs with a
// concurrency key on a machine without MaxPerKey, with four goroutines
// (one iteration: -benchtime=1x), reporting jobs/s: "onekey", every job
// of one key; "keys10", ten keys of 1,000 jobs each, interleaved.
func BenchmarkClaimFinishKeysNoLimit(b *testing.B) {
	const jobs = 10000
	for _, nkeys := range []int{1, 10} {
		name := "onekey"
		if nkeys > 1 {
			name = fmt.Sprint("keys", nkeys)
		}
		b.Run(name, func(b *testing.B) {
			keys := make([]string, jobs)
			for i := range keys {
				keys[i] = fmt.Sprint("k", i%nkeys)
			}
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				eng := claimBench(b, 0, keys)
				b.StartTimer()
				var n atomic.Int64
				drain(b, eng, func(string, time.Duration) { n.Add(1) }, never)
				if n.Load() != jobs {
					b.Fatalf("%d jobs finished", n.Load())
				}
			}
			b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
