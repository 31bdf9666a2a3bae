package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/periodicworker/tickmachine"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/worker"
)

// Settings of TestPeriodicThreeProcesses.
const (
	ptProcs   = 3                     // worker processes running the schedule
	ptEvery   = time.Second           // the schedule's interval, on the real clock
	ptPeriods = 6                     // periods the first run waits for
	ptDown    = 3                     // whole periods missed before each restart, besides the one the restart begins in
	ptAfter   = 2                     // periods each restarted run waits for after the one it begins in
	ptRelease = 20 * time.Millisecond // after a period's start, when the processes are let run
	ptWait    = 20 * time.Second      // bound of each wait on the database
	ptExit    = 10 * time.Second      // bound on a process's start and on its exit after SIGTERM (grace 1 s)
)

// ptProc is one running periodicworker process.
type ptProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan error
}

// ptPeriod returns the start of the schedule's period holding t.
func ptPeriod(t time.Time) time.Time {
	n := t.UnixNano()
	return time.Unix(0, n-n%int64(ptEvery)).UTC()
}

// ptRig runs the worker processes of TestPeriodicThreeProcesses and reads
// the jobs they create.
type ptRig struct {
	t                  *testing.T
	ctx                context.Context
	eng                *jobstate.Engine
	bin, dir           string
	url, schema, table string
	procs              []*ptProc
}

