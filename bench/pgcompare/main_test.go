package main

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

func TestStats(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	if got := pct(d, 50); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := pct(d, 99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
	if got := spread([]float64{1, 3, 2}, "%.0f"); got != "2 (1–3)" {
		t.Errorf("spread = %q", got)
	}
}

// TestSmoke runs every section of the comparison at a tiny size, on a
// cluster of its own: skipped without the PostgreSQL server binaries
// (a failure with JOBSTATE_REQUIRE_PG=1), and in -short.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	c := config{
		workers: []int{1, 4}, jobs: 200, work1: 100, runs: 1, group: 16, single: 20, batchN: 100, batchPer: 50,
		ready: []int{50}, samples: 20, notifyN: 5, notifyPoll: time.Second, loopBatch: 2, maxCommits: 10, ahead: -1,
		sections: map[string]bool{"work": true, "insert": true, "claim": true, "notify": true, "loop": true, "async": true},
	}
	c.quiet = true
	err := run(context.Background(), c)
	if errors.Is(err, errNoServer) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
