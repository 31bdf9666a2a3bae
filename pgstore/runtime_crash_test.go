package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// Settings of TestRuntimeCrashSignals, given to its worker processes.
const (
	rtWorkers   = 4                      // worker processes; the last one's slow handlers ignore their context
	rtGrace     = 300 * time.Millisecond // the runtime's grace period
	rtLease     = 10 * time.Second       // the lease TTL the workers claim with: see TestRuntimeCrashSignals
	rtSlow      = 2 * time.Second        // how long a slow job works on its first attempt
	rtSlowEvery = 25                     // one job in rtSlowEvery is slow
	rtExitSlack = 5 * time.Second        // beyond the grace period, for a stopped worker to exit
	rtBound     = 50 * time.Second       // the whole run per 2,000 jobs; a lost job fails the test here
)

// The ends of an execution, by its status and its error.
const (
	endLive      = "live"
	endCommitted = "committed"  // DONE or COMMITTED
	endGivenBack = "given back" // Snooze(0) by the shutdown: "snoozed for 0s"
	endRecovered = "recovered"  // RecoverWorker at a restart: "worker NAME restarted"
	endLapsed    = "lapsed"     // the lease expired and a sweep ended it: "lease expired"
)

// execEnd classifies an execution's end.
func execEnd(status, reason string) string {
	switch {
	case status == "LEASED" || status == "IN_PROGRESS":
		return endLive
	case status == "COMMITTED" || status == "DONE":
		return endCommitted
	case reason == "snoozed for 0s":
		return endGivenBack
	case strings.HasPrefix(reason, "worker ") && strings.HasSuffix(reason, " restarted"):
		return endRecovered
	case reason == "lease expired":
		return endLapsed
	}
	return status + ": " + reason
}

// rtSignal is one signal sent to a worker process: what it was, to whom,
// and the executions the worker held just before.
type rtSignal struct {
	what   string // "SIGKILL", "SIGKILL, renamed", "SIGTERM", "SIGTERM ×2"
	worker string
	held   []string // execution ids
	// allowed are the ends the held executions may have.
	allowed []string
}

// rtProc is one running worker process.
type rtProc struct {
	cmd    *exec.Cmd
	name   string
	exited chan error
	// started is when the process was started: executions of its name
	// claimed before are an earlier process's (see rtQueries.own).
	started time.Time
}

