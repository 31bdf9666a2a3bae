package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, in pure Go

	"github.com/jobstate/jobstate"
)

// Options configure a Store.
type Options struct {
	// Readers bounds the connections that serve reads (Get, History,
	// List, Due, …) at once, beside the one writer connection; 4 when
	// zero.
	Readers int
	// BusyTimeout is how long a statement waits for a lock another
	// process holds on the file (SQLite's busy_timeout) before it fails
	// with a *jobstate.UnavailableError matching ErrBusy; 10 seconds when
	// zero. Within one process the store never waits for such a lock:
	// its writes take turns on its one writer connection.
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting: "FULL" (the default)
	// makes every committed write survive a power loss or an operating
	// system crash; "NORMAL" keeps every committed write across a crash of
	// the process, but may lose the last ones to a power loss, and a
	// commit does not wait for the disk. The database is never corrupted
	// either way.
	Synchronous string
	// MaxPageCount, when above 0, bounds the database file to that many
	// pages (SQLite's max_page_count pragma; a page is 4096 bytes unless
	// the file was made with another size): a write that would grow it
	// further fails with a *jobstate.UnavailableError matching
	// ErrDiskFull, as on a full disk, and writes nothing.
	MaxPageCount int64
}

func (o Options) readers() int {
	if o.Readers <= 0 {
		return 4
	}
	return o.Readers
}

func (o Options) busyTimeout() time.Duration {
	if o.BusyTimeout <= 0 {
		return 10 * time.Second
	}
	return o.BusyTimeout
}

func (o Options) synchronous() (string, error) {
	switch s := strings.ToUpper(o.Synchronous); s {
	case "":
		return "FULL", nil
	case "FULL", "NORMAL":
		return s, nil
	default:
		return "", fmt.Errorf("%w: sqlitestore: synchronous %q: want FULL or NORMAL", jobstate.ErrInvalidArgument, o.Synchronous)
	}
}

// Store is a jobstate.Store in one SQLite database file, through a pure-Go
// driver (modernc.org/sqlite: no C toolchain is needed), with every
// optional capability of jobstate: Counter, Pruner, BatchClaimer,
// BatchCreator, Notifier (within the process), Lister and KeyLimiter.
//
// The database runs in WAL mode. Every write (Create, Update, ClaimNext,
// ClaimBatch, CreateBatch, Prune) is one transaction on the store's one
// writer connection, begun IMMEDIATE, so writes take turns: the engine's
// function runs inside the transaction, with jobstate's savepoints, and
// effects that write through Tx commit with the job or not at all. Reads
// run on a pool of reader connections, which see the last committed
// version and never wait for a write. A store call whose context carries
// a transaction (WithTx, or the context the store gives a function) joins
// it in a savepoint instead.
//
// Since the writer is one connection, a function the store calls must
// make its own store calls with the context it was given (as the engine
// does), which joins them to the running transaction: a call with
// another context would wait for the writer the function holds. The same
// holds for a caller's transaction from Begin until it ends.
//
// Several processes may open the same file: SQLite serializes their
// writes, each waiting up to Options.BusyTimeout; notifications reach
// only the subscribers of the process that wrote.
//
// Errors: a file that cannot be written (a full disk or
// Options.MaxPageCount reached, a read-only file or directory, an I/O
// error, a lock held past BusyTimeout) gives a *jobstate.UnavailableError
// (jobstate.ErrUnavailable) wrapping ErrDiskFull, ErrReadOnly, ErrIO or
// ErrBusy and the driver's error; the transaction is rolled back and the
// database left as it was. Its MayHaveApplied is set only for an I/O
// error during COMMIT.
type Store struct {
	path string
	opts Options
	w    *sql.DB // the writer: one connection
	r    *sql.DB // the readers
	subs subscriptions
}

