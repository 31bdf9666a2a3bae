package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/pgstore"
)

// envMaxConns is the size of the pool of an Env's store (NewEnv): enough
// for a worker's handlers to commit at once and for the test's own
// queries beside them.
const envMaxConns = 8

// NewEnv returns a jobstatetest.Env whose engine runs on a fresh
// pgstore.Store, and that store, for a test of handlers on PostgreSQL: a
// handler's commit effect can write the service's own rows in the store's
// transaction (pgstore.Tx) and the test can check them. The Env is set up
// as jobstatetest.NewWithStore sets it up (its manual Clock from
// jobstatetest.Epoch drives the engine and its workers; pgstore keeps the
// instants the engine gives it and reads no clock), with the engine
// options given.
//
// The store is in a schema of its own, freshly migrated (its name is
// store.Schema()), on a pool of its own (8 connections) whose connections
// have that schema, then public, as their search_path: the test creates
// its tables through store.Pool() under the unqualified names the handler
// uses, and the handler's statements in the store's transaction reach
// them. When t ends, the store and its pool are closed and the schema is
// dropped with everything in it; a worker the test started must have
// stopped by then.
//
// The test binary must call Main from TestMain. When no server can be had
// the test is skipped, or fails when JOBSTATE_REQUIRE_PG=1 (Unavailable).
func NewEnv(t testing.TB, opts ...jobstate.Option) (*jobstatetest.Env, *pgstore.Store) {
	t.Helper()
	return NewEnvWith(t, pgstore.Options{}, opts...)
}

// NewEnvWith is NewEnv with store options (group commit, a commit
// timeout, ...); sopts.Schema is ignored.
func NewEnvWith(t testing.TB, sopts pgstore.Options, opts ...jobstate.Option) (*jobstatetest.Env, *pgstore.Store) {
	t.Helper()
	c, _ := Shared(t)
	sopts.Schema = Schema(t) // dropped when t ends, after the cleanups below
	pool, err := newSearchPool(context.Background(), c.URL, envMaxConns, sopts.Schema)
	if err != nil {
		t.Fatalf("pgtest: the pool of an Env: %v", err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.New(pool, sopts)
	if err != nil {
		t.Fatalf("pgtest: the store of an Env: %v", err)
	}
	t.Cleanup(store.Close)
	return jobstatetest.NewWithStore(t, store, opts...), store
}

// newSearchPool opens a pool of at most maxConns connections on url whose
// search_path is schema, then public.
func newSearchPool(ctx context.Context, url string, maxConns int32, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize() + ", public"
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return p, nil
}