// TestRuntimeCrashSignals runs the worker runtime (package worker, in
// pgstore/internal/runtimeworker) in four processes over 2,000 jobs
// (JOBSTATE_CRASH_JOBS), one in 25 of them slow on its first attempt,
// with a lease TTL of 10 s, and while they work sends one signal at a
// time, at random moments. The lease outlasts any delay of the heartbeats
// on a loaded machine (one every third of it), so that no execution held
// at a SIGTERM lapses before the shutdown gives it back: what is checked
// there is the signal handling, not the lease's timing. The executions of
// a worker killed and restarted under a new name still lapse, once the
// lease is over, within the run. The signals:
//
//   - SIGKILL to a worker holding leases: the process is restarted under
//     the same name, and its executions end by Run's RecoverWorker at
//     start (or by a sweep, if their lease lapsed first); one kill in two
//     hits the worker holding the most leases and restarts it under a new
//     name, so that its executions end only by lapsing, through the other
//     workers' sweeps;
//   - SIGTERM to a worker whose handlers honour their context: it exits 0
//     within the grace period (and a few seconds' slack), leaving no live
//     execution in its name, every execution it held committed or given
//     back by the shutdown (Snooze(0)), none lapsed or recovered;
//   - SIGTERM twice to the worker whose slow handlers ignore their
//     context: after the first, once the grace period is over, its leases
//     are given back while the process still waits for those handlers;
//     the second (a hard stop) makes it exit 0 at once.
//
// Each stopped process is started again. Then every job is done, with
// one committed execution and one effect row (the effect inserts it in
// the commit's transaction), every history replays, every execution ended
// by a commit, a give-back, a recovery or a lapse (no handler error was
// recorded, so nothing stopped by a shutdown failed its job), and each
// job's retry count is its recovered and lapsed executions: a lease given
// back cost no retry.
func TestRuntimeCrashSignals(t *testing.T) {
	n := crashJobs(t)
	cluster, pool := pgtest.Shared(t)
	ctx := context.Background()
	dir := t.TempDir()
	slow := func(i int) []byte {
		if i%rtSlowEvery == rtSlowEvery/2 {
			return []byte("slow") // runtimeworker's slowPayload
		}
		return nil
	}
	c := newCrashSchema(t, pool, "runtimeworker", "rtcrash", crashmachine.Spec(), n, slow)
	store, schema := c.store, c.schema

	stubborn := rtWorkers - 1
	names := make([]string, rtWorkers)
	generation := make([]int, rtWorkers)
	for i := range names {
		names[i] = fmt.Sprintf("rt%d", i)
	}
	procs := make([]*rtProc, rtWorkers)
	start := func(i int) {
		logf, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("worker%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		cmd := exec.Command(c.bin)
		cmd.Env = append(os.Environ(), "CRASH_URL="+cluster.URL, "CRASH_SCHEMA="+schema, "CRASH_TABLE="+c.table,
			"CRASH_WORKER="+names[i], "CRASH_GRACE="+rtGrace.String(), "CRASH_LEASE="+rtLease.String(),
			"CRASH_SLOW="+rtSlow.String(), "CRASH_LOG=1")
		if i%2 == 1 {
			cmd.Env = append(cmd.Env, "CRASH_GROUP=1") // half the workers commit through group commit
		}
		if i == stubborn {
			cmd.Env = append(cmd.Env, "CRASH_STUBBORN=1")
		}
		cmd.Stderr = logf
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		started := time.Now()
		require.NoError(t, cmd.Start())
		// Signals sent before the process handles them would kill it.
		ready := make(chan error, 1)
		go func() {
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err == nil && line != "ready\n" {
				err = fmt.Errorf("unexpected output %q", line)
			}
			ready <- err
		}()
		select {
		case err := <-ready:
			require.NoError(t, err, "worker %s did not start", names[i])
		case <-time.After(rtExitSlack):
			t.Fatalf("worker %s did not start within %v", names[i], rtExitSlack)
		}
		p := &rtProc{cmd: cmd, name: names[i], exited: make(chan error, 1), started: started}
		procs[i] = p
		go func() {
			err := cmd.Wait()
			_ = logf.Close()
			p.exited <- err
		}()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range procs {
				logTail(t, filepath.Join(dir, fmt.Sprintf("worker%d.log", i)), 40)
			}
		}
	})
	for i := range procs {
		start(i)
	}
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
		}
	}()

	q := rtQueries{t: t, ctx: ctx, pool: pool, schema: schema}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	var signals []rtSignal
	kills, renamed, terms, hardStops, stuckStops := 0, 0, 0, 0, 0
	var slowestExit, slowestHard time.Duration // after a SIGTERM; after the second
	t0 := time.Now()
	bound := rtBound * time.Duration(max(1, n/2000))
	deadline := t0.Add(bound)

	// waitExit waits for p to exit, at most d, and returns its exit error.
	waitExit := func(p *rtProc, d time.Duration) error {
		select {
		case err := <-p.exited:
			p.exited <- err // for the deferred kill
			return err
		case <-time.After(d):
			t.Fatalf("worker %s did not exit within %v", p.name, d)
			return nil
		}
	}
	exitedNow := func(p *rtProc) bool {
		select {
		case err := <-p.exited:
			p.exited <- err
			return true
		default:
			return false
		}
	}
	// alive fails the test if a worker exited unsignalled.
	alive := func() {
		for _, p := range procs {
			select {
			case err := <-p.exited:
				p.exited <- err
				t.Fatalf("worker %s exited by itself: %v", p.name, err)
			default:
			}
		}
	}
	kill := func(i int, rename bool) {
		p := procs[i]
		s := rtSignal{what: "SIGKILL", worker: p.name, held: q.live(p.name),
			allowed: []string{endCommitted, endRecovered, endLapsed}}
		at := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
		p.exited <- nil
		if rename {
			// Nobody will recover the old name: its leases lapse and the
			// other workers' sweeps end them.
			generation[i]++
			names[i] = fmt.Sprintf("rt%d-%d", i, generation[i])
			s.what, s.allowed = "SIGKILL, renamed", []string{endCommitted, endLapsed}
			renamed++
		}
		signals = append(signals, s)
		kills++
		start(i)
		if rename {
			return
		}
		// Restarted under its name, the worker ends what it held at start:
		// wait for it, so that a later signal to it is about its own work.
		for q.anyLive(s.held) {
			require.Less(t, time.Since(at), rtExitSlack, "the executions of worker %s, killed and restarted under its name, are still live", names[i])
			time.Sleep(20 * time.Millisecond) // polling the database
		}
	}
	// term sends SIGTERM to a worker whose handlers honour their context:
	// it must exit 0 within the grace period, its leases given back.
	term := func(i int) {
		p := procs[i]
		s := rtSignal{what: "SIGTERM", worker: p.name, held: q.own(p),
			allowed: []string{endCommitted, endGivenBack}}
		at := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, waitExit(p, rtGrace+rtExitSlack), "worker %s stopped by SIGTERM exits 0", p.name)
		slowestExit = max(slowestExit, time.Since(at))
		require.Empty(t, q.own(p), "worker %s exited after SIGTERM holding leases", p.name)
		signals = append(signals, s)
		terms++
		start(i)
	}
	// hardStop sends SIGTERM to the worker whose slow handlers ignore
	// their context, and a second SIGTERM once its leases are given back.
	hardStop := func(i int) {
		p := procs[i]
		stuck := q.stuck(p.name)
		s := rtSignal{what: "SIGTERM ×2", worker: p.name, held: q.own(p),
			allowed: []string{endCommitted, endGivenBack}}
		at := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		for len(q.own(p)) > 0 && !exitedNow(p) {
			require.Less(t, time.Since(at), rtGrace+rtExitSlack, "worker %s did not give its leases back after SIGTERM", p.name)
			time.Sleep(20 * time.Millisecond) // polling the database
		}
		if stuck {
			require.False(t, exitedNow(p), "worker %s exited with a handler that ignores its context still running", p.name)
			require.GreaterOrEqual(t, time.Since(at), rtGrace, "worker %s gave leases back before the grace period ended", p.name)
			stuckStops++
		}
		if exitedNow(p) {
			require.NoError(t, waitExit(p, rtExitSlack), "worker %s stopped by SIGTERM exits 0", p.name)
			slowestExit = max(slowestExit, time.Since(at))
		} else {
			second := time.Now()
			// The hard stop. The worker may have exited of itself since
			// exitedNow looked, once the grace period ended: its exit
			// status is checked all the same.
			if err := p.cmd.Process.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
				require.NoError(t, err)
			}
			require.NoError(t, waitExit(p, rtExitSlack), "worker %s stopped by two SIGTERMs exits 0", p.name)
			slowestHard = max(slowestHard, time.Since(second))
		}
		require.Empty(t, q.own(p), "worker %s exited after two SIGTERMs holding leases", p.name)
		signals = append(signals, s)
		hardStops++
		start(i)
	}

	// The first hard stop waits until the stubborn worker holds a slow
	// job's first attempt, whose handler will ignore its context.
	for !q.stuck(procs[stubborn].name) {
		require.True(t, time.Now().Before(deadline), "worker %s never held a slow job", procs[stubborn].name)
		time.Sleep(20 * time.Millisecond) // polling the database
	}
	alive()
	hardStop(stubborn)
	for round := 0; ; round++ {
		counts, err := store.Count(ctx, crashmachine.Name)
		require.NoError(t, err)
		if counts["done"] == n {
			break
		}
		require.True(t, time.Now().Before(deadline), "jobs are not finishing after %v: %v", bound, counts)
		time.Sleep(time.Duration(100+rnd.IntN(200)) * time.Millisecond) // let them work
		alive()
		switch round % 4 {
		case 0: // a worker holding leases, if any
			var holding []int
			for i, k := range q.held(names) {
				if k > 0 {
					holding = append(holding, i)
				}
			}
			i := rnd.IntN(rtWorkers)
			if len(holding) > 0 {
				i = holding[rnd.IntN(len(holding))]
			}
			kill(i, false)
		case 1:
			term(rnd.IntN(stubborn))
		case 2:
			hardStop(stubborn)
		case 3: // the worker holding the most leases
			held := q.held(names)
			busiest := 0
			for i, k := range held {
				if k > held[busiest] {
					busiest = i
				}
			}
			kill(busiest, true)
		}
	}
	elapsed := time.Since(t0)

	// The executions held at each signal ended as that signal allows.
	held := 0
	for _, s := range signals {
		held += len(s.held)
		for id, end := range q.ends(s.held) {
			assert.Contains(t, s.allowed, end, "execution %s held by %s at %s", id, s.worker, s.what)
		}
	}
	rows, distinct := c.receipts(t, pool)
	ends := q.allEnds()
	t.Logf("%d jobs done by %d runtime workers in %v: %d SIGKILLs (%d restarted under a new name), %d SIGTERMs, %d double SIGTERMs (%d with a handler ignoring its context); %d executions held at the signals; executions %v; slowest exit after a SIGTERM %v (grace %v), after a second SIGTERM %v; %d effect rows, %d duplicates, %d lost",
		n, rtWorkers, elapsed.Round(time.Millisecond), kills, renamed, terms, hardStops, stuckStops, held, ends,
		slowestExit.Round(time.Millisecond), rtGrace, slowestHard.Round(time.Millisecond), rows, rows-distinct, n-distinct)
	assert.Positive(t, kills)
	assert.Positive(t, renamed)
	assert.Positive(t, terms)
	assert.Positive(t, stuckStops)
	assert.Positive(t, ends[endGivenBack], "leases given back by the shutdowns")
	assert.Positive(t, ends[endRecovered], "executions recovered at restarts")
	assert.Positive(t, ends[endLapsed], "executions ended by a sweep once their lease lapsed")
	assert.Equal(t, n, ends[endCommitted], "one committed execution per job")
	for end, k := range ends {
		switch end {
		case endCommitted, endGivenBack, endRecovered, endLapsed:
		default:
			t.Errorf("%d executions ended as %q", k, end)
		}
	}
	var twice, costly int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.jobs j
		WHERE (SELECT count(*) FROM `+execRows(schema)+` x WHERE x.job_id = j.id AND x.status IN ('COMMITTED', 'DONE')) <> 1`).Scan(&twice))
	assert.Zero(t, twice, "jobs without exactly one committed execution")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.jobs j
		WHERE j.retry_count <> (SELECT count(*) FROM `+execRows(schema)+` x
			WHERE x.job_id = j.id AND x.status = 'ABORTED' AND x.error <> 'snoozed for 0s')`).Scan(&costly))
	assert.Zero(t, costly, "jobs whose retry count is not their recovered and lapsed executions")
	c.requireEnded(t, pool)
}

