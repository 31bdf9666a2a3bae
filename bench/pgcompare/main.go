package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

type config struct {
	workers    []int
	jobs       int // inserted before a throughput run
	work1      int // jobs timed in a throughput run (of jobs)
	maxCommits int
	ahead      int
	runs       int
	group      int
	single     int
	batchN     int
	batchPer   int
	ready      []int
	samples    int
	notifyN    int
	sections   map[string]bool
	out        string
	verbose    bool
	notifyPoll time.Duration
	loopBatch  int
	cpuProfile string
	memProfile string
	statements bool
	quiet      bool
	// The floor section's variants of jobstate's row, commits in
	// flight and least time between claims.
	floorVariants   []string
	floorCommitters int
	floorCooldown   time.Duration
}

// errNoServer: no PostgreSQL cluster could be started.
var errNoServer = errors.New("no PostgreSQL cluster")

func main() {
	var c config
	var workers, ready, sections string
	flag.StringVar(&workers, "workers", "1,10,100", "worker counts of the throughput runs")
	flag.IntVar(&c.jobs, "jobs", 50000, "jobs inserted before each throughput run")
	flag.IntVar(&c.work1, "timed", 20000, "jobs timed in a throughput run (of those inserted; the run stops then), 0: all")
	flag.IntVar(&c.ahead, "ahead", -1, "the worker runtime's WithCommitsAhead in the work section (-1: its default)")
	flag.IntVar(&c.maxCommits, "async-commits", 1000, "commits in flight at most in the async section")
	flag.IntVar(&c.runs, "runs", 3, "repetitions of each measurement (median and spread reported)")
	flag.IntVar(&c.group, "group", 128, "pgstore's Options.GroupCommit (0: off)")
	flag.IntVar(&c.single, "single", 2000, "jobs inserted one at a time")
	flag.IntVar(&c.batchN, "batch", 50000, "jobs inserted in batches")
	flag.IntVar(&c.batchPer, "per", 1000, "jobs per batch")
	flag.StringVar(&ready, "ready", "1000,1000000", "ready jobs of the claim latency runs")
	flag.IntVar(&c.samples, "samples", 1000, "claims timed per claim latency run")
	flag.IntVar(&c.notifyN, "notify", 200, "jobs of the create→claim latency run")
	flag.DurationVar(&c.notifyPoll, "notify-poll", time.Second, "poll interval of the workers in the create→claim run (notifications wake them first)")
	flag.StringVar(&sections, "only", "work,insert,claim,notify", "sections to run (work, floor, insert, claim, notify, async, loop)")
	flag.StringVar(&c.out, "o", "", "also write the report (markdown) to this file")
	flag.BoolVar(&c.verbose, "v", false, "print every run")
	flag.BoolVar(&c.statements, "statements", false, "load pg_stat_statements and print the top statements of the jobstate database at the end (changes the server's settings: for analysis only)")
	flag.IntVar(&c.loopBatch, "loop-batch", 1, "jobs per ClaimMany in the loop section")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process")
	flag.StringVar(&c.memProfile, "memprofile", "", "write a heap profile of this process at the end (its alloc_space: what every section allocated)")
	floorFlags(&c)
	flag.Parse()
	var err error
	if c.workers, err = ints(workers); err == nil {
		c.ready, err = ints(ready)
	}
	if err == nil && c.ahead < -1 {
		err = fmt.Errorf("-ahead %d: want -1 (the runtime's default) or a bound of 0 or more", c.ahead)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgcompare:", err)
		os.Exit(2)
	}
	c.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		c.sections[strings.TrimSpace(s)] = true
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgcompare:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), c); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "pgcompare:", err)
		os.Exit(1)
	}
	if c.memProfile != "" {
		if err := writeHeapProfile(c.memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "pgcompare:", err)
			os.Exit(1)
		}
	}
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func newPool(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	return pgtest.NewPool(ctx, url, conns)
}

// report collects the output, printed as it goes.
type report struct {
	w io.Writer
	b strings.Builder
}

func (r *report) printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Fprint(r.w, s)
	r.b.WriteString(s)
}

