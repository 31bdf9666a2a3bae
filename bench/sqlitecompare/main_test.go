package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
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
	if got := rotate([]string{"a", "b", "c"}, 4); strings.Join(got, "") != "bca" {
		t.Errorf("rotate = %v", got)
	}
}

// TestSmoke runs every section for every store but pgstore at a tiny
// size (bench/pgcompare's smoke test runs the same calls on pgstore).
func TestSmoke(t *testing.T) {
	stores := []string{"memstore", "sqlitestore", "sqlitestore-normal", "river-sqlite"}
	c := config{
		workers: []int{1, 4}, jobs: 100, runs: 1, single: 20, batchN: 100, batchPer: 50,
		ready: 50, samples: 20, stores: stores,
		sections:  map[string]bool{"work": true, "insert": true, "claim": true},
		requirePG: os.Getenv("JOBSTATE_REQUIRE_PG") == "1",
	}
	var out bytes.Buffer
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		if !strings.Contains(out.String(), "| "+s+" | ") {
			t.Errorf("no row for %s in:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "| sqlitestore | skipped") {
		t.Errorf("sqlitestore skipped:\n%s", out.String())
	}
}
