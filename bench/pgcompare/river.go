package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is river's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started chan time.Time // nil: do not report
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	if w.started != nil {
		w.started <- time.Now()
	}
	return nil
}

// rv is river on its own database of the cluster.
type rv struct {
	pool   *pgxpool.Pool
	driver *riverpgxv5.Driver
	ins    *river.Client[pgx.Tx] // an insert-only client
	// worked counts the jobs the work section's runs finished, for the
	// server's statement time per job (-statements).
	worked int64
}

var quiet = slog.New(slog.DiscardHandler)

func newRV(ctx context.Context, url string, conns int32) (*rv, error) {
	pool, err := newPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, err
	}
	ins, err := river.NewClient(driver, &river.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}
	return &rv{pool: pool, driver: driver, ins: ins}, nil
}

func (r *rv) close() { r.pool.Close() }

func (r *rv) reset(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

func (r *rv) analyze(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "ANALYZE river_job")
	return err
}

func params(n int) []river.InsertManyParams {
	p := make([]river.InsertManyParams, n)
	for i := range p {
		p[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	return p
}

// load empties the queue and inserts n available jobs (insertFast,
// 5,000 a call), then analyzes the table: a throughput run's starting
// point.
func (r *rv) load(ctx context.Context, n int) error {
	if err := r.reset(ctx); err != nil {
		return err
	}
	if err := r.insertFast(ctx, n, 5000); err != nil {
		return err
	}
	return r.analyze(ctx)
}

// insertFast inserts n jobs with InsertManyFast (COPY), per per call.
func (r *rv) insertFast(ctx context.Context, n, per int) error {
	for n > 0 {
		k := min(n, per)
		if _, err := r.ins.InsertManyFast(ctx, params(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// insertMany inserts n jobs with InsertMany (one multi-row INSERT), per
// per call.
func (r *rv) insertMany(ctx context.Context, n, per int) error {
	for n > 0 {
		k := min(n, per)
		if _, err := r.ins.InsertMany(ctx, params(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// keyedArgs is river's no-op job unique by its key.
type keyedArgs struct {
	Key string `json:"key"`
}

func (keyedArgs) Kind() string { return "keyed" }

func (keyedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// insertKeyed inserts n unique jobs with InsertMany, per per call, each
// under a key of its own.
func (r *rv) insertKeyed(ctx context.Context, n, per int) error {
	for i := 0; i < n; i += per {
		p := make([]river.InsertManyParams, min(per, n-i))
		for k := range p {
			p[k] = river.InsertManyParams{Args: keyedArgs{Key: fmt.Sprint("k", i+k)}}
		}
		if _, err := r.ins.InsertMany(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (r *rv) insertOne(ctx context.Context) error {
	_, err := r.ins.Insert(ctx, noopArgs{}, nil)
	return err
}

// client returns a working client: MaxWorkers workers, river's benchmark
// settings (fetch cooldown 2 ms, poll interval 20 ms unless poll is set).
func (r *rv) client(workers int, poll time.Duration, w *noopWorker) (*river.Client[pgx.Tx], error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, w)
	return river.NewClient(r.driver, &river.Config{
		Logger:            quiet,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: poll,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
}

// work runs a client with workers until target jobs are completed (as its
// completion events say), and returns the time taken.
func (r *rv) work(ctx context.Context, workers, target int) (time.Duration, error) {
	c, err := r.client(workers, 20*time.Millisecond, &noopWorker{})
	if err != nil {
		return 0, err
	}
	events, cancelSub := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: target + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	t0 := time.Now()
	if err := c.Start(ctx); err != nil {
		return 0, err
	}
	for n := 0; n < target; {
		select {
		case <-events:
			n++
		case <-time.After(time.Minute):
			return 0, fmt.Errorf("river: %d of %d jobs completed, then nothing for a minute", n, target)
		}
	}
	d := time.Since(t0)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		return 0, err
	}
	return d, nil
}

// claimLatency locks n available jobs one at a time with river's own
// fetch statement (JobGetAvailable, what its producers run) and returns
// each call's duration.
func (r *rv) claimLatency(ctx context.Context, n int) ([]time.Duration, error) {
	exec := r.driver.GetExecutor()
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		now := time.Now()
		t0 := time.Now()
		res, err := exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
			ClientID: "bench", MaxAttemptedBy: 100, MaxToLock: 1, Now: &now, Queue: river.QueueDefault,
		})
		if err != nil {
			return nil, err
		}
		if len(res.Jobs) != 1 {
			return nil, fmt.Errorf("river: claimed %d jobs, want 1", len(res.Jobs))
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// notifyLatency runs a client (polling every poll) on an empty queue and
// inserts n jobs one at a time, pause apart; it returns the time from each
// Insert call to its worker starting.
func (r *rv) notifyLatency(ctx context.Context, n int, pause, poll time.Duration) ([]time.Duration, error) {
	w := &noopWorker{started: make(chan time.Time, 1)}
	c, err := r.client(10, poll, w)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = c.Stop(sctx)
	}()
	time.Sleep(500 * time.Millisecond)
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		time.Sleep(pause)
		t0 := time.Now()
		if _, err := c.Insert(ctx, noopArgs{}, nil); err != nil {
			return nil, err
		}
		select {
		case t1 := <-w.started:
			out = append(out, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("river: job %d not worked within 10 s", i)
		}
	}
	return out, nil
}

// countWorked adds the jobs finished in the database to r.worked.
func (r *rv) countWorked(ctx context.Context) error {
	var n int64
	if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n); err != nil {
		return err
	}
	r.worked += n
	return nil
}
