// pgstore under network faults, checked with goleak for goroutines left
// behind: in the test module so that goleak never reaches pgstore's
// users.
package network_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/require"
	"go.uber.org/goleak"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/internal/netfault"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// workSpec is a small machine: queued → running → done, with retries.
func workSpec() jobstate.Spec {
	return jobstate.Spec{
		Name:    "work",
		Initial: "queued",
		States: []jobstate.StateSpec{
			{Name: "queued", Kind: jobstate.KindReady},
			{Name: "running", Kind: jobstate.KindActive},
			{Name: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"queued"}, Event: jobstate.EventClaim, To: "running"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventSucceed, To: "done"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventRetry, To: "queued"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventFail, To: "failed"},
		},
		Policy: jobstate.Policy{LeaseTTL: time.Minute, Retry: jobstate.RetryPolicy{MaxRetries: 3}},
	}
}

// Network faults between the worker runtime and the server: latency, a
// partition, a hang.
const (
	netLatency   = 30 * time.Millisecond // each way: a 60 ms round trip
	netWindow    = 4 * time.Second       // commits counted under latency alone
	netPartition = 3 * time.Second
	netHang      = 3 * time.Second
	netBound     = 2 * time.Second // the store's RoundTripTimeout: ends the hang's calls
	// netLease is well above what a commit waits at this round trip,
	// also on a machine whose cores other tests keep busy (docs/store.md,
	// "A database far away").
	netLease = 10 * time.Second
	netJobs  = 900
	netSlots = 32
	netConns = 10
)

// TestNetworkFaultsLoseNothingAndLeakNothing runs the worker runtime on
// pgstore through a loopback proxy (internal/netfault) that adds 30 ms of
// latency each way, then partitions the network (live connections reset,
// new ones refused), then hangs it (nothing forwarded either way, the
// connections reset when it ends), with and without group commit. Each
// job's commit effect inserts its id into a table of the test in the
// store's transaction. It checks: no job lost or committed twice, every
// job terminal; no commit refused for a lease that lapsed while it waited
// under latency alone; calls during the partition and the hang fail with
// a *jobstate.UnavailableError, a call in the hang within the store's
// RoundTripTimeout; the runtime logs each outage as one WARN record and
// nothing else above INFO but the leases lost in them; and once Run has
// returned and the store and
// pool are closed, no goroutine is left (goleak) and no connection of the
// pool is open on the server (pg_stat_activity). It logs the commits per
// second under latency. The two stores run at the same time, each with a
// proxy of its own; the goroutines are checked once both are done.
func TestNetworkFaultsLoseNothingAndLeakNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("network faults take about half a minute")
	}
	pgtest.Pool(t) // skips (or fails) without a server, before anything starts
	leaks := goleak.IgnoreCurrent()
	var mu sync.Mutex
	rates := map[string]float64{}
	// The two stores run at once, each through its own proxy: they wait
	// on latency far more than they work.
	t.Run("stores", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			group int
		}{{"default", 0}, {"group commit", 32}} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				r := runNetworkFaults(t, c.group)
				mu.Lock()
				rates[c.name] = r
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("commits per second at a %s round trip: %.1f without group commit, %.1f with GroupCommit 32",
		2*netLatency, rates["default"], rates["group commit"])
	// Every store, pool and proxy is closed: nothing of theirs may be left.
	goleak.VerifyNone(t, leaks)
}

// logCount is a slog handler counting records by level and message.
type logCount struct {
	mu     sync.Mutex
	counts map[string]int
	above  []string // records above INFO, with their attributes
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCount) WithGroup(string) slog.Handler            { return l }

func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[r.Level.String()+" "+r.Message]++
	if r.Level > slog.LevelInfo {
		s := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			s += " " + a.String()
			return true
		})
		l.above = append(l.above, s)
	}
	return nil
}

func (l *logCount) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[level.String()+" "+msg]
}

