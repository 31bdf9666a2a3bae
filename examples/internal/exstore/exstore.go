// Package exstore opens the store the example programs run on: the
// in-memory store (memstore), PostgreSQL (pgstore) on the database a flag
// or JOBSTATE_DATABASE_URL names, or, when neither names one, on a
// throwaway cluster started for the run (pgtest.Start) and removed at
// exit, or SQLite (sqlitestore) in a file of a temporary directory
// removed at exit, or at the path a flag names, kept.
//
// Every example registers the same three flags:
//
//	-store memory|postgres|sqlite    the store (default memory)
//	-database-url URL                the PostgreSQL database (default $JOBSTATE_DATABASE_URL)
//	-db PATH                         the SQLite file (default: in a temporary directory)
//
// On SQLite each store a program asks for is a file of its own: PATH for
// the first, and PATH with "-2", "-3", … before its extension for the
// next ones. A file named by -db must not exist yet: the examples start
// from empty stores.
//
// On PostgreSQL each store a program asks for lives in a schema of its
// own, migrated with pgstore.Migrate, so that the example's runs do not
// see each other's jobs (and ids counted from 1 do not collide); the
// schemas are dropped when the Backend closes.
package exstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/sqlitestore"
)

// The values of the -store flag.
const (
	Memory   = "memory"
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Config is what the flags say.
type Config struct {
	// Store is Memory, Postgres or SQLite.
	Store string
	// DatabaseURL is the PostgreSQL database; empty with Postgres starts
	// a throwaway cluster.
	DatabaseURL string
	// DB is the SQLite file of the first store; empty with SQLite puts
	// the files in a temporary directory, removed at exit.
	DB string
}

// Register adds -store, -database-url and -db to fs, filling c.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Store, "store", Memory, "the store to run on: memory, postgres or sqlite")
	fs.StringVar(&c.DatabaseURL, "database-url", os.Getenv(pgtest.EnvURL),
		"the PostgreSQL database of -store postgres (default $"+pgtest.EnvURL+"; empty: start a throwaway cluster)")
	fs.StringVar(&c.DB, "db", "",
		"the SQLite file of -store sqlite, which must not exist yet (empty: a file in a temporary directory)")
}

// Validate reports a -store value that is not memory, postgres or
// sqlite.
func (c Config) Validate() error {
	switch c.Store {
	case Memory, Postgres, SQLite:
		return nil
	default:
		return fmt.Errorf("-store %q: want %s, %s or %s", c.Store, Memory, Postgres, SQLite)
	}
}

// Parse parses a program's arguments: the store flags, and whatever
// flags register adds (when not nil). A bad flag or argument is printed
// to stderr with the usage and returned; flag.ErrHelp after -h.
func Parse(name string, args []string, stderr io.Writer, register func(*flag.FlagSet)) (Config, error) {
	var c Config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs)
	if register != nil {
		register(fs)
	}
	if err := fs.Parse(args); err != nil {
		return c, err // printed by fs
	}
	err := c.Validate()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		fs.Usage()
	}
	return c, err
}

// ParseOrExit is Parse on os.Args[1:] that exits the program on an
// error: with status 2, or 0 after -h.
func ParseOrExit(name string, register func(*flag.FlagSet)) Config {
	c, err := Parse(name, os.Args[1:], os.Stderr, register)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(2)
	}
	return c
}

// With opens the backend cfg names, calls f with it, and closes it.
func With(ctx context.Context, cfg Config, f func(*Backend) error) (err error) {
	b, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	return f(b)
}

