package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
)

// dbFlags name the database and the store's schema.
type dbFlags struct {
	url     string
	schema  string
	timeout time.Duration
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "database-url", "", "PostgreSQL connection URL or DSN (default $JOBSTATE_DATABASE_URL)")
	fs.StringVar(&f.schema, "schema", "public", "PostgreSQL schema of the store's tables")
	fs.DurationVar(&f.timeout, "connect-timeout", 5*time.Second, "how long to wait for the server to answer a connection")
}

// database is a checked database configuration, not yet connected.
type database struct {
	cfg    *pgxpool.Config
	schema string
	where  string // host:port, for messages
}

// checkDB resolves the URL and checks the flags, sending nothing.
func (a *app) checkDB(f dbFlags) (database, error) {
	url := f.url
	if url == "" {
		url = a.getenv("JOBSTATE_DATABASE_URL")
	}
	if url == "" {
		return database{}, usagef("no database: give --database-url or set JOBSTATE_DATABASE_URL")
	}
	if f.timeout <= 0 || f.timeout > time.Hour {
		return database{}, usagef("--connect-timeout %s is outside (0, 1h]", f.timeout)
	}
	if f.schema == "" || len(f.schema) > 63 || !utf8.ValidString(f.schema) || containsNUL(f.schema) {
		return database{}, usagef("--schema %q is not a PostgreSQL schema name (1 to 63 bytes of UTF-8, no NUL)", f.schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return database{}, usagef("bad database URL: %v", err)
	}
	cfg.ConnConfig.ConnectTimeout = f.timeout
	cfg.MaxConnIdleTime = time.Minute
	where := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	return database{cfg: cfg, schema: f.schema, where: where}, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// connect opens a pool of at most conns connections and checks that the
// server answers.
func (d database) connect(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	cfg := d.cfg.Copy()
	cfg.MaxConns = int32(max(conns, 1))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &exitError{code: exitDatabase, err: fmt.Errorf("cannot reach the database at %s: %w", d.where, err)}
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout+time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &exitError{code: exitDatabase, err: fmt.Errorf("cannot reach the database at %s: %w", d.where, err)}
	}
	return pool, nil
}

// schemaState is what the store's schema holds, by its migration record
// (the table jobstate_migrations, as pgstore.Migrate documents it).
type schemaState struct {
	// version is the highest version applied; 0 when none.
	version int
	applied []appliedMigration
}

type appliedMigration struct {
	version int
	name    string
	at      time.Time
}

// readSchema reads the migration record of schema, without changing it.
func readSchema(ctx context.Context, pool *pgxpool.Pool, schema string) (schemaState, error) {
	table := pgx.Identifier{schema, "jobstate_migrations"}.Sanitize()
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return schemaState{}, dbError("reading the schema's migrations", err)
	}
	if !exists {
		return schemaState{}, nil
	}
	rows, err := pool.Query(ctx, `SELECT version, name, applied_at FROM `+table+` ORDER BY version`)
	if err != nil {
		return schemaState{}, dbError("reading the schema's migrations", err)
	}
	var st schemaState
	for rows.Next() {
		var m appliedMigration
		if err := rows.Scan(&m.version, &m.name, &m.at); err != nil {
			rows.Close()
			return schemaState{}, dbError("reading the schema's migrations", err)
		}
		st.applied = append(st.applied, m)
		st.version = max(st.version, m.version)
	}
	if err := rows.Err(); err != nil {
		return schemaState{}, dbError("reading the schema's migrations", err)
	}
	return st, nil
}

// dbError is a failure of the database (exit 3), or the interruption.
func dbError(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("%s: interrupted", what)}
	}
	return &exitError{code: exitDatabase, err: fmt.Errorf("%s: %w", what, err)}
}

// session is an open store with the engine over it.
type session struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	eng   *jobstate.Engine
	defs  []definitionFile
}

func (s *session) close() {
	s.store.Close()
	s.pool.Close()
}

// open connects, checks that the schema is at pgstore.SchemaVersion, and
// returns the engine over the store with defs' machines.
func (a *app) open(ctx context.Context, db database, defs []definitionFile, conns int) (*session, error) {
	pool, err := db.connect(ctx, conns)
	if err != nil {
		return nil, err
	}
	st, err := readSchema(ctx, pool, db.schema)
	if err != nil {
		pool.Close()
		return nil, err
	}
	switch {
	case st.version == 0:
		pool.Close()
		return nil, refusedf("schema %q holds no jobstate store: run `jobstate migrate up`", db.schema)
	case st.version < pgstore.SchemaVersion:
		pool.Close()
		return nil, refusedf("schema %q is at version %d, this command needs %d: run `jobstate migrate up`", db.schema, st.version, pgstore.SchemaVersion)
	case st.version > pgstore.SchemaVersion:
		pool.Close()
		return nil, refusedf("schema %q is at version %d, newer than this command knows (%d): use a newer jobstate command", db.schema, st.version, pgstore.SchemaVersion)
	}
	store, err := pgstore.New(pool, pgstore.Options{Schema: db.schema})
	if err != nil {
		pool.Close()
		return nil, err
	}
	eng, err := newEngine(store, defs)
	if err != nil {
		store.Close()
		pool.Close()
		return nil, err
	}
	return &session{pool: pool, store: store, eng: eng, defs: defs}, nil
}

// newEngine returns an engine over store with defs' machines.
func newEngine(store jobstate.Store, defs []definitionFile) (*jobstate.Engine, error) {
	list := make([]*jobstate.Definition, len(defs))
	for i, d := range defs {
		list[i] = d.def
	}
	return jobstate.New(store, jobstate.WithMachines(list...))
}
