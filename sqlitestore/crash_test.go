package sqlitestore_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/sqlitestore/internal/crashmachine"
)

// crashJobs is the number of jobs of the crash test: 10,000, 1,000 with
// -short, or JOBSTATE_CRASH_JOBS.
func crashJobs(t *testing.T) int {
	if v := os.Getenv("JOBSTATE_CRASH_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	if testing.Short() {
		return 1000
	}
	return 10_000
}

// TestCrashWorkers runs worker processes on one database file over the
// jobs and SIGKILLs them at random points, each time starting the worker
// again under its name; the test process sweeps meanwhile. Then every job
// is done, and its effect row, inserted by the commit effect in the
// store's transaction, is there exactly once: no double effect, no lost
// job.
func TestCrashWorkers(t *testing.T) {
	n := crashJobs(t)
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "crashworker")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/crashworker").CombinedOutput()
	require.NoError(t, err, "%s", out)

	path := filepath.Join(t.TempDir(), "crash.db")
	store := openAt(t, path, sqlitestore.Options{})
	_, err = store.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	def, err := jobstate.NewDefinition(crashmachine.Spec())
	require.NoError(t, err)
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	require.NoError(t, err)
	news := make([]jobstate.NewJob, n)
	for i := range news {
		news[i] = jobstate.NewJob{Machine: crashmachine.Name}
	}
	created, err := eng.CreateMany(ctx, news)
	require.NoError(t, err)
	require.Len(t, created, n)

	const workers = 2
	procs := make([]*exec.Cmd, workers)
	start := func(i int) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CRASH_DB="+path, "CRASH_WORKER=w"+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		procs[i] = cmd
	}
	kill := func(i int) {
		_ = procs[i].Process.Signal(syscall.SIGKILL)
		_ = procs[i].Wait()
	}
	for i := range procs {
		start(i)
	}
	defer func() {
		for i := range procs {
			kill(i)
		}
	}()
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	t0 := time.Now()
	for {
		counts, err := store.Count(ctx, crashmachine.Name)
		if err == nil && counts["done"] == n {
			break
		}
		require.Less(t, time.Since(t0), 10*time.Minute, "jobs are not finishing: %v", counts)
		// Kill a worker at a random point of its loop and start it again.
		time.Sleep(time.Duration(20+rnd.IntN(200)) * time.Millisecond)
		i := rnd.IntN(workers)
		kill(i)
		start(i)
		kills++
		// Leases of the killed workers come back through the sweep too.
		_, _ = eng.Sweep(ctx)
	}
	elapsed := time.Since(t0)
	t.Logf("%d jobs done by %d worker processes in %v with %d kills", n, workers, elapsed.Round(time.Millisecond), kills)

	var rows, distinct int
	require.NoError(t, store.DB().QueryRowContext(ctx, "SELECT count(*), count(DISTINCT job) FROM "+crashmachine.Table).Scan(&rows, &distinct))
	assert.Equal(t, n, rows, "one effect row per job")
	assert.Equal(t, n, distinct, "no job's effect twice")
	for _, c := range created {
		got, err := store.Get(ctx, c.Job.ID)
		require.NoError(t, err)
		require.True(t, got.Terminal(), "job %s is %s", c.Job.ID, got.State)
		require.Equal(t, jobstate.OutcomeSucceeded, got.Outcome)
		h, err := store.History(ctx, c.Job.ID)
		require.NoError(t, err)
		st, err := def.Replay(h)
		require.NoError(t, err, "job %s", c.Job.ID)
		require.Equal(t, got.State, st)
	}
	var check string
	require.NoError(t, store.DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check)
}
