package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/worker"
)

// machine is the benchmark's machine: the work machine of
// internal/machines, queued → running → done.
const machine = "bench"

func benchSpec() jobstate.Spec { return machines.WorkSpec(machine) }

// js is jobstate on one database of the cluster: engine, pgstore and a
// counter of finished jobs (an observer, told after each commit).
type js struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	eng   *jobstate.Engine
	def   *jobstate.Definition
	done  atomic.Int64
	// worked counts the jobs the work section's runs finished, for the
	// server's statement time per job (-statements).
	worked int64
}

const jsSchema = "jobstate"

func newJS(ctx context.Context, url string, conns int32, group int) (*js, error) {
	pool, err := newPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: jsSchema}); err != nil {
		return nil, err
	}
	store, err := pgstore.New(pool, pgstore.Options{Schema: jsSchema, GroupCommit: group})
	if err != nil {
		return nil, err
	}
	def, err := jobstate.NewDefinition(benchSpec())
	if err != nil {
		return nil, err
	}
	j := &js{pool: pool, store: store, def: def}
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
	j.store.Close()
	j.pool.Close()
}

func (j *js) reset(ctx context.Context) error {
	s := jsSchema + "."
	_, err := j.pool.Exec(ctx, "TRUNCATE "+s+"jobs, "+s+"transitions, "+s+"effects, "+s+"idempotency_keys")
	return err
}

func (j *js) analyze(ctx context.Context) error {
	_, err := j.pool.Exec(ctx, "ANALYZE "+jsSchema+".jobs")
	return err
}

// load empties the store and creates n ready jobs (createBatch, 5,000
// a call), then analyzes the jobs: a throughput run's starting point.
func (j *js) load(ctx context.Context, n int) error {
	if err := j.reset(ctx); err != nil {
		return err
	}
	if err := j.createBatch(ctx, n, 5000); err != nil {
		return err
	}
	return j.analyze(ctx)
}

// createBatch creates n jobs with Engine.CreateMany (pgstore's
// CreateBatch: one transaction and COPY), in calls of per jobs.
func (j *js) createBatch(ctx context.Context, n, per int) error {
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

// createTx creates n jobs with Engine.Create, per of them in each
// transaction of the caller (pgstore.WithTx).
func (j *js) createTx(ctx context.Context, n, per int) error {
	for n > 0 {
		k := min(n, per)
		tx, err := j.pool.Begin(ctx)
		if err != nil {
			return err
		}
		tctx := pgstore.WithTx(ctx, tx)
		for i := 0; i < k; i++ {
			if _, err := j.eng.Create(tctx, jobstate.NewJob{Machine: machine}); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// createManyTx creates n jobs with Engine.CreateMany, per of them in
// each transaction of the caller (pgstore.WithTx): one COPY of the jobs
// and one of their history, in a savepoint of the caller's transaction.
func (j *js) createManyTx(ctx context.Context, n, per int) error {
	batch := make([]jobstate.NewJob, per)
	for i := range batch {
		batch[i] = jobstate.NewJob{Machine: machine}
	}
	for n > 0 {
		k := min(n, per)
		tx, err := j.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := j.eng.CreateMany(pgstore.WithTx(ctx, tx), batch[:k]); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// createKeyed creates n jobs with Engine.CreateMany, per per call, each
// under an idempotency key of its own.
func (j *js) createKeyed(ctx context.Context, n, per int) error {
	for i := 0; i < n; i += per {
		batch := make([]jobstate.NewJob, min(per, n-i))
		for k := range batch {
			batch[k] = jobstate.NewJob{Machine: machine, Key: fmt.Sprint("k", i+k)}
		}
		if _, err := j.eng.CreateMany(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

func (j *js) createOne(ctx context.Context) error {
	_, err := j.eng.Create(ctx, jobstate.NewJob{Machine: machine})
	return err
}

// work runs the worker runtime with concurrency workers until target
// jobs are done, and returns the time taken.
func (j *js) work(ctx context.Context, workers, ahead, target int) (time.Duration, error) {
	j.done.Store(0)
	noop := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		// The commit's effect writes nothing (it runs in the commit's
		// transaction, in a savepoint that is never sent).
		return jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error { return nil }}, nil
	})
	// The runtime's warnings and errors (refused commits, failed claims)
	// go to standard error, so that a run that goes wrong says why.
	warnings := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []worker.Option{worker.Handle(machine, noop, workers), worker.WithPollInterval(20 * time.Millisecond), worker.WithLogger(warnings)}
	if ahead >= 0 {
		opts = append(opts, worker.WithCommitsAhead(ahead))
	}
	w, err := worker.New(j.eng, opts...)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(rctx) }()
	last, lastAt := int64(0), time.Now()
	for j.done.Load() < int64(target) {
		select {
		case err := <-errc:
			return 0, fmt.Errorf("worker stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
		if n := j.done.Load(); n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > stallAfter {
			cancel()
			<-errc
			return 0, fmt.Errorf("no job done for %v after %d of %d: jobs by state: %s", stallAfter, n, target, j.states(ctx))
		}
	}
	d := time.Since(t0)
	cancel()
	<-errc
	return d, nil
}

// countWorked adds the jobs finished in the database to j.worked.
func (j *js) countWorked(ctx context.Context) error {
	var n int64
	if err := j.pool.QueryRow(ctx, "SELECT count(*) FROM "+jsSchema+".jobs WHERE kind = 'terminal'").Scan(&n); err != nil {
		return err
	}
	j.worked += n
	return nil
}

// stallAfter is how long a run may go without a job done before it is
// reported as stalled.
const stallAfter = 30 * time.Second

// states returns the number of jobs in each state, for a stall's report.
func (j *js) states(ctx context.Context) string {
	rows, err := j.pool.Query(ctx, "SELECT state, count(*) FROM "+jsSchema+".jobs GROUP BY state ORDER BY state")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("%s=%d", st, n))
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return strings.Join(out, " ")
}

// claimLatency claims n jobs one at a time (Engine.Claim) and returns each
// claim's duration.
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

// notifyLatency runs the worker runtime (polling every poll) on an empty
// store and creates n jobs one at a time, pause apart; it returns the
// time from each Create call to its handler starting.
func (j *js) notifyLatency(ctx context.Context, n int, pause, poll time.Duration) ([]time.Duration, error) {
	started := make(chan time.Time, 1)
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		started <- time.Now()
		return jobstate.CommitInput{}, nil
	})
	w, err := worker.New(j.eng, worker.Handle(machine, h, 10), worker.WithPollInterval(poll))
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(rctx) }()
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // subscribed and idle
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		time.Sleep(pause)
		t0 := time.Now()
		if err := j.createOne(ctx); err != nil {
			return nil, err
		}
		select {
		case t1 := <-started:
			out = append(out, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("job %d not claimed within 10 s", i)
		}
	}
	return out, nil
}

// loop runs workers goroutines, each looping Engine.ClaimMany(batch) →
// Engine.Succeed (with an effect that writes nothing), until target jobs
// are done, and returns the time taken.
func (j *js) loop(ctx context.Context, workers, batch, target int) (time.Duration, error) {
	j.done.Store(0)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, workers)
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := jobstate.ClaimRequest{Machine: machine, Worker: fmt.Sprintf("loop-%d", g)}
			fx := func(context.Context, jobstate.Job) error { return nil }
			for rctx.Err() == nil && j.done.Load() < int64(target) {
				cs, err := j.eng.ClaimMany(rctx, req, batch)
				if err != nil {
					if errors.Is(err, jobstate.ErrNoJob) || rctx.Err() != nil {
						time.Sleep(time.Millisecond)
						continue
					}
					errc <- err
					return
				}
				for _, c := range cs {
					if _, err := j.eng.Succeed(rctx, c.Lease, jobstate.CommitInput{Effect: fx}); err != nil {
						if rctx.Err() == nil {
							errc <- err
						}
						return
					}
				}
			}
		}()
	}
	for j.done.Load() < int64(target) {
		select {
		case err := <-errc:
			cancel()
			wg.Wait()
			return 0, err
		case <-time.After(time.Millisecond):
		}
	}
	d := time.Since(t0)
	cancel()
	wg.Wait()
	return d, nil
}