func runNetworkFaults(t *testing.T, group int) float64 {
	ctx := context.Background()
	cluster, admin := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	table := schema + ".effect_rows"
	_, err := admin.Exec(ctx, `CREATE TABLE `+table+` (job_id uuid NOT NULL)`)
	require.NoError(t, err)

	def, err := jobstate.NewDefinition(netSpec())
	require.NoError(t, err)
	// The jobs are created directly; the worker runs through the proxy.
	direct, err := pgstore.New(admin, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	creator, err := jobstate.New(direct, jobstate.WithMachines(def))
	require.NoError(t, err)
	news := make([]jobstate.NewJob, netJobs)
	for i := range news {
		news[i] = jobstate.NewJob{Machine: "net"}
	}
	_, err = creator.CreateMany(ctx, news)
	require.NoError(t, err)
	direct.Close()

	cfg, err := pgxpool.ParseConfig(cluster.URL)
	require.NoError(t, err)
	if cfg.ConnConfig.TLSConfig != nil || len(cfg.ConnConfig.Host) == 0 || cfg.ConnConfig.Host[0] == '/' {
		t.Skip("the proxy relays plain TCP connections only")
	}
	proxy, err := netfault.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(t, err)
	defer proxy.Close()
	app := fmt.Sprintf("netfault_%s", uuid.NewString()[:8])
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", proxy.Port(), nil
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ConnConfig.ConnectTimeout = netBound
	cfg.MaxConns = netConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	poolOpen := true
	defer func() {
		if poolOpen {
			pool.Close()
		}
	}()
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema, GroupCommit: group, RoundTripTimeout: netBound})
	require.NoError(t, err)
	storeOpen := true
	defer func() {
		if storeOpen {
			store.Close()
		}
	}()
	eng, err := jobstate.New(store, jobstate.WithMachines(def))
	require.NoError(t, err)

	logs := &logCount{counts: map[string]int{}}
	h := worker.HandlerFunc(func(ctx context.Context, task *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
			tx, ok := pgstore.Tx(ctx)
			if !ok {
				return errors.New("no store transaction")
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` (job_id) VALUES ($1)`, j.ID)
			return err
		}}, nil
	})
	w, err := worker.New(eng, worker.Handle("net", h, netSlots),
		worker.WithPollInterval(200*time.Millisecond), worker.WithSweepInterval(500*time.Millisecond),
		worker.WithGracePeriod(5*time.Second), worker.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	proxy.SetLatency(netLatency)
	go func() { ran <- w.Run(runCtx) }()

	rows := func() int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	// Latency alone: the commits of a window, once the worker is going.
	time.Sleep(2 * time.Second)
	before := rows()
	time.Sleep(netWindow)
	after := rows()
	rate := float64(after-before) / netWindow.Seconds()
	lapsed := logs.count(slog.LevelWarn, "lease lost: the handler's outcome is dropped")
	t.Logf("GroupCommit %d, %d connections, %d slots, %s round trip: %d commits in %s (%.1f/s), %d outcomes dropped for a lost lease",
		group, netConns, netSlots, 2*netLatency, after-before, netWindow, rate, lapsed)
	require.Zero(t, lapsed, "commits refused for a lease that lapsed while they waited, under latency alone")
	require.Less(t, after, netJobs, "the window must end before the jobs do")

	// A partition: live connections reset, new ones refused.
	proxy.Partition()
	time.Sleep(100 * time.Millisecond)
	_, err = store.Get(ctx, uuid.New())
	require.ErrorIs(t, err, jobstate.ErrUnavailable, "a call during the partition: %v", err)
	time.Sleep(netPartition - 100*time.Millisecond)
	require.NoError(t, proxy.Heal())
	time.Sleep(time.Second)

	// A hang: nothing forwarded either way, then the connections reset.
	proxy.Hang()
	start := time.Now()
	_, err = store.Get(ctx, uuid.New())
	took := time.Since(start)
	require.ErrorIs(t, err, jobstate.ErrUnavailable, "a call during the hang: %v", err)
	require.Less(t, took, netHang, "a call in the hang ends by the store's bound (%s), not by the reset", netBound)
	time.Sleep(netHang - took)
	require.NoError(t, proxy.Heal())

	// Every job ends, committed once. The sweep recovers the leases that
	// lapsed in the faults one job at a time, and spaces its attempts at
	// a job whose writes failed in them (1 s, doubling): on a loaded
	// machine that can take a while, hence the generous bound.
	healed := time.Now()
	deadline := healed.Add(3 * time.Minute)
	for {
		var open int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.jobs WHERE kind <> 'terminal'`).Scan(&open))
		if open == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			// What is left, and what the runtime logged, to tell why.
			rows, err := admin.Query(ctx, `SELECT state, leases, retry_count, count(*) FROM `+schema+`.jobs
 WHERE kind <> 'terminal' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10`)
			require.NoError(t, err)
			for rows.Next() {
				var state string
				var leases, retries, n int
				require.NoError(t, rows.Scan(&state, &leases, &retries, &n))
				t.Logf("open: %d jobs in state %s, %d leases, %d retries", n, state, leases, retries)
			}
			rows.Close()
			logs.mu.Lock()
			for k, v := range logs.counts {
				t.Logf("logged %d× %s", v, k)
			}
			logs.mu.Unlock()
		}
		require.True(t, time.Now().Before(deadline), "%d jobs still open three minutes after the faults", open)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every job ended %s after the faults", time.Since(healed).Round(100*time.Millisecond))
	stop()
	require.NoError(t, <-ran)
	store.Close()
	storeOpen = false
	pool.Close()
	poolOpen = false
	proxy.Close()

	var total, distinct, succeeded int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id) FROM `+table).Scan(&total, &distinct))
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.jobs WHERE state = 'done'`).Scan(&succeeded))
	require.Equal(t, netJobs, distinct, "jobs committed")
	require.Equal(t, netJobs, total, "effect rows: a job committed twice")
	require.Equal(t, netJobs, succeeded, "jobs done")

	// Above INFO: the outages, and leases that lapsed in them (a write
	// that waited out its lease in an outage and reached the store after
	// it), nothing else.
	logs.mu.Lock()
	above := append([]string(nil), logs.above...)
	logs.mu.Unlock()
	outages := logs.count(slog.LevelWarn, "store unreachable")
	for _, r := range above {
		if !strings.HasPrefix(r, "WARN store unreachable") && !strings.HasPrefix(r, "WARN lease lost: the handler's outcome is dropped") {
			t.Errorf("a record above INFO that is not an outage: %s", r)
		}
	}
	require.GreaterOrEqual(t, outages, 1, "the outages are logged")
	require.Equal(t, outages, logs.count(slog.LevelInfo, "store reachable again"), "every outage ends")
	accepted, resets := proxy.Stats()
	t.Logf("%d outages logged, %d connections opened, %d reset", outages, accepted, resets)

	var open int
	for i := 0; i < 50; i++ {
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&open))
		if open == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Zero(t, open, "connections of the closed pool still open on the server")
	return rate
}

// netSpec is the machine of the network test: a job is claimed, then
// succeeds; a lost lease is retried at once, as often as needed.
func netSpec() jobstate.Spec {
	s := workSpec()
	s.Name = "net"
	s.Policy = jobstate.Policy{LeaseTTL: netLease, Retry: jobstate.RetryPolicy{MaxRetries: 1000}}
	return s
}
