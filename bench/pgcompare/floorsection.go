package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// floorFlags defines the floor section's flags.
func floorFlags(c *config) {
	flag.Func("floor-variant", "a variant of jobstate's row in the floor section, name=SQL, the SQL altering a copy of pgstore's schema (a name ending in -noexecs leaves the executions out of the writes); repeatable", func(v string) error {
		c.floorVariants = append(c.floorVariants, v)
		return nil
	})
	flag.IntVar(&c.floorCommitters, "floor-committers", 4, "the floor's commits in flight at once")
	flag.DurationVar(&c.floorCooldown, "floor-cooldown", 2*time.Millisecond, "the least time between two of the floor's claims")
}

// contender is one of the floor section's queues: made ready with jobs,
// then worked.
type contender struct {
	name    string
	prepare func(ctx context.Context, n int) error
	work    func(ctx context.Context, workers, target int) (time.Duration, error)
}

// floorSection runs jobstate, river, the floor queue (floor.go) with and
// without history and with its jobs read first (floorread.go), and the
// floor's statements on jobstate's rows (floorwide.go) and on each
// variant of them, at each worker count, each in turn and their order
// rotating from one run to the next, and reports each one's rate, its
// ratio to river's and the CPU a job cost each side.
func floorSection(ctx context.Context, c config, rep *report, j *js, r *rv, url string, meter cpuMeter, checkpoint func() error) error {
	pool, err := newFloorDB(ctx, url, int32(slices.Max(c.workers)+10))
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer pool.Close()
	var last *floorQueue // the last floor run's queue, for its counts
	floorRun := func(name string, q *floorQueue, prepare func(ctx context.Context, n int) error) contender {
		q.committers, q.cooldown = c.floorCommitters, c.floorCooldown
		return contender{
			name:    name,
			prepare: prepare,
			work: func(ctx context.Context, workers, target int) (time.Duration, error) {
				last = q
				return q.work(ctx, workers, target)
			},
		}
	}
	narrow := func(history bool) func(ctx context.Context, n int) error {
		return func(ctx context.Context, n int) error { return floorCreate(ctx, pool, n, history) }
	}
	all := []contender{
		{
			name:    "jobstate",
			prepare: j.load,
			work: func(ctx context.Context, workers, target int) (time.Duration, error) {
				return j.work(ctx, workers, c.ahead, target)
			},
		},
		{name: "river", prepare: r.load, work: r.work},
		floorRun("floor", &floorQueue{pool: pool, claim: floorClaim, commit: floorCommit}, narrow(false)),
		floorRun("floor+history", &floorQueue{pool: pool, claim: floorClaimHistory, commit: floorCommitHistory}, narrow(true)),
		floorRun("floor+history, read first", &floorQueue{pool: pool, claim: floorClaimWriteHistory, commit: floorCommitHistory, readFirst: true}, narrow(true)),
		floorRun("floor+history, read first, commits unlocked", &floorQueue{pool: pool, claim: floorClaimWriteHistory, commit: floorCommitHistory, readFirst: true, peek: true}, narrow(true)),
	}
	variants, err := parseVariants(c.floorVariants)
	if err != nil {
		return err
	}
	for _, v := range append([]wideVariant{{name: "floor on jobstate's rows", schema: baseSchema}}, variants...) {
		if err := v.setUp(ctx, j.pool); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		claim, commit := v.statements()
		all = append(all, floorRun(v.name, &floorQueue{pool: j.pool, claim: claim, commit: commit},
			func(ctx context.Context, n int) error { return v.create(ctx, j.pool, n) }))
	}

	rep.printf("## The floor: a lease-based queue with exactly-once commits in plain SQL (no-op jobs, %d inserted before each run)\n\n", c.jobs)
	rep.printf("floor: a narrow row with three partial indexes, a claim of one statement (committed without waiting for the flush) and a commit of one statement per group of up to %d jobs (fenced by the attempt, flushed), %d groups in flight, claims at least %v apart; floor+history adds a history row per transition, and read first makes each claim and each commit two round trips, the jobs locked and read before they are written, as an engine deciding in the client must (commits unlocked: the commit's read takes no lock); floor on jobstate's rows runs the same two statements, with history, on a copy of pgstore's tables (jobstate's row, indexes and CHECKs), and each -floor-variant on a copy altered by its SQL. See bench/pgcompare/floor.go and floorwide.go.\n\n", floorGroup, c.floorCommitters, c.floorCooldown)
	head := "| workers | jobs timed |"
	align := "|---:|---:|"
	for _, ct := range all {
		head += " " + ct.name + " jobs/s |"
		align += "---:|"
	}
	for _, ct := range all {
		if ct.name != "river" {
			head += " " + ct.name + "/river |"
			align += "---:|"
		}
	}
	rep.printf("%s\n%s\n", head, align)
	var cpuRows []string
	for _, w := range c.workers {
		target := c.jobs
		if c.work1 > 0 {
			target = min(c.work1, c.jobs)
		}
		rates := make([][]float64, len(all))
		clientCPU := make([][]float64, len(all))
		serverCPU := make([][]float64, len(all))
		for i := 0; i < c.runs; i++ {
			for k := range all {
				x := (k + i) % len(all)
				ct := all[x]
				if err := ct.prepare(ctx, c.jobs); err != nil {
					return fmt.Errorf("%s: %w", ct.name, err)
				}
				if err := checkpoint(); err != nil {
					return err
				}
				before := meter.read()
				d, err := ct.work(ctx, w, target)
				if err != nil {
					return fmt.Errorf("%s: %w", ct.name, err)
				}
				after := meter.read()
				client, server := perJob(before, after, target)
				clientCPU[x], serverCPU[x] = append(clientCPU[x], client), append(serverCPU[x], server)
				rates[x] = append(rates[x], float64(target)/d.Seconds())
				rep.logf(c.verbose, "floor section %s workers=%d run=%d: %d jobs in %v (%.0f/s), client %.0f µs, server %.0f µs per job",
					ct.name, w, i, target, d.Round(time.Millisecond), float64(target)/d.Seconds(), client, server)
				if strings.HasPrefix(ct.name, "floor") {
					rep.logf(c.verbose, "  %d claims, %d commits", last.claims, last.commits)
				}
			}
		}
		row := fmt.Sprintf("| %d | %d |", w, target)
		for x := range all {
			row += " " + spread(rates[x], "%.0f") + " |"
		}
		riverRate := median(rates[1])
		for x, ct := range all {
			if ct.name != "river" {
				row += fmt.Sprintf(" %.2f |", median(rates[x])/riverRate)
			}
		}
		rep.printf("%s\n", row)
		cells := []string{strconv.Itoa(w)}
		for x := range all {
			cells = append(cells, fmt.Sprintf("%.0f + %.0f", median(clientCPU[x]), median(serverCPU[x])))
		}
		cpuRows = append(cpuRows, "| "+strings.Join(cells, " | ")+" |\n")
	}
	rep.printf("\nCPU per job in the same runs, µs, client + server (client: this process; server: the cluster's processes; read from /proc):\n\n")
	head, align = "| workers |", "|---:|"
	for _, ct := range all {
		head += " " + ct.name + " |"
		align += "---:|"
	}
	rep.printf("%s\n%s\n", head, align)
	for _, row := range cpuRows {
		rep.printf("%s", row)
	}
	rep.printf("\n")
	return nil
}