func (r *report) logf(verbose bool, format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func run(ctx context.Context, c config) error {
	rep := &report{w: os.Stdout}
	if c.quiet {
		rep.w = io.Discard
	}
	maxW := slices.Max(c.workers)
	// One cluster for both libraries: the server's defaults, fsync on,
	// synchronous_commit on (pgtest only sets the port, the socket
	// directory, listen_addresses and max_connections = 200).
	st := pgtest.Settings{Own: true}
	if c.statements {
		st.Params = map[string]string{"shared_preload_libraries": "pg_stat_statements,auto_explain", "track_io_timing": "on",
			"auto_explain.log_min_duration": "3ms", "auto_explain.log_analyze": "on", "auto_explain.log_nested_statements": "on"}
	}
	cl, err := pgtest.Start(ctx, st)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoServer, err)
	}
	defer func() {
		if c.statements {
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(cl.Dir), "server.log")); err == nil {
				_ = os.WriteFile("pgcompare-server.log", b, 0o644)
			}
		}
		_ = cl.Stop()
	}()
	admin, err := newPool(ctx, cl.URL, 2)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, db := range []string{"jobstate_bench", "river_bench", "floor_bench"} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			return err
		}
	}
	dbURL := func(db string) string { return strings.Replace(cl.URL, "/postgres?", "/"+db+"?", 1) }
	conns := int32(maxW + 10)
	j, err := newJS(ctx, dbURL("jobstate_bench"), conns, c.group)
	if err != nil {
		return fmt.Errorf("jobstate: %w", err)
	}
	defer j.close()
	r, err := newRV(ctx, dbURL("river_bench"), conns)
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	defer r.close()

	rep.printf("# jobstate (pgstore) vs river %s on one PostgreSQL cluster\n\n", riverVersion)
	if err := settings(ctx, admin, rep); err != nil {
		return err
	}
	rep.printf("Command: `cd bench/pgcompare && GOWORK=off go run . %s`\n", strings.Join(os.Args[1:], " "))
	rep.printf("pgstore: Options{GroupCommit: %d}, pools of %d connections each; %d runs per figure: median (min–max).\n\n", c.group, conns, c.runs)

	checkpoint := func() error { _, err := admin.Exec(ctx, "CHECKPOINT"); return err }
	meter := newCPUMeter(cl.Dir)

	if c.sections["work"] {
		if c.statements {
			// The statement times reported after this section are this
			// section's.
			if _, err := j.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()"); err != nil {
				return err
			}
		}
		rep.printf("## Jobs worked per second (no-op jobs, %d inserted before each run)\n\n", c.jobs)
		rep.printf("| workers | jobs timed | jobstate jobs/s | river jobs/s | jobstate/river |\n|---:|---:|---:|---:|---:|\n")
		var cpuRows, allocRows []string
		for _, w := range c.workers {
			target := c.jobs
			if c.work1 > 0 {
				target = min(c.work1, c.jobs)
			}
			var jr, rr []float64
			var cpu [4][]float64   // jobstate client, server; river client, server
			var alloc [4][]float64 // jobstate KB, objects; river KB, objects
			for i := 0; i < c.runs; i++ {
				for _, lib := range order(i) {
					var d time.Duration
					if lib == "jobstate" {
						if err := j.load(ctx, c.jobs); err != nil {
							return err
						}
						if err := checkpoint(); err != nil {
							return err
						}
						before := meter.read()
						if d, err = j.work(ctx, w, c.ahead, target); err != nil {
							return fmt.Errorf("jobstate: %w", err)
						}
						after := meter.read()
						client, server := perJob(before, after, target)
						cpu[0], cpu[1] = append(cpu[0], client), append(cpu[1], server)
						kb, objects := allocPerJob(before, after, target)
						alloc[0], alloc[1] = append(alloc[0], kb), append(alloc[1], objects)
						if err := j.countWorked(ctx); err != nil {
							return err
						}
						jr = append(jr, float64(target)/d.Seconds())
					} else {
						if err := r.load(ctx, c.jobs); err != nil {
							return err
						}
						if err := checkpoint(); err != nil {
							return err
						}
						before := meter.read()
						if d, err = r.work(ctx, w, target); err != nil {
							return fmt.Errorf("river: %w", err)
						}
						after := meter.read()
						client, server := perJob(before, after, target)
						cpu[2], cpu[3] = append(cpu[2], client), append(cpu[3], server)
						kb, objects := allocPerJob(before, after, target)
						alloc[2], alloc[3] = append(alloc[2], kb), append(alloc[3], objects)
						if err := r.countWorked(ctx); err != nil {
							return err
						}
						rr = append(rr, float64(target)/d.Seconds())
					}
					rep.logf(c.verbose, "work %s workers=%d run=%d: %d jobs in %v (%.0f/s)", lib, w, i, target, d.Round(time.Millisecond), float64(target)/d.Seconds())
				}
			}
			rep.printf("| %d | %d | %s | %s | %.2f |\n", w, target, spread(jr, "%.0f"), spread(rr, "%.0f"), median(jr)/median(rr))
			cpuRows = append(cpuRows, cpuRow(strconv.Itoa(w), cpu))
			allocRows = append(allocRows, allocRow(w, alloc))
		}
		cpuTable(rep, "CPU per job", "| workers |", "|---:|", cpuRows)
		rep.printf("\nClient heap allocations per job in the same runs (this process; runtime.MemStats):\n\n")
		rep.printf("| workers | jobstate KB | jobstate objects | river KB | river objects |\n|---:|---:|---:|---:|---:|\n")
		for _, row := range allocRows {
			rep.printf("%s", row)
		}
		rep.printf("\n")
		if err := hotUpdates(ctx, rep, j.pool, r.pool); err != nil {
			return err
		}
		if c.statements {
			for _, lib := range []struct {
				name string
				pool *pgxpool.Pool
				jobs int64
			}{{"jobstate", j.pool, j.worked}, {"river", r.pool, r.worked}} {
				if err := statementTimes(ctx, rep, lib.name, lib.pool, lib.jobs); err != nil {
					return err
				}
			}
		}
	}

	if c.sections["floor"] {
		if err := floorSection(ctx, c, rep, j, r, dbURL("floor_bench"), meter, checkpoint); err != nil {
			return err
		}
	}

	if c.sections["async"] {
		rep.printf("## jobstate, handler slots freed before the commit (%d inserted before each run)\n\n", c.jobs)
		rep.printf("One claimer fills the free slots with ClaimMany; a slot is freed when its no-op handler returns and the job's Succeed (exactly-once commit, effect in its savepoint) runs in the background, at most %d at once. This is the worker runtime with its slot accounting changed (not built: see docs/store.md).\n\n", c.maxCommits)
		rep.printf("| workers | jobs timed | jobstate jobs/s |\n|---:|---:|---:|\n")
		for _, w := range c.workers {
			target := c.jobs
			if c.work1 > 0 {
				target = min(c.work1, c.jobs)
			}
			var jr []float64
			for i := 0; i < c.runs; i++ {
				if err := j.load(ctx, c.jobs); err != nil {
					return err
				}
				if err := checkpoint(); err != nil {
					return err
				}
				d, err := j.async(ctx, w, c.maxCommits, target)
				if err != nil {
					return fmt.Errorf("jobstate async: %w", err)
				}
				jr = append(jr, float64(target)/d.Seconds())
				rep.logf(c.verbose, "async workers=%d run=%d: %d jobs in %v", w, i, target, d.Round(time.Millisecond))
			}
			rep.printf("| %d | %d | %s |\n", w, target, spread(jr, "%.0f"))
		}
		rep.printf("\n")
	}

	if c.sections["loop"] {
		rep.printf("## jobstate without the worker runtime: goroutines looping ClaimMany(%d) → Succeed (%d jobs inserted before each run)\n\n", c.loopBatch, c.jobs)
		rep.printf("| goroutines | jobs timed | jobs/s |\n|---:|---:|---:|\n")
		for _, w := range c.workers {
			target := c.jobs
			if c.work1 > 0 {
				target = min(c.work1, c.jobs)
			}
			var jr []float64
			for i := 0; i < c.runs; i++ {
				if err := j.load(ctx, c.jobs); err != nil {
					return err
				}
				if err := checkpoint(); err != nil {
					return err
				}
				stopSample := sampleWaits(ctx, admin, c.verbose)
				w0 := walStats(ctx, admin)
				d, err := j.loop(ctx, w, c.loopBatch, target)
				stopSample()
				w1 := walStats(ctx, admin)
				rep.logf(c.verbose, "  commits %d, WAL syncs %d, WAL MB %.1f", w1[0]-w0[0], w1[1]-w0[1], float64(w1[2]-w0[2])/1e6)
				if err != nil {
					return fmt.Errorf("jobstate loop: %w", err)
				}
				jr = append(jr, float64(target)/d.Seconds())
				rep.logf(c.verbose, "loop workers=%d run=%d: %d jobs in %v", w, i, target, d.Round(time.Millisecond))
			}
			rep.printf("| %d | %d | %s |\n", w, target, spread(jr, "%.0f"))
		}
		rep.printf("\n")
	}

	if c.sections["insert"] {
		if err := insertSection(ctx, c, rep, j, r, meter, checkpoint); err != nil {
			return err
		}
	}

	if c.sections["claim"] {
		rep.printf("## Claim latency (one job per claim, committed; %d claims per run)\n\n", c.samples)
		rep.printf("jobstate: Engine.Claim (lock, snapshot, write, COMMIT). river: JobGetAvailable with MaxToLock 1, the statement its producers fetch with (one UPDATE … SKIP LOCKED, autocommit).\n\n")
		rep.printf("| ready jobs | jobstate p50 | jobstate p99 | river p50 | river p99 | p50 jobstate/river |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range c.ready {
			var jp50, jp99, rp50, rp99 []float64
			for i := 0; i < c.runs; i++ {
				for _, lib := range order(i) {
					var lat []time.Duration
					if lib == "jobstate" {
						if err := j.reset(ctx); err != nil {
							return err
						}
						if err := j.createBatch(ctx, n+c.samples, 10000); err != nil {
							return err
						}
						if err := j.analyze(ctx); err != nil {
							return err
						}
						if err := checkpoint(); err != nil {
							return err
						}
						if lat, err = j.claimLatency(ctx, c.samples); err != nil {
							return err
						}
						jp50, jp99 = append(jp50, ms(pct(lat, 50))), append(jp99, ms(pct(lat, 99)))
					} else {
						if err := r.reset(ctx); err != nil {
							return err
						}
						if err := r.insertFast(ctx, n+c.samples, 10000); err != nil {
							return err
						}
						if err := r.analyze(ctx); err != nil {
							return err
						}
						if err := checkpoint(); err != nil {
							return err
						}
						if lat, err = r.claimLatency(ctx, c.samples); err != nil {
							return err
						}
						rp50, rp99 = append(rp50, ms(pct(lat, 50))), append(rp99, ms(pct(lat, 99)))
					}
					rep.logf(c.verbose, "claim %s ready=%d run=%d: p50 %v p99 %v", lib, n, i, pct(lat, 50), pct(lat, 99))
				}
			}
			rep.printf("| %d | %s ms | %s ms | %s ms | %s ms | %.2f |\n", n, spread(jp50, "%.2f"), spread(jp99, "%.2f"), spread(rp50, "%.2f"), spread(rp99, "%.2f"), median(jp50)/median(rp50))
		}
		rep.printf("\n")
	}

	if c.sections["notify"] {
		rep.printf("## Create → claim latency in an idle system (LISTEN/NOTIFY; %d jobs, 20 ms apart, workers polling every %v)\n\n", c.notifyN, c.notifyPoll)
		rep.printf("From the call that creates the job to its handler starting: jobstate's worker runtime (worker.New, Handle concurrency 10) on pgstore; river's client (MaxWorkers 10, fetch cooldown 2 ms).\n\n")
		rep.printf("| | p50 | p99 | max |\n|---|---:|---:|---:|\n")
		for _, lib := range []string{"jobstate", "river"} {
			var p50, p99, mx []float64
			for i := 0; i < c.runs; i++ {
				var lat []time.Duration
				if lib == "jobstate" {
					if err := j.reset(ctx); err != nil {
						return err
					}
					if lat, err = j.notifyLatency(ctx, c.notifyN, 20*time.Millisecond, c.notifyPoll); err != nil {
						return err
					}
				} else {
					if err := r.reset(ctx); err != nil {
						return err
					}
					if lat, err = r.notifyLatency(ctx, c.notifyN, 20*time.Millisecond, c.notifyPoll); err != nil {
						return err
					}
				}
				p50, p99, mx = append(p50, ms(pct(lat, 50))), append(p99, ms(pct(lat, 99))), append(mx, ms(pct(lat, 100)))
				rep.logf(c.verbose, "notify %s run=%d: p50 %v p99 %v", lib, i, pct(lat, 50), pct(lat, 99))
			}
			rep.printf("| %s | %s ms | %s ms | %s ms |\n", lib, spread(p50, "%.2f"), spread(p99, "%.2f"), spread(mx, "%.1f"))
		}
		rep.printf("\n")
	}
	if c.out != "" {
		return os.WriteFile(c.out, []byte(rep.b.String()), 0o644)
	}
	return nil
}

