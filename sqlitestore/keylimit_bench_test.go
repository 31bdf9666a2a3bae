package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// keyBenchJobs is the number of jobs each run of BenchmarkKeyLimits
// claims and finishes.
const keyBenchJobs = 10_000

// BenchmarkKeyLimits claims and finishes keyBenchJobs jobs on a store in
// a new file (synchronous NORMAL, so that the figures are the claim's
// work rather than the disk's flushes): a worker claims ten at a time
// (ClaimMany) and finishes each (Succeed), until none is left. Each case
// runs with a limit of one live execution per key and without a limit,
// the same jobs in the same order:
//
//   - keys=1000: 1,000 keys of ten jobs each, created a key at a time, so
//     that the first jobs in claim order are one key's: under the limit a
//     batch takes one job of each of ten keys, passing over the others.
//   - hotkey: half the jobs on one key, created first, then the other
//     half on 1,000 other keys. Under the limit a batch takes one job of
//     the hot key and nine others, so the other keys' jobs do not wait
//     behind it; hot_done_at_others_end reports how many of the hot key's
//     jobs were done when the last of the others was (all of them
//     without the limit, one per batch with it).
//
// Reported: ns/job, the time per job claimed and finished.
func BenchmarkKeyLimits(b *testing.B) {
	keyMajor := func(i int) string { return fmt.Sprint("k", i/10) }
	hot := func(i int) string {
		if i < keyBenchJobs/2 {
			return "hot"
		}
		return fmt.Sprint("k", i%1000)
	}
	for _, c := range []struct {
		name  string
		key   func(i int) string
		limit int
	}{
		{"keys=1000/limit=1", keyMajor, 1},
		{"keys=1000/nolimit", keyMajor, 0},
		{"hotkey/limit=1", hot, 1},
		{"hotkey/nolimit", hot, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchKeyRun(b, c.key, c.limit)
			}
		})
	}
}

// benchKeyRun creates keyBenchJobs jobs with the keys key gives, then
// claims and finishes them all with the timer running.
func benchKeyRun(b *testing.B, key func(i int) string, limit int) {
	b.StopTimer()
	ctx := context.Background()
	s := open(b, sqlitestore.Options{Synchronous: "NORMAL"})
	spec := queueSpec()
	spec.Policy.MaxPerKey = limit
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := jobstate.New(s, jobstate.WithMachines(def),
		jobstate.WithClock(jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 1000
	for i := 0; i < keyBenchJobs; i += chunk {
		jobs := make([]jobstate.NewJob, chunk)
		for j := range jobs {
			jobs[j] = jobstate.NewJob{Machine: "queue", ConcurrencyKey: key(i + j)}
		}
		if _, err := eng.CreateMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	req := jobstate.ClaimRequest{Machine: "queue", Worker: "w"}
	done, hotDone, others, hotAtOthersEnd := 0, 0, 0, -1
	b.StartTimer()
	start := time.Now()
	for {
		got, err := eng.ClaimMany(ctx, req, 10)
		if errors.Is(err, jobstate.ErrNoJob) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range got {
			if _, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{}); err != nil {
				b.Fatal(err)
			}
			done++
			if c.Job.ConcurrencyKey == "hot" {
				hotDone++
			} else {
				others++
			}
		}
		if others == keyBenchJobs/2 && hotAtOthersEnd < 0 {
			hotAtOthersEnd = hotDone
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if done != keyBenchJobs {
		b.Fatalf("%d jobs done, want %d", done, keyBenchJobs)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(done), "ns/job")
	if hotDone > 0 {
		b.ReportMetric(float64(hotAtOthersEnd), "hot_done_at_others_end")
	}
	b.StartTimer()
}
