package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is what the flags say.
type config struct {
	workers   []int
	jobs      int
	runs      int
	single    int
	batchN    int
	batchPer  int
	samples   int
	ready     int
	stores    []string
	sections  map[string]bool
	quiet     bool
	requirePG bool
}

func main() {
	var c config
	var workers, stores, sections string
	flag.StringVar(&workers, "workers", "1,10", "handler counts of the throughput runs")
	flag.IntVar(&c.jobs, "jobs", 5000, "jobs worked in each throughput run")
	flag.IntVar(&c.runs, "runs", 3, "repetitions of each measurement (median and spread reported)")
	flag.IntVar(&c.single, "single", 500, "jobs inserted one at a time")
	flag.IntVar(&c.batchN, "batch", 10000, "jobs inserted in batches")
	flag.IntVar(&c.batchPer, "per", 1000, "jobs per batch")
	flag.IntVar(&c.ready, "ready", 10000, "ready jobs of the claim latency runs")
	flag.IntVar(&c.samples, "samples", 500, "claims timed per claim latency run")
	flag.StringVar(&stores, "stores", "memstore,sqlitestore,sqlitestore-normal,pgstore,river-sqlite", "stores to compare")
	flag.StringVar(&sections, "only", "work,insert,claim", "sections to run")
	flag.Parse()
	var err error
	if c.workers, err = ints(workers); err != nil {
		fmt.Fprintln(os.Stderr, "sqlitecompare: -workers:", err)
		os.Exit(2)
	}
	c.stores = strings.Split(stores, ",")
	c.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		c.sections[s] = true
	}
	c.requirePG = os.Getenv("JOBSTATE_REQUIRE_PG") == "1"
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sqlitecompare:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run measures every section for every store and prints the report.
func run(ctx context.Context, c config, out io.Writer) error {
	dir, err := os.MkdirTemp("", "sqlitecompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := &environment{dir: dir}
	defer env.close()
	fmt.Fprintf(out, "# sqlitecompare\n\n%s, %d CPUs, %s; load at start: %s\n\n", runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339), loadAvg())
	if c.sections["work"] {
		fmt.Fprintf(out, "## Worker runtime, no-op jobs (jobs/s, median of %d runs of %d jobs, spread)\n\n", c.runs, c.jobs)
		fmt.Fprintf(out, "| store |")
		for _, w := range c.workers {
			fmt.Fprintf(out, " %d handler(s) |", w)
		}
		fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(c.workers)))
		rates := make(map[string][][]float64)
		for r := 0; r < c.runs; r++ {
			order := rotate(c.stores, r)
			for _, w := range c.workers {
				for _, name := range order {
					b, err := env.open(ctx, name, c.requirePG)
					if errors.Is(err, errSkip) {
						continue
					}
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					if err := b.insertBatch(ctx, c.jobs, 1000); err != nil {
						b.close()
						return fmt.Errorf("%s: insert: %w", name, err)
					}
					d, err := b.work(ctx, w, c.jobs)
					b.close()
					if err != nil {
						return fmt.Errorf("%s: work with %d: %w", name, w, err)
					}
					if rates[name] == nil {
						rates[name] = make([][]float64, len(c.workers))
					}
					i := slices.Index(c.workers, w)
					rates[name][i] = append(rates[name][i], float64(c.jobs)/d.Seconds())
				}
			}
		}
		for _, name := range c.stores {
			if rates[name] == nil {
				fmt.Fprintf(out, "| %s | %s\n", name, strings.Repeat("skipped |", len(c.workers)))
				continue
			}
			fmt.Fprintf(out, "| %s |", name)
			for i := range c.workers {
				fmt.Fprintf(out, " %s |", spread(rates[name][i], "%.0f"))
			}
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out)
	}
	if c.sections["insert"] {
		fmt.Fprintf(out, "## Insert (one at a time: p50 / p99 latency of %d; batches of %d: jobs/s over %d, median of %d runs)\n\n", c.single, c.batchPer, c.batchN, c.runs)
		fmt.Fprintf(out, "| store | one: p50 | one: p99 | batches: jobs/s |\n|---|---|---|---|\n")
		for _, name := range c.stores {
			var p50, p99, batch []float64
			skipped := false
			for r := 0; r < c.runs && !skipped; r++ {
				b, err := env.open(ctx, name, c.requirePG)
				if errors.Is(err, errSkip) {
					skipped = true
					break
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				lat, err := b.insertLatency(ctx, c.single)
				if err == nil {
					p50, p99 = append(p50, us(pct(lat, 50))), append(p99, us(pct(lat, 99)))
					t0 := time.Now()
					err = b.insertBatch(ctx, c.batchN, c.batchPer)
					batch = append(batch, float64(c.batchN)/time.Since(t0).Seconds())
				}
				b.close()
				if err != nil {
					return fmt.Errorf("%s: insert: %w", name, err)
				}
			}
			if skipped {
				fmt.Fprintf(out, "| %s | skipped | skipped | skipped |\n", name)
				continue
			}
			fmt.Fprintf(out, "| %s | %s µs | %s µs | %s |\n", name, spread(p50, "%.0f"), spread(p99, "%.0f"), spread(batch, "%.0f"))
		}
		fmt.Fprintln(out)
	}
	if c.sections["claim"] {
		fmt.Fprintf(out, "## Claim (p50 / p99 latency of %d claims, one at a time, with %d jobs ready; median of %d runs)\n\n", c.samples, c.ready, c.runs)
		fmt.Fprintf(out, "| store | p50 | p99 |\n|---|---|---|\n")
		for _, name := range c.stores {
			var p50, p99 []float64
			skipped := false
			for r := 0; r < c.runs && !skipped; r++ {
				b, err := env.open(ctx, name, c.requirePG)
				if errors.Is(err, errSkip) {
					skipped = true
					break
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				err = b.insertBatch(ctx, c.ready, 1000)
				var lat []time.Duration
				if err == nil {
					lat, err = b.claimLatency(ctx, c.samples)
				}
				b.close()
				if errors.Is(err, errUnsupported) {
					skipped = true
					break
				}
				if err != nil {
					return fmt.Errorf("%s: claim: %w", name, err)
				}
				p50, p99 = append(p50, us(pct(lat, 50))), append(p99, us(pct(lat, 99)))
			}
			if skipped {
				fmt.Fprintf(out, "| %s | n/a | n/a |\n", name)
				continue
			}
			fmt.Fprintf(out, "| %s | %s µs | %s µs |\n", name, spread(p50, "%.0f"), spread(p99, "%.0f"))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "Load at end: %s\n", loadAvg())
	return nil
}

// rotate returns names starting at the r-th, so that each run puts
// another store first.
func rotate(names []string, r int) []string {
	k := r % len(names)
	return append(append([]string(nil), names[k:]...), names[:k]...)
}

// loadAvg returns the system's load averages, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pct returns the p-th percentile of d (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// median returns the median of v.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread formats the median of v with its range.
func spread(v []float64, f string) string {
	if len(v) == 1 {
		return fmt.Sprintf(f, v[0])
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", median(v), slices.Min(v), slices.Max(v))
}
