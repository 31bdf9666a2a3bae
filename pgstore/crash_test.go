package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// crashJobs is the number of jobs of a crash test: 2,000, or
// JOBSTATE_CRASH_JOBS.
func crashJobs(t *testing.T) int {
	if testing.Short() {
		t.Skip("crash tests with worker processes; not in -short")
	}
	if v := os.Getenv("JOBSTATE_CRASH_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 2000
}

// TestCrashWorkers runs worker processes over the jobs and SIGKILLs them
// at random points; then every job is done, and its effect row written
// exactly once.
func TestCrashWorkers(t *testing.T) {
	n := crashJobs(t)
	cluster, pool := pgtest.Shared(t)
	runCrash(t, cluster, pool, n, false)
}

// TestCrashServerRestart does the same on a cluster of its own, with
// synchronous commits, which it also kills (pg_ctl restart -m immediate)
// in the middle of the run.
func TestCrashServerRestart(t *testing.T) {
	n := crashJobs(t)
	ctx := context.Background()
	cluster, err := pgtest.Start(ctx, pgtest.Settings{Own: true})
	if err != nil {
		pgtest.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	pool, err := pgtest.NewPool(ctx, cluster.URL, 8)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	runCrash(t, cluster, pool, n, true)
}

func runCrash(t *testing.T, cluster *pgtest.Cluster, pool *pgxpool.Pool, n int, restart bool) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "crashworker")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/crashworker").CombinedOutput()
	require.NoError(t, err, "%s", out)

	schema := fmt.Sprintf("crash_%d_%d", os.Getpid(), time.Now().UnixNano())
	_, err = pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	table := schema + ".receipts"
	_, err = pool.Exec(ctx, "CREATE TABLE "+table+" (job uuid NOT NULL)") // no unique key: duplicates would show
	require.NoError(t, err)
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	def, err := jobstate.NewDefinition(crashmachine.Spec())
	require.NoError(t, err)
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	require.NoError(t, err)
	ids := make([]jobstate.Job, 0, n)
	for i := 0; i < n; i++ {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
		require.NoError(t, err)
		ids = append(ids, c.Job)
	}

	const workers = 4
	procs := make([]*exec.Cmd, workers)
	start := func(i int) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CRASH_URL="+cluster.URL, "CRASH_SCHEMA="+schema,
			"CRASH_TABLE="+table, "CRASH_WORKER=w"+strconv.Itoa(i))
		if i%2 == 1 {
			// Half the workers commit through group commit.
			cmd.Env = append(cmd.Env, "CRASH_GROUP=1")
		}
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
	kills, restarted := 0, false
	t0 := time.Now()
	for {
		counts, err := store.Count(ctx, crashmachine.Name)
		if err == nil && counts["done"] == n {
			break
		}
		require.Less(t, time.Since(t0), 10*time.Minute, "jobs are not finishing: %v", counts)
		if restart && !restarted && counts["done"] > n/3 {
			require.NoError(t, cluster.Restart(ctx, "immediate"))
			restarted = true
		}
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
	t.Logf("%d jobs done by %d workers in %v with %d kills (server restarted: %v)", n, workers, elapsed.Round(time.Millisecond), kills, restarted)

	var rows, distinct int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job) FROM "+table).Scan(&rows, &distinct))
	assert.Equal(t, n, rows, "one effect row per job")
	assert.Equal(t, n, distinct, "no job's effect twice")
	for _, j := range ids {
		got, err := store.Get(ctx, j.ID)
		require.NoError(t, err)
		require.True(t, got.Terminal(), "job %s is %s", j.ID, got.State)
		require.Equal(t, jobstate.OutcomeSucceeded, got.Outcome)
		h, err := store.History(ctx, j.ID)
		require.NoError(t, err)
		st, err := def.Replay(h)
		require.NoError(t, err, "job %s", j.ID)
		require.Equal(t, got.State, st)
	}
	if restart {
		require.True(t, restarted, "the server was restarted")
	}
}
