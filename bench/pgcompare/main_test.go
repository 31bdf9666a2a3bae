package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
		floorCommitters: 4, floorCooldown: 2 * time.Millisecond,
		sections: map[string]bool{"work": true, "floor": true, "insert": true, "claim": true, "notify": true, "loop": true, "async": true},
	}
	var typed []byte
	for _, f := range []string{"hotrow.sql", "typed-commit.sql"} {
		b, err := os.ReadFile(filepath.Join("variants", f))
		if err != nil {
			t.Fatal(err)
		}
		typed = append(append(typed, b...), '\n')
	}
	c.floorVariants = []string{"lean-noexecs=" + string(typed)}
	c.quiet = true
	c.out = filepath.Join(t.TempDir(), "report.md")
	err := run(context.Background(), c)
	if errors.Is(err, errNoServer) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	// The floor's table has a row per worker count with a rate for each
	// contender, the variant's among them.
	if !strings.Contains(report, "floor on jobstate's rows, lean-noexecs jobs/s") {
		t.Errorf("no column of the floor's variant in the report:\n%s", report)
	}
	for _, w := range []string{"| 1 | 100 |", "| 4 | 100 |"} {
		found := false
		for _, l := range strings.Split(report, "\n") {
			found = found || strings.HasPrefix(l, w) && strings.Count(l, "|") == 2+8+7+1
		}
		if !found {
			t.Errorf("no floor row %q with eight rates and seven ratios:\n%s", w, report)
		}
	}
	// Every way of inserting has its row of CPU per job, read on both
	// sides.
	for _, row := range []string{"| one at a time | ", "| COPY, batches of 50 | ", "| batches of 50, each job under a key of its own | "} {
		line := ""
		for _, l := range strings.Split(report, "\n") {
			if strings.HasPrefix(l, row) && strings.Count(l, "|") == 7 {
				line = l
			}
		}
		if line == "" || strings.Contains(line, "n/a") {
			t.Errorf("no CPU row %q with both sides read in the report:\n%s", row, report)
		}
	}
}

func TestParseStat(t *testing.T) {
	// Fields 14 to 17 are utime, stime, cutime and cstime; field 4 the
	// parent's pid. The command name holds a space and a parenthesis.
	line := "4242 (post (gres) x) S 77 4242 4242 0 -1 4194304 100 0 0 0 11 22 33 44 20 0 1 0 500 0 0"
	own, children, ppid, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if own != 33 || children != 77 || ppid != 77 {
		t.Errorf("own %d, children %d, ppid %d; want 33, 77, 77", own, children, ppid)
	}
	for _, bad := range []string{"", "4242 no name", "4242 (x) S 1 2 3"} {
		if _, _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

// TestCPUMeterReadsTheClient checks that CPU spent by this process shows
// in the client's reading, and that a meter without a cluster reads no
// server.
func TestCPUMeterReadsTheClient(t *testing.T) {
	m := newCPUMeter(t.TempDir())
	a := m.read()
	if a.server >= 0 {
		t.Fatalf("server read without a cluster: %v", a.server)
	}
	// Spin until the reading shows 10 ms of CPU more: on a busy machine
	// that takes longer, but it must come.
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for {
		for range 1_000_000 {
			x++
		}
		client, server := perJob(a, m.read(), 1)
		if server >= 0 {
			t.Fatalf("server CPU %.0f µs without a cluster", server)
		}
		if client >= 10_000 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client CPU %.0f µs after 30 s of spinning (%d turns)", client, x)
		}
	}
}

// TestCPUMeterReadsTheServer starts a cluster and checks that the meter
// finds its postmaster and reads the CPU of a query's backend: skipped
// like TestSmoke.
func TestCPUMeterReadsTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	ctx := context.Background()
	cl, err := pgtest.Start(ctx, pgtest.Settings{Own: true})
	if err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = cl.Stop() })
	m := newCPUMeter(cl.Dir)
	if m.postmaster == 0 {
		t.Fatalf("no postmaster found in %s", cl.Dir)
	}
	p, err := newPool(ctx, cl.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a := m.read()
	if _, err := p.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	_, server := perJob(a, m.read(), 1)
	if server <= 0 {
		t.Errorf("server CPU %.0f µs after counting three million rows", server)
	}
}

// TestMeterReadsAllocations: the meter counts the bytes and objects the
// process allocates between two readings.
func TestMeterReadsAllocations(t *testing.T) {
	m := newCPUMeter(t.TempDir())
	size := 1023 + len(os.Args) // not a constant: the slices go to the heap
	a := m.read()
	keep := make([][]byte, 1000)
	for i := range keep {
		keep[i] = make([]byte, size)
	}
	kb, objects := allocPerJob(a, m.read(), 1)
	runtime.KeepAlive(keep)
	if kb < 1000 || objects < 1000 {
		t.Errorf("%.0f KB and %.0f objects read after allocating 1,000 slices of %d bytes", kb, objects, size)
	}
}