// async runs workers handler slots fed by one claimer (ClaimMany of the
// free slots, as the worker runtime does); a slot is freed when the
// (no-op) handler returns, and the job's Succeed — the exactly-once
// commit — then runs in the background, at most maxCommits at once. It
// stops when target jobs are done and returns the time taken. This is
// the worker runtime with the slot given back before the commit instead
// of after, which river's asynchronous completion amounts to.
func (j *js) async(ctx context.Context, workers, maxCommits, target int) (time.Duration, error) {
	j.done.Store(0)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, workers)
	commits := make(chan struct{}, maxCommits)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	fx := func(context.Context, jobstate.Job) error { return nil }
	req := jobstate.ClaimRequest{Machine: machine, Worker: "async"}
	t0 := time.Now()
	// The claimer adds to wg; it ends before wg.Wait so that no Add races
	// with the Wait.
	claimer := make(chan struct{})
	go func() {
		defer close(claimer)
		for rctx.Err() == nil && j.done.Load() < int64(target) {
			free := workers - len(slots)
			if free == 0 {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			cs, err := j.eng.ClaimMany(rctx, req, free)
			if err != nil {
				if errors.Is(err, jobstate.ErrNoJob) || rctx.Err() != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				select {
				case errc <- err:
				default:
				}
				return
			}
			for _, c := range cs {
				slots <- struct{}{}
				// The handler (no-op) ran: the slot is free, the commit
				// goes on in the background.
				<-slots
				commits <- struct{}{}
				wg.Add(1)
				go func(c jobstate.Claimed) {
					defer wg.Done()
					defer func() { <-commits }()
					if _, err := j.eng.Succeed(rctx, c.Lease, jobstate.CommitInput{Effect: fx}); err != nil && rctx.Err() == nil {
						select {
						case errc <- err:
						default:
						}
					}
				}(c)
			}
		}
	}()
	for j.done.Load() < int64(target) {
		select {
		case err := <-errc:
			cancel()
			<-claimer
			wg.Wait()
			return 0, err
		case <-time.After(time.Millisecond):
		}
	}
	d := time.Since(t0)
	cancel()
	<-claimer
	wg.Wait()
	return d, nil
}
