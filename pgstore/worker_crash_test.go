package pgstore_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate/pgstore/internal/crashmachine"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestCrashRuntimeWorkers runs the worker runtime in four worker
// processes over the jobs and, while they work, in turn SIGKILLs one
// (restarted under the same name, it recovers its leases at start) and
// sends SIGTERM to another (it must exit 0 within its grace period having
// given back every lease it held, and is restarted). The jobs' lease is a
// minute, so no job comes back by its lease lapsing during the test: a
// lost job would stall it. At the end every job is done, its effect row
// written exactly once, and its history replays.
func TestCrashRuntimeWorkers(t *testing.T) {
	n := crashJobs(t)
	cluster, pool := pgtest.Shared(t)
	ctx := context.Background()
	c := newCrashSchema(t, pool, "crashruntime", "crashrt", crashmachine.RuntimeSpec(), n, nil)
	store, schema := c.store, c.schema

	const workers = 4
	procs := make([]*exec.Cmd, workers)
	exited := make([]chan error, workers)
	started := make([]time.Time, workers)
	start := func(i int) {
		started[i] = time.Now()
		cmd := exec.Command(c.bin)
		cmd.Env = append(os.Environ(), "CRASH_URL="+cluster.URL, "CRASH_SCHEMA="+schema,
			"CRASH_TABLE="+c.table, "CRASH_WORKER=rt"+strconv.Itoa(i))
		if i%2 == 1 {
			cmd.Env = append(cmd.Env, "CRASH_GROUP=1") // half the workers commit through group commit
		}
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		procs[i] = cmd
		done := make(chan error, 1)
		exited[i] = done
		go func() { done <- cmd.Wait() }()
	}
	kill := func(i int) {
		_ = procs[i].Process.Signal(syscall.SIGKILL)
		<-exited[i]
	}
	for i := range procs {
		start(i)
	}
	defer func() {
		for i := range procs {
			kill(i)
		}
	}()
	// liveHeldBy counts the live executions process i claimed. A process
	// killed before it under the same name may have left a claim's COMMIT
	// on its way to the server, which lands after the new process
	// recovered the name's leases: those were claimed before it started.
	liveHeldBy := func(i int) int {
		var k int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+execRows(schema)+" e WHERE owner = $1 AND status IN ('LEASED', 'IN_PROGRESS') AND claimed_at >= $2",
			"rt"+strconv.Itoa(i), started[i]).Scan(&k))
		return k
	}

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	kills, terms, givenBack := 0, 0, 0
	t0 := time.Now()
	for round := 0; ; round++ {
		counts, err := store.Count(ctx, crashmachine.RuntimeName)
		require.NoError(t, err)
		if counts["done"] == n {
			break
		}
		// A lost job would wait out its one-minute lease: the bound is
		// below it.
		require.Less(t, time.Since(t0), 50*time.Second, "jobs are not finishing: %v", counts)
		time.Sleep(time.Duration(100+rnd.IntN(200)) * time.Millisecond) // let them work
		i := rnd.IntN(workers)
		if round%2 == 0 {
			kill(i)
			kills++
			start(i)
			continue
		}
		held := liveHeldBy(i)
		require.NoError(t, procs[i].Process.Signal(syscall.SIGTERM))
		select {
		case err := <-exited[i]:
			exited[i] <- err // for the deferred kill, should the check below stop the test
			require.NoError(t, err, "a worker stopped by SIGTERM exits 0")
			<-exited[i]
		case <-time.After(15 * time.Second):
			t.Fatalf("worker rt%d did not stop within 15 s of SIGTERM (grace period 300 ms)", i)
		}
		terms++
		givenBack += held
		assert.Zero(t, liveHeldBy(i), "a worker stopped by SIGTERM leaves no lease behind")
		start(i)
	}
	elapsed := time.Since(t0)

	rows, distinct := c.receipts(t, pool)
	t.Logf("%d jobs done by %d runtime workers in %v: %d SIGKILLs, %d SIGTERMs (%d leases held at the signal), %d effect rows, %d duplicates, %d lost",
		n, workers, elapsed.Round(time.Millisecond), kills, terms, givenBack, rows, rows-distinct, n-distinct)
	assert.Positive(t, kills)
	assert.Positive(t, terms)
	c.requireEnded(t, pool)
}
