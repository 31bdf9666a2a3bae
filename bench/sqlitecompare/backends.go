package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/worker"
)

// errSkip: a store that cannot run here (pgstore without the server's
// binaries, unless JOBSTATE_REQUIRE_PG=1).
var errSkip = errors.New("store skipped")

// errUnsupported: a measurement a library has no call for.
var errUnsupported = errors.New("not supported")

// backend is one store (or library) under measurement, empty when
// opened.
type backend interface {
	insertBatch(ctx context.Context, n, per int) error
	insertLatency(ctx context.Context, n int) ([]time.Duration, error)
	work(ctx context.Context, workers, n int) (time.Duration, error)
	claimLatency(ctx context.Context, n int) ([]time.Duration, error)
	close()
}

// environment opens the backends: SQLite files in dir, PostgreSQL
// schemas on a cluster started at the first need.
type environment struct {
	dir     string
	n       int
	cluster *pgtest.Cluster
	pool    *pgxpool.Pool
	pgErr   error
}

func (e *environment) close() {
	if e.pool != nil {
		e.pool.Close()
	}
	if e.cluster != nil {
		_ = e.cluster.Stop()
	}
}

// open returns an empty backend of the named store.
func (e *environment) open(ctx context.Context, name string, requirePG bool) (backend, error) {
	e.n++
	file := filepath.Join(e.dir, fmt.Sprintf("%s-%d.db", name, e.n))
	switch name {
	case "memstore":
		return newJS(memstore.New(), nil)
	case "sqlitestore", "sqlitestore-normal":
		opts := sqlitestore.Options{}
		if name == "sqlitestore-normal" {
			opts.Synchronous = "NORMAL"
		}
		s, err := sqlitestore.Open(ctx, file, opts)
		if err != nil {
			return nil, err
		}
		return newJS(s, func() { _ = s.Close() })
	case "pgstore":
		if e.pool == nil && e.pgErr == nil {
			e.cluster, e.pgErr = pgtest.Start(ctx, pgtest.Settings{Own: true})
			if e.pgErr == nil {
				e.pool, e.pgErr = pgtest.NewPool(ctx, e.cluster.URL, 32)
			}
		}
		if e.pgErr != nil {
			if requirePG {
				return nil, e.pgErr
			}
			return nil, fmt.Errorf("%w: %v", errSkip, e.pgErr)
		}
		schema := fmt.Sprintf("bench_%d", e.n)
		opts := pgstore.Options{Schema: schema}
		if _, err := pgstore.Migrate(ctx, e.pool, opts); err != nil {
			return nil, err
		}
		s, err := pgstore.New(e.pool, opts)
		if err != nil {
			return nil, err
		}
		return newJS(s, func() {
			s.Close()
			_, _ = e.pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		})
	case "river-sqlite":
		return newRiver(ctx, file)
	}
	return nil, fmt.Errorf("unknown store %q", name)
}

// machine is the benchmark's machine: the work machine of
// internal/machines, queued → running → done.
const machine = "bench"

func benchSpec() jobstate.Spec { return machines.WorkSpec(machine) }

// js is jobstate on a store: the engine and a counter of finished jobs.
type js struct {
	eng    *jobstate.Engine
	done   atomic.Int64
	closer func()
}

func newJS(store jobstate.Store, closer func()) (*js, error) {
	def, err := jobstate.NewDefinition(benchSpec())
	if err != nil {
		return nil, err
	}
	j := &js{closer: closer}
	j.eng, err = jobstate.New(store, jobstate.WithMachines(def), jobstate.WithObserver(func(_ context.Context, _ jobstate.Job, t jobstate.Transition) {
		if t.To == "done" {
			j.done.Add(1)
		}
	}))
	if err != nil {
		return nil, err
	}
	return j, nil
}

func (j *js) close() {
	if j.closer != nil {
		j.closer()
	}
}

func (j *js) insertBatch(ctx context.Context, n, per int) error {
	batch := make([]jobstate.NewJob, per)
	for i := range batch {
		batch[i] = jobstate.NewJob{Machine: machine}
	}
	for n > 0 {
		k := min(n, per)
		if _, err := j.eng.CreateMany(ctx, batch[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (j *js) insertLatency(ctx context.Context, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := j.eng.Create(ctx, jobstate.NewJob{Machine: machine}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func (j *js) claimLatency(ctx context.Context, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := j.eng.Claim(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "bench"}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// work runs the worker runtime with the given handlers until n jobs are
// done, and returns the time taken.
func (j *js) work(ctx context.Context, workers, n int) (time.Duration, error) {
	j.done.Store(0)
	noop := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, nil
	})
	w, err := worker.New(j.eng, worker.Handle(machine, noop, workers), worker.WithPollInterval(20*time.Millisecond),
		worker.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	return timed(ctx, n, w.Run, func() int64 { return j.done.Load() })
}

// timed runs run until done() reaches n, and returns the time taken.
func timed(ctx context.Context, n int, run func(context.Context) error, done func() int64) (time.Duration, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	t0 := time.Now()
	go func() { errc <- run(rctx) }()
	last, lastAt := int64(0), time.Now()
	for done() < int64(n) {
		select {
		case err := <-errc:
			return 0, fmt.Errorf("stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
		if d := done(); d != last {
			last, lastAt = d, time.Now()
		} else if time.Since(lastAt) > 30*time.Second {
			cancel()
			<-errc
			return 0, fmt.Errorf("no job done for 30 s after %d of %d", d, n)
		}
	}
	d := time.Since(t0)
	cancel()
	<-errc
	return d, nil
}

// noopArgs is river's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done.Add(1)
	return nil
}

// rv is river on its SQLite driver, in a file of its own.
type rv struct {
	db     *sql.DB
	driver *riversqlite.Driver
	ins    *river.Client[*sql.Tx]
	done   atomic.Int64
}

var quiet = slog.New(slog.DiscardHandler)

// newRiver opens river's SQLite driver on a new file with river's
// recommended settings: WAL, a busy timeout and one connection.
func newRiver(ctx context.Context, file string) (*rv, error) {
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	driver := riversqlite.New(db)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		db.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		db.Close()
		return nil, err
	}
	ins, err := river.NewClient(driver, &river.Config{Logger: quiet})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &rv{db: db, driver: driver, ins: ins}, nil
}

func (r *rv) close() { r.db.Close() }

func (r *rv) insertBatch(ctx context.Context, n, per int) error {
	for n > 0 {
		k := min(n, per)
		p := make([]river.InsertManyParams, k)
		for i := range p {
			p[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := r.ins.InsertMany(ctx, p); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (r *rv) insertLatency(ctx context.Context, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := r.ins.Insert(ctx, noopArgs{}, nil); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// claimLatency: river has no call that claims one job.
func (r *rv) claimLatency(context.Context, int) ([]time.Duration, error) {
	return nil, errUnsupported
}

func (r *rv) work(ctx context.Context, workers, n int) (time.Duration, error) {
	r.done.Store(0)
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{done: &r.done})
	client, err := river.NewClient(r.driver, &river.Config{
		Logger:            quiet,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		return 0, err
	}
	run := func(ctx context.Context) error {
		if err := client.Start(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return client.Stop(sctx)
	}
	return timed(ctx, n, run, func() int64 { return r.done.Load() })
}
