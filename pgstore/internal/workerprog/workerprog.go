// Package workerprog is the setup shared by the worker programs of
// pgstore's multi-process tests (crashworker, crashruntime, runtimeworker,
// periodicworker): the engine on a store over a pool of the test's
// database, the commit effect that inserts the job's id into the test's
// table in the store's transaction, the runtime's logger, and the two
// signals that stop a runtime (graceful, then hard).
package workerprog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/worker"
)

// Env is an engine running one machine on pgstore, with the pool and the
// store under it.
type Env struct {
	Pool   *pgxpool.Pool
	Store  *pgstore.Store
	Engine *jobstate.Engine
}

// Open returns an engine running spec's machine on a pgstore store with
// opts over a pool on url, of at most maxConns connections (the pool's
// default when 0). It does not connect: the pool connects when first
// used. Close the Env when done; on an error nothing is left open.
func Open(ctx context.Context, url string, maxConns int32, opts pgstore.Options, spec jobstate.Spec) (*Env, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening the pool: %w", err)
	}
	store, err := pgstore.New(pool, opts)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	e := &Env{Pool: pool, Store: store}
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("the machine %s: %w", spec.Name, err)
	}
	if e.Engine, err = jobstate.New(store, jobstate.WithMachines(def)); err != nil {
		e.Close()
		return nil, fmt.Errorf("the engine: %w", err)
	}
	return e, nil
}

// Close closes the store, then the pool.
func (e *Env) Close() {
	e.Store.Close()
	e.Pool.Close()
}

// InsertEffect returns the commit effect that inserts the job's id into
// table (a column job) in the store's transaction, so that the row is
// written if and only if the commit is. Run outside the store's
// transaction it fails.
func InsertEffect(table string) jobstate.EffectFunc {
	return func(ctx context.Context, j jobstate.Job) error {
		tx, ok := pgstore.Tx(ctx)
		if !ok {
			return errors.New("the effect runs outside the store's transaction")
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (job) VALUES ($1)", j.ID); err != nil {
			return fmt.Errorf("inserting the effect row: %w", err)
		}
		return nil
	}
}

// LogOptions returns, when on, the option that has the runtime log at
// Info level to standard error, each line naming the process's id; when
// off, none.
func LogOptions(on bool) []worker.Option {
	if !on {
		return nil
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return []worker.Option{worker.WithLogger(logger.With("pid", os.Getpid()))}
}

// Signals registers SIGINT and SIGTERM for the rest of the process's life
// and returns the channel they arrive on, with room for two, so that no
// signal, not even one arriving while the process starts or exits, ends
// it by the default action. Call it first thing.
func Signals() <-chan os.Signal {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return sigs
}

// StopOnSignals waits, in a goroutine of its own, for a signal on sigs or
// a value on also (nil: none), then calls cancel, which ends the context
// given to w.Run and so starts its graceful shutdown; on the next signal
// it calls w.Stop, a hard stop.
func StopOnSignals(sigs <-chan os.Signal, also <-chan error, cancel context.CancelFunc, w *worker.Worker) {
	go func() {
		select {
		case <-sigs:
		case <-also:
		}
		cancel()
		<-sigs
		w.Stop()
	}()
}