const riverVersion = "v0.51.1"

// order alternates which library runs first.
func order(i int) []string {
	if i%2 == 0 {
		return []string{"jobstate", "river"}
	}
	return []string{"river", "jobstate"}
}

// settings prints the server's version and the settings that matter.
func settings(ctx context.Context, p *pgxpool.Pool, rep *report) error {
	names := []string{"server_version", "fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "shared_buffers", "wal_buffers", "max_wal_size", "checkpoint_timeout", "commit_delay", "max_connections", "work_mem"}
	rep.printf("PostgreSQL settings (all the server's defaults except max_connections):")
	for _, n := range names {
		var v string
		if err := p.QueryRow(ctx, "SELECT current_setting($1)", n).Scan(&v); err != nil {
			return err
		}
		rep.printf(" %s=%s", n, v)
	}
	var cores string
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cores = strconv.Itoa(strings.Count(string(b), "processor\t:"))
	}
	rep.printf(". Client and server on the same machine (%s cores).\n\n", cores)
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is "median (min–max)".
func spread(v []float64, f string) string {
	if len(v) == 0 {
		return "—"
	}
	if len(v) == 1 {
		return fmt.Sprintf(f, v[0])
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", median(v), slices.Min(v), slices.Max(v))
}

// sampleWaits, when verbose, samples the server's wait events every 50 ms
// until the returned function is called, which prints them.
func sampleWaits(ctx context.Context, p *pgxpool.Pool, verbose bool) func() {
	if !verbose {
		return func() {}
	}
	counts := map[string]int{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			rows, err := p.Query(ctx, `SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '') || ' ' || left(query, 40) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var k string
				if rows.Scan(&k) == nil {
					counts[k]++
				}
			}
			rows.Close()
		}
	}()
	return func() {
		close(stop)
		<-done
		type kv struct {
			k string
			n int
		}
		var list []kv
		for k, n := range counts {
			list = append(list, kv{k, n})
		}
		slices.SortFunc(list, func(a, b kv) int { return b.n - a.n })
		for i, e := range list {
			if i == 12 {
				break
			}
			fmt.Fprintf(os.Stderr, "  %5d %s\n", e.n, strings.ReplaceAll(e.k, "\n", " "))
		}
	}
}

// walStats returns the cluster's commits, WAL syncs and WAL bytes so far.
func walStats(ctx context.Context, p *pgxpool.Pool) [3]int64 {
	var out [3]int64
	_ = p.QueryRow(ctx, `SELECT (SELECT sum(xact_commit)::bigint FROM pg_stat_database), wal_sync, wal_bytes::bigint FROM pg_stat_wal`).Scan(&out[0], &out[1], &out[2])
	return out
}