// start starts the processes under their names (p0, p1, ...), with the
// catch-up policy catchUp ("none" or "last"), and waits until each is
// ready: connected, its runtime built, waiting to be released.
func (r *ptRig) start(catchUp string) {
	t := r.t
	r.procs = make([]*ptProc, ptProcs)
	for i := range r.procs {
		name := fmt.Sprintf("p%d", i)
		logf, err := os.OpenFile(filepath.Join(r.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		cmd := exec.Command(r.bin)
		cmd.Env = append(os.Environ(), "PERIODIC_URL="+r.url, "PERIODIC_SCHEMA="+r.schema, "PERIODIC_TABLE="+r.table,
			"PERIODIC_WORKER="+name, "PERIODIC_EVERY="+ptEvery.String(), "PERIODIC_CATCHUP="+catchUp, "PERIODIC_LOG=1")
		cmd.Stderr = logf
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		p := &ptProc{name: name, cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
		r.procs[i] = p
		ready := make(chan error, 1)
		go func() {
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err == nil && line != "ready\n" {
				err = fmt.Errorf("unexpected output %q", line)
			}
			ready <- err
			err = cmd.Wait()
			_ = logf.Close()
			p.exited <- err
		}()
		select {
		case err := <-ready:
			require.NoError(t, err, "process %s did not start", name)
		case <-time.After(ptExit):
			t.Fatalf("process %s did not start within %v", name, ptExit)
		}
	}
}

// release lets the processes run at at (or, if at has passed or the
// test wakes late in the period, just after the next period starts) and
// returns the time just before it released them: they have most of a
// period to reach their schedule before the next one starts.
func (r *ptRig) release(at time.Time) time.Time {
	var released time.Time
	for {
		if now := time.Now(); !now.Before(at) {
			at = ptPeriod(now).Add(ptEvery + ptRelease)
		}
		time.Sleep(time.Until(at)) // the scenario's timing, not an assertion's
		released = time.Now()
		// Woken late in the period (a loaded machine), the processes
		// might not reach their schedule within it: wait for the next.
		if released.Sub(ptPeriod(released)) < ptEvery/4 {
			break
		}
	}
	for _, p := range r.procs {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(r.t, err, "releasing process %s", p.name)
	}
	return released
}

// kill SIGKILLs every process, waits for their exits, and returns the
// time by which they were all gone.
func (r *ptRig) kill() time.Time {
	for _, p := range r.procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, p := range r.procs {
		if p == nil {
			continue
		}
		<-p.exited
		p.exited <- nil // for a later kill
	}
	return time.Now()
}

// term sends SIGTERM to every process and checks that each exits 0.
func (r *ptRig) term() {
	for _, p := range r.procs {
		require.NoError(r.t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range r.procs {
		select {
		case err := <-p.exited:
			p.exited <- err
			require.NoError(r.t, err, "process %s stopped by SIGTERM exits 0", p.name)
		case <-time.After(ptExit):
			r.t.Fatalf("process %s did not exit within %v of SIGTERM", p.name, ptExit)
		}
	}
}

// alive fails the test if a process exited unsignalled.
func (r *ptRig) alive() {
	for _, p := range r.procs {
		select {
		case err := <-p.exited:
			p.exited <- err
			r.t.Fatalf("process %s exited by itself: %v", p.name, err)
		default:
		}
	}
}

// jobs returns the schedule's jobs, by period start.
func (r *ptRig) jobs() []jobstate.Job {
	page, err := r.eng.List(r.ctx, jobstate.ListQuery{Machine: tickmachine.Name, Limit: jobstate.MaxListLimit}, "")
	require.NoError(r.t, err)
	require.Empty(r.t, page.Next, "more jobs than a page")
	js := page.Jobs
	slices.SortFunc(js, func(a, b jobstate.Job) int { return a.NotBefore.Compare(b.NotBefore) })
	return js
}

// handledThrough waits, polling the database, until the job of the
// period starting at last exists and every job is terminal, and returns
// the jobs.
func (r *ptRig) handledThrough(last time.Time) []jobstate.Job {
	deadline := time.Now().Add(ptWait)
	for {
		r.alive()
		js := r.jobs()
		done := len(js) > 0 && !js[len(js)-1].NotBefore.Before(last)
		for _, j := range js {
			done = done && j.Terminal()
		}
		if done {
			return js
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no handled job of the period starting at %v within %v: %s", last, ptWait, ptSummary(js))
		}
		time.Sleep(50 * time.Millisecond) // polling the database
	}
}

// ptSummary describes jobs for a failure message.
func ptSummary(js []jobstate.Job) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "\n  %s %s created %s by %s", j.NotBefore.Format("15:04:05.000"), j.State, j.CreatedAt.Format("15:04:05.000"), j.Payload)
	}
	return b.String()
}

// ptCheck checks every job: one per period, its NotBefore a period
// start, its key the period's, created no earlier than its period
// started; and, with terminal set, succeeded. It returns the jobs by
// period start.
func ptCheck(t *testing.T, js []jobstate.Job, terminal bool) map[time.Time]jobstate.Job {
	t.Helper()
	by := make(map[time.Time]jobstate.Job, len(js))
	for _, j := range js {
		start := j.NotBefore.UTC()
		_, dup := by[start]
		require.False(t, dup, "two jobs for the period starting at %v: %s", start, ptSummary(js))
		by[start] = j
		require.True(t, ptPeriod(start).Equal(start), "job %s: NotBefore %v is not a period start", j.ID, start)
		require.Equal(t, worker.PeriodKey(tickmachine.Schedule, start), j.IdempotencyKey, "job %s: the period's key", j.ID)
		require.False(t, j.CreatedAt.Before(start), "job %s created at %v, before its period started at %v", j.ID, j.CreatedAt, start)
		if terminal {
			require.Equal(t, jobstate.OutcomeSucceeded, j.Outcome, "job %s of the period starting at %v is %s", j.ID, start, j.State)
		}
	}
	return by
}

// ptHas checks that the period starting at start has a job.
func ptHas(t *testing.T, by map[time.Time]jobstate.Job, start time.Time, why string, js []jobstate.Job) {
	t.Helper()
	_, ok := by[start]
	require.True(t, ok, "%s: no job for the period starting at %v: %s", why, start, ptSummary(js))
}

// ptConsecutive checks that every period from first to last has a job.
func ptConsecutive(t *testing.T, by map[time.Time]jobstate.Job, first, last time.Time, js []jobstate.Job) {
	t.Helper()
	for p := first; !p.After(last); p = p.Add(ptEvery) {
		ptHas(t, by, p, fmt.Sprintf("a period skipped between %v and %v", first, last), js)
	}
}

// ptNone checks that no period in (after, through] has a job.
func ptNone(t *testing.T, by map[time.Time]jobstate.Job, after, through time.Time, why string, js []jobstate.Job) {
	t.Helper()
	for p := after.Add(ptEvery); !p.After(through); p = p.Add(ptEvery) {
		_, ok := by[p]
		require.False(t, ok, "%s: a job for the period starting at %v: %s", why, p, ptSummary(js))
	}
}

// ptLast returns the latest period start among js.
func ptLast(js []jobstate.Job) time.Time { return js[len(js)-1].NotBefore.UTC() }

// TestPeriodicThreeProcesses runs one periodic schedule (worker.Periodic,
// worker.Every(1s) on the real clock) in three OS processes of
// pgstore/internal/periodicworker on one database, each also handling the
// schedule's jobs, whose commit effect writes a row in the store's
// transaction. The processes are let run together just after a period
// starts (they wait for the test once connected), so that the period
// they begin in is one they missed. In turn:
//
//   - with CatchUpNone, for six periods: no job for the period they began
//     in, then exactly one job per period (by its key,
//     worker.PeriodKey), its NotBefore the period's start, none skipped,
//     every one handled (succeeded);
//   - all three SIGKILLed; after at least four missed periods, restarted
//     under their names (recovering the leases of the killed processes)
//     with CatchUpLast: the last missed period (the one the restart
//     begins in) gets its job, once, created after the restart, and the
//     missed periods before it none; then one job per period again;
//   - all SIGKILLed again; restarted with CatchUpNone after at least four
//     missed periods: none of them gets a job, and the next period does;
//   - SIGTERM: each process exits 0.
//
// Throughout, one job per period, each created no earlier than its
// period's start, and one effect row per succeeded job. Each wait polls
// the database with a bound of 20 s.
func TestPeriodicThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("worker processes on the real clock; not in -short")
	}
	cluster, pool := pgtest.Shared(t)
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "periodicworker")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/periodicworker").CombinedOutput()
	require.NoError(t, err, "%s", out)
	schema := pgtest.Schema(t)
	table := schema + ".receipts"
	_, err = pool.Exec(ctx, "CREATE TABLE "+table+" (job uuid NOT NULL)") // no unique key: duplicates would show
	require.NoError(t, err)
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	def, err := jobstate.NewDefinition(tickmachine.Spec())
	require.NoError(t, err)
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	require.NoError(t, err)
	r := &ptRig{t: t, ctx: ctx, eng: eng, bin: bin, dir: dir, url: cluster.URL, schema: schema, table: table}
	t.Cleanup(func() {
		if t.Failed() {
			for i := 0; i < ptProcs; i++ {
				logTail(t, filepath.Join(dir, fmt.Sprintf("p%d.log", i)), 20)
			}
		}
	})
	defer func() {
		if r.procs != nil {
			r.kill()
		}
	}()
	t0 := time.Now()

	// Six periods with CatchUpNone.
	r.start("none")
	r1 := r.release(ptPeriod(time.Now()).Add(ptEvery + ptRelease))
	b1 := ptPeriod(r1)
	js := r.handledThrough(b1.Add(ptPeriods * ptEvery))
	by := ptCheck(t, js, true)
	ptNone(t, by, b1.Add(-ptEvery), b1, "CatchUpNone, the period the processes began in", js)
	first := b1.Add(ptEvery)
	ptHas(t, by, first, "the first period after the start", js)
	ptConsecutive(t, by, first, ptLast(js), js)
	killed1 := r.kill()

	// Four periods missed; CatchUpLast.
	r.start("last")
	r2 := r.release(ptPeriod(killed1).Add((ptDown+1)*ptEvery + ptRelease))
	b2 := ptPeriod(r2)
	js = r.handledThrough(b2.Add(ptAfter * ptEvery))
	by = ptCheck(t, js, true)
	ptConsecutive(t, by, first, ptPeriod(killed1).Add(-ptEvery), js)
	ptNone(t, by, ptPeriod(killed1), b2.Add(-ptEvery), "CatchUpLast, periods before the last missed one", js)
	ptHas(t, by, b2, "CatchUpLast, the last missed period", js)
	assert.False(t, by[b2].CreatedAt.Before(r2), "the last missed period's job was created by the restarted processes")
	ptConsecutive(t, by, b2, ptLast(js), js)
	catchUp := by[b2].CreatedAt.Sub(r2) // the processes' start after their release, and a creation
	killed2 := r.kill()

	// Four periods missed; CatchUpNone.
	r.start("none")
	r3 := r.release(ptPeriod(killed2).Add((ptDown+1)*ptEvery + ptRelease))
	b3 := ptPeriod(r3)
	js = r.handledThrough(b3.Add(ptAfter * ptEvery))
	by = ptCheck(t, js, true)
	ptConsecutive(t, by, b2, ptPeriod(killed2).Add(-ptEvery), js)
	ptNone(t, by, ptPeriod(killed2), b3, "CatchUpNone, missed periods", js)
	ptHas(t, by, b3.Add(ptEvery), "CatchUpNone, the first period after the restart", js)
	ptConsecutive(t, by, b3.Add(ptEvery), ptLast(js), js)
	handled := ptLast(js)
	r.term()
	elapsed := time.Since(t0)

	// After the stop: jobs of periods begun since the last wait may still
	// be queued (a stopped runtime claims nothing more); every other job
	// succeeded, each with one effect row.
	js = r.jobs()
	by = ptCheck(t, js, false)
	succeeded, queued := 0, 0
	creators := make(map[string]int)
	var lags []time.Duration
	for start, j := range by {
		creators[string(j.Payload)]++
		if j.Outcome == jobstate.OutcomeSucceeded {
			succeeded++
		} else {
			require.True(t, start.After(handled), "job %s of the period starting at %v is %s", j.ID, start, j.State)
			queued++
		}
		if !start.Equal(b2) { // the catch-up job is created after its period, by design
			lags = append(lags, j.CreatedAt.Sub(start))
		}
	}
	var rows, distinct int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job) FROM "+table).Scan(&rows, &distinct))
	assert.Equal(t, succeeded, rows, "one effect row per succeeded job")
	assert.Equal(t, rows, distinct, "no job's effect twice")
	slices.Sort(lags)
	t.Logf("%d periods' jobs in %v (%d succeeded, %d queued at the stop), created by %v; from a period's start to its job's creation: median %v, max %v; from the release to the catch-up job's creation: %v",
		len(js), elapsed.Round(time.Millisecond), succeeded, queued, creators,
		lags[len(lags)/2].Round(time.Microsecond), lags[len(lags)-1].Round(time.Microsecond), catchUp.Round(time.Microsecond))
}