// Main is an example program's main: it parses the flags (ParseOrExit),
// opens the backend and calls f with it, with a context that ends on
// SIGINT or SIGTERM, closes the backend (stopping a throwaway cluster
// even when f failed or was interrupted), and exits 1 on an error.
// SIGPIPE is ignored, so that a closed standard output (go run … | head)
// ends in write errors rather than in a kill that would leave the cluster
// running.
func Main(name string, register func(*flag.FlagSet), f func(ctx context.Context, b *Backend) error) {
	cfg := ParseOrExit(name, register)
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := With(ctx, cfg, func(b *Backend) error { return f(ctx, b) })
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Backend makes the stores of one run of an example.
type Backend struct {
	kind    string
	cluster *pgtest.Cluster // a throwaway cluster started by Open, or nil
	pool    *pgxpool.Pool

	// SQLite: the first store's file, and the temporary directory Open
	// made for it (removed by Close), or "".
	dbPath, tmpDir string

	mu      sync.Mutex
	n       int
	schemas []string
	stores  []*pgstore.Store
	files   []*sqlitestore.Store
}

// Open returns the backend c names: for PostgreSQL it connects (starting
// a throwaway cluster when c.DatabaseURL is empty). Close it at exit.
func Open(ctx context.Context, c Config) (*Backend, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := &Backend{kind: c.Store}
	switch c.Store {
	case Memory:
		return b, nil
	case SQLite:
		if c.DB != "" {
			b.dbPath = c.DB
			return b, nil
		}
		dir, err := os.MkdirTemp("", "jobstate-example-")
		if err != nil {
			return nil, fmt.Errorf("exstore: making a temporary directory: %w", err)
		}
		b.tmpDir, b.dbPath = dir, filepath.Join(dir, "jobs.db")
		return b, nil
	}
	url := c.DatabaseURL
	if url == "" {
		// Settings.Own: the URL is empty on purpose, whatever the
		// environment says.
		cl, err := pgtest.Start(ctx, pgtest.Settings{Own: true, Params: map[string]string{"synchronous_commit": "off"}})
		if err != nil {
			return nil, fmt.Errorf("exstore: starting a throwaway PostgreSQL cluster: %w", err)
		}
		b.cluster = cl
		url = cl.URL
	}
	pool, err := pgtest.NewPool(ctx, url, 16)
	if err != nil {
		b.stopCluster()
		return nil, fmt.Errorf("exstore: connecting to PostgreSQL: %w", err)
	}
	b.pool = pool
	return b, nil
}

// Kind returns Memory, Postgres or SQLite.
func (b *Backend) Kind() string { return b.kind }

// Describe names the store for a program's output: "the in-memory
// store", "PostgreSQL" or "SQLite".
func (b *Backend) Describe() string {
	switch b.kind {
	case Memory:
		return "the in-memory store"
	case SQLite:
		return "SQLite"
	}
	return "PostgreSQL"
}

// NewStore returns an empty store: a new memstore, a pgstore in a new
// schema of its own, migrated, or a sqlitestore in a new file.
func (b *Backend) NewStore(ctx context.Context) (jobstate.Store, error) {
	switch b.kind {
	case Memory:
		return memstore.New(), nil
	case SQLite:
		return b.newFile(ctx)
	}
	b.mu.Lock()
	b.n++
	name := fmt.Sprintf("jobstate_example_%d_%d", os.Getpid(), b.n)
	b.schemas = append(b.schemas, name)
	b.mu.Unlock()
	opts := pgstore.Options{Schema: name}
	if _, err := pgstore.Migrate(ctx, b.pool, opts); err != nil {
		return nil, fmt.Errorf("exstore: migrating schema %s: %w", name, err)
	}
	s, err := pgstore.New(b.pool, opts)
	if err != nil {
		return nil, fmt.Errorf("exstore: %w", err)
	}
	b.mu.Lock()
	b.stores = append(b.stores, s)
	b.mu.Unlock()
	return s, nil
}

// newFile returns a sqlitestore in the backend's next file, which must
// not exist yet.
func (b *Backend) newFile(ctx context.Context) (jobstate.Store, error) {
	b.mu.Lock()
	b.n++
	path := b.dbPath
	if b.n > 1 {
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "-" + strconv.Itoa(b.n) + ext
	}
	b.mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("exstore: %s exists: the examples start from an empty store", path)
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		return nil, fmt.Errorf("exstore: opening %s: %w", path, err)
	}
	b.mu.Lock()
	b.files = append(b.files, s)
	b.mu.Unlock()
	return s, nil
}

// Close closes the stores, drops their schemas (on a database named by
// URL; a throwaway cluster is removed whole), stops the cluster Open
// started, and removes the temporary directory of SQLite's files.
func (b *Backend) Close() error {
	switch b.kind {
	case Memory:
		return nil
	case SQLite:
		b.mu.Lock()
		files := b.files
		b.files = nil
		b.mu.Unlock()
		var errs []error
		for _, s := range files {
			errs = append(errs, s.Close())
		}
		if b.tmpDir != "" {
			errs = append(errs, os.RemoveAll(b.tmpDir))
		}
		return errors.Join(errs...)
	}
	b.mu.Lock()
	stores, schemas := b.stores, b.schemas
	b.stores, b.schemas = nil, nil
	b.mu.Unlock()
	for _, s := range stores {
		s.Close()
	}
	var errs []error
	if b.cluster == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range schemas {
			if _, err := b.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
				errs = append(errs, fmt.Errorf("exstore: dropping schema %s: %w", name, err))
			}
		}
	}
	b.pool.Close()
	if err := b.stopCluster(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (b *Backend) stopCluster() error {
	if b.cluster == nil {
		return nil
	}
	if err := b.cluster.Stop(); err != nil {
		return fmt.Errorf("exstore: stopping the throwaway cluster: %w", err)
	}
	return nil
}
