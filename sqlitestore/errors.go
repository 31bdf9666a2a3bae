package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jobstate/jobstate"
)

// The causes of a *jobstate.UnavailableError from the store: each is
// wrapped beside jobstate.ErrUnavailable and the driver's error, so that
// errors.Is finds all three.
var (
	// ErrDiskFull: the database file could not grow: the disk (or the
	// file system's quota) is full, or Options.MaxPageCount was reached.
	ErrDiskFull = errors.New("sqlitestore: database or disk is full")
	// ErrReadOnly: the database file, its directory or its WAL cannot be
	// written.
	ErrReadOnly = errors.New("sqlitestore: database is read-only")
	// ErrIO: the operating system reported an I/O error, or the file
	// could not be opened.
	ErrIO = errors.New("sqlitestore: I/O error")
	// ErrBusy: another process held a lock on the file for longer than
	// Options.BusyTimeout.
	ErrBusy = errors.New("sqlitestore: database is locked")
	// ErrCorrupt: the file is not a database, or is damaged.
	ErrCorrupt = errors.New("sqlitestore: file is not a sound database")
)

// ErrSchemaTooNew: the database's schema was written by a newer release
// of this package (its recorded version is above SchemaVersion); it is
// left as it is.
var ErrSchemaTooNew = errors.New("sqlitestore: schema is newer than this release")

// sqliteCode returns the primary and extended result codes of a driver
// error, or ok false for any other error.
func sqliteCode(err error) (primary, extended int, ok bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Code() & 0xff, se.Code(), true
}

// cause returns the sentinel an unavailable store's error carries, or
// nil when err is not one.
func cause(err error) error {
	primary, _, ok := sqliteCode(err)
	if !ok {
		return nil
	}
	switch primary {
	case sqlite3.SQLITE_FULL:
		return ErrDiskFull
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return ErrReadOnly
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL:
		return ErrIO
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return ErrBusy
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return ErrCorrupt
	}
	return nil
}

// unavailable wraps a driver error as a *jobstate.UnavailableError when
// it is one of the file's failures; other errors are returned with the
// operation named.
func unavailable(op string, err error, mayHaveApplied bool) error {
	if c := cause(err); c != nil {
		return &jobstate.UnavailableError{Op: op, MayHaveApplied: mayHaveApplied, Err: fmt.Errorf("%w: %w", c, err)}
	}
	return fmt.Errorf("sqlitestore: %s: %w", op, err)
}

// fail maps the error of a store statement: the caller's context error
// when ctx ended (the driver interrupts the statement), a contract error
// for a constraint the database enforces as a second line, an
// *jobstate.UnavailableError for a file that cannot be written, and the
// driver's error, with the operation named, otherwise.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if c := constraint(err); c != nil {
		return fmt.Errorf("%w: %w", c, err)
	}
	return unavailable(op, err, false)
}

// failCommit maps the error of a COMMIT: an I/O error leaves the outcome
// unknown (the commit record may have reached the file); any other
// failure leaves the transaction rolled back.
func (s *Store) failCommit(op string, err error) error {
	primary, _, _ := sqliteCode(err)
	return unavailable(op+": commit", err, primary == sqlite3.SQLITE_IOERR)
}

// constraint returns the contract error of a database constraint that
// failed, or nil.
func constraint(err error) error {
	primary, _, ok := sqliteCode(err)
	if !ok || primary != sqlite3.SQLITE_CONSTRAINT {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "jobs.id"):
		return jobstate.ErrDuplicateJob
	case strings.Contains(msg, "executions.job_id"):
		return jobstate.ErrAlreadyCommitted
	case strings.Contains(msg, "effects.job_id"):
		return jobstate.ErrEffectApplied
	case strings.Contains(msg, "transitions.job_id"):
		return jobstate.ErrVersionConflict
	}
	return jobstate.ErrInvalidArgument
}

// fileError returns the error of a function (or a step of the store's)
// that failed: as it is, unless it failed because the file could not be
// written (a statement of an effect on a full disk), which is wrapped in
// a *jobstate.UnavailableError that still matches err.
func fileError(op string, err error) error {
	var ue *jobstate.UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	if c := cause(err); c != nil && c != ErrCorrupt {
		return &jobstate.UnavailableError{Op: op, Err: fmt.Errorf("%w: %w", c, err)}
	}
	return err
}
