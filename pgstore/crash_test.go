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

// crashSchema is the setting of a crash test: a worker program built for
// it, a schema of its own with the table the program's commit effect
// inserts into, an engine on a store of the schema running the test's
// machine, and the jobs the test created.
type crashSchema struct {
	bin, schema, table string
	store              *pgstore.Store
	def                *jobstate.Definition
	eng                *jobstate.Engine
	jobs               []jobstate.Job
}

// newCrashSchema builds the worker program in pgstore/internal/program,
// migrates a fresh schema named prefix and a unique suffix (dropped when
// t ends), creates its table receipts (no unique key, so that an effect
// applied twice shows), and creates n jobs of spec's machine, the i-th
// with payload(i) when payload is not nil.
func newCrashSchema(t *testing.T, pool *pgxpool.Pool, program, prefix string, spec jobstate.Spec, n int, payload func(i int) []byte) *crashSchema {
	t.Helper()
	ctx := context.Background()
	c := &crashSchema{bin: filepath.Join(t.TempDir(), program)}
	out, err := exec.Command("go", "build", "-o", c.bin, "./internal/"+program).CombinedOutput()
	require.NoError(t, err, "%s", out)

	c.schema = fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano())
	_, err = pgstore.Migrate(ctx, pool, pgstore.Options{Schema: c.schema})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+c.schema+" CASCADE") })
	c.table = c.schema + ".receipts"
	_, err = pool.Exec(ctx, "CREATE TABLE "+c.table+" (job uuid NOT NULL)")
	require.NoError(t, err)
	c.store, err = pgstore.New(pool, pgstore.Options{Schema: c.schema})
	require.NoError(t, err)
	t.Cleanup(func() { c.store.Close() })
	c.def, err = jobstate.NewDefinition(spec)
	require.NoError(t, err)
	c.eng, err = jobstate.New(c.store, jobstate.WithMachines(c.def))
	require.NoError(t, err)
	c.jobs = make([]jobstate.Job, 0, n)
	for i := 0; i < n; i++ {
		nj := jobstate.NewJob{Machine: spec.Name}
		if payload != nil {
			nj.Payload = payload(i)
		}
		created, err := c.eng.Create(ctx, nj)
		require.NoError(t, err)
		c.jobs = append(c.jobs, created.Job)
	}
	return c
}

// receipts returns the number of rows of the receipts table and of
// distinct jobs in it.
func (c *crashSchema) receipts(t *testing.T, pool *pgxpool.Pool) (rows, distinct int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT job) FROM "+c.table).Scan(&rows, &distinct))
	return rows, distinct
}

// requireEnded fails the test unless one effect row per job was written,
// none twice, and every job the test created succeeded with a history
// that replays to its state.
func (c *crashSchema) requireEnded(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	rows, distinct := c.receipts(t, pool)
	assert.Equal(t, len(c.jobs), rows, "one effect row per job")
	assert.Equal(t, len(c.jobs), distinct, "no job's effect twice")
	for _, j := range c.jobs {
		got, err := c.store.Get(ctx, j.ID)
		require.NoError(t, err)
		require.True(t, got.Terminal(), "job %s is %s", j.ID, got.State)
		require.Equal(t, jobstate.OutcomeSucceeded, got.Outcome, "job %s is %s", j.ID, got.State)
		h, err := c.store.History(ctx, j.ID)
		require.NoError(t, err)
		st, err := c.def.Replay(h)
		require.NoError(t, err, "job %s", j.ID)
		require.Equal(t, got.State, st)
	}
}

func runCrash(t *testing.T, cluster *pgtest.Cluster, pool *pgxpool.Pool, n int, restart bool) {
	ctx := context.Background()
	c := newCrashSchema(t, pool, "crashworker", "crash", crashmachine.Spec(), n, nil)
	store, eng := c.store, c.eng

	const workers = 4
	procs := make([]*exec.Cmd, workers)
	start := func(i int) {
		cmd := exec.Command(c.bin)
		cmd.Env = append(os.Environ(), "CRASH_URL="+cluster.URL, "CRASH_SCHEMA="+c.schema,
			"CRASH_TABLE="+c.table, "CRASH_WORKER=w"+strconv.Itoa(i))
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

	c.requireEnded(t, pool)
	if restart {
		require.True(t, restarted, "the server was restarted")
	}
}