var (
	_ jobstate.Store        = (*Store)(nil)
	_ jobstate.Counter      = (*Store)(nil)
	_ jobstate.Pruner       = (*Store)(nil)
	_ jobstate.BatchClaimer = (*Store)(nil)
	_ jobstate.BatchCreator = (*Store)(nil)
	_ jobstate.Notifier     = (*Store)(nil)
	_ jobstate.Lister       = (*Store)(nil)
)

// Open opens the database file at path, creating it if it does not exist,
// puts it in WAL mode, brings its schema to SchemaVersion (Migrate) and
// returns a store on it. Close it when done.
//
// An empty path, or options out of range, are refused with
// jobstate.ErrInvalidArgument. A file that cannot be opened, created or
// migrated (a read-only directory, a full disk, a file that is not a
// database) gives a *jobstate.UnavailableError, as the store's methods
// do, or for a file written by a newer release ErrSchemaTooNew.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: sqlitestore: empty path", jobstate.ErrInvalidArgument)
	}
	if opts.Readers < 0 || opts.BusyTimeout < 0 || opts.MaxPageCount < 0 {
		return nil, fmt.Errorf("%w: sqlitestore: negative option", jobstate.ErrInvalidArgument)
	}
	syncMode, err := opts.synchronous()
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: opts}
	pragmas := []string{
		fmt.Sprintf("busy_timeout(%d)", opts.busyTimeout().Milliseconds()),
		"journal_mode(WAL)",
		"synchronous(" + syncMode + ")",
		"foreign_keys(OFF)",
	}
	if opts.MaxPageCount > 0 {
		pragmas = append(pragmas, fmt.Sprintf("max_page_count(%d)", opts.MaxPageCount))
	}
	s.w, err = sql.Open("sqlite", dsn(path, "immediate", pragmas))
	if err != nil {
		return nil, unavailable("open", err, false)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if _, err := Migrate(ctx, s.w); err != nil {
		s.w.Close()
		return nil, err
	}
	readPragmas := []string{
		fmt.Sprintf("busy_timeout(%d)", opts.busyTimeout().Milliseconds()),
		"query_only(1)",
	}
	s.r, err = sql.Open("sqlite", dsn(path, "deferred", readPragmas))
	if err != nil {
		s.w.Close()
		return nil, unavailable("open", err, false)
	}
	s.r.SetMaxOpenConns(opts.readers())
	s.r.SetMaxIdleConns(opts.readers())
	s.r.SetConnMaxIdleTime(0)
	if err := s.r.PingContext(ctx); err != nil {
		s.Close()
		return nil, s.fail(ctx, "open", err)
	}
	return s, nil
}

// dsn is the driver's name of the file at path, with the transaction
// mode and pragmas every connection starts with.
func dsn(path, txlock string, pragmas []string) string {
	q := url.Values{}
	q.Set("_txlock", txlock)
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Close ends every subscription and closes the store's connections.
// Calls made after it fail.
func (s *Store) Close() error {
	s.subs.close()
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// DB returns the store's writer: a database/sql handle of one connection
// on the store's file. A program's own tables live in the same file, and
// a transaction begun on it (Begin) can hold the program's writes and the
// store's together. Anything else run on it waits for the store's writes
// and holds them up: keep its use short.
func (s *Store) DB() *sql.DB { return s.w }

// Begin begins an IMMEDIATE transaction on the store's writer, for
// WithTx: the program's writes and the store's calls made with the
// context WithTx returns commit or roll back together. Until it ends,
// every other write of the store waits for it.
func (s *Store) Begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, "begin", err)
	}
	return tx, nil
}

// querier is what a read runs on: the readers, or a joined transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// q returns what a read with ctx runs on: the transaction ctx carries,
// so that a function sees its own transaction's writes, or the readers.
func (s *Store) q(ctx context.Context) (querier, error) {
	st := joinedTx(ctx)
	if st == nil {
		return readQ{s}, nil
	}
	if st.tx == nil {
		return nil, errNilTx
	}
	return txQ{s, st.tx}, nil
}