// rtQueries reads the executions of TestRuntimeCrashSignals's schema.
type rtQueries struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	schema string
}

// live returns the ids of worker's live executions.
func (q rtQueries) live(worker string) []string {
	q.t.Helper()
	rows, err := q.pool.Query(q.ctx, "SELECT id::text FROM "+execRows(q.schema)+" e WHERE owner = $1 AND status IN ('LEASED', 'IN_PROGRESS', 'COMMITTED')", worker)
	require.NoError(q.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(q.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(q.t, rows.Err())
	return ids
}

// own returns the ids of the live executions p claimed. An execution of
// p's name claimed before p started is an earlier process's: one that
// was killed with a claim's COMMIT already sent, which the server applied
// after p had recovered the name's executions at its start; its lease
// lapses and a sweep ends it.
func (q rtQueries) own(p *rtProc) []string {
	q.t.Helper()
	rows, err := q.pool.Query(q.ctx, "SELECT id::text FROM "+execRows(q.schema)+" e WHERE owner = $1 AND status IN ('LEASED', 'IN_PROGRESS', 'COMMITTED') AND claimed_at >= $2", p.name, p.started)
	require.NoError(q.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(q.t, err)
	return ids
}

// anyLive reports whether any of the executions ids is live.
func (q rtQueries) anyLive(ids []string) bool {
	q.t.Helper()
	for _, end := range q.ends(ids) {
		if end == endLive {
			return true
		}
	}
	return false
}

// stuck reports whether worker holds a slow job's first attempt, whose
// handler, in the stubborn worker, ignores its context.
func (q rtQueries) stuck(worker string) bool {
	q.t.Helper()
	var k int
	require.NoError(q.t, q.pool.QueryRow(q.ctx, `SELECT count(*) FROM `+execRows(q.schema)+` x JOIN `+q.schema+`.jobs j ON j.id = x.job_id
		WHERE x.owner = $1 AND x.status IN ('LEASED', 'IN_PROGRESS') AND x.attempt = 1 AND j.payload = 'slow'::bytea`, worker).Scan(&k))
	return k > 0
}

// held returns how many live executions each worker holds.
func (q rtQueries) held(names []string) []int {
	q.t.Helper()
	out := make([]int, len(names))
	for i, name := range names {
		out[i] = len(q.live(name))
	}
	return out
}

// ends returns how each of the executions ids ended.
func (q rtQueries) ends(ids []string) map[string]string {
	q.t.Helper()
	rows, err := q.pool.Query(q.ctx, "SELECT id::text, status, error FROM "+execRows(q.schema)+" e WHERE id::text = ANY($1)", ids)
	require.NoError(q.t, err)
	out := make(map[string]string, len(ids))
	for rows.Next() {
		var id, status, reason string
		require.NoError(q.t, rows.Scan(&id, &status, &reason))
		out[id] = execEnd(status, reason)
	}
	require.NoError(q.t, rows.Err())
	require.Len(q.t, out, len(ids), "executions missing")
	return out
}

// allEnds counts every execution by how it ended.
func (q rtQueries) allEnds() map[string]int {
	q.t.Helper()
	rows, err := q.pool.Query(q.ctx, "SELECT status, error, count(*) FROM "+execRows(q.schema)+" e GROUP BY status, error")
	require.NoError(q.t, err)
	out := make(map[string]int)
	for rows.Next() {
		var status, reason string
		var k int
		require.NoError(q.t, rows.Scan(&status, &reason, &k))
		out[execEnd(status, reason)] += k
	}
	require.NoError(q.t, rows.Err())
	return out
}

// logTail logs the last n lines of the file at path.
func logTail(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Logf("%s: %v", path, err)
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	t.Logf("last lines of %s:\n%s", filepath.Base(path), strings.Join(lines, "\n"))
}
