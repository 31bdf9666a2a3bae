package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobstate/jobstate"
)

// phase says where in a call an error arose, which decides whether a
// write whose connection was lost may have been applied.
type phase uint8

const (
	// inTransaction: a statement of a transaction before its COMMIT was
	// sent, a statement of a savepoint of a caller's transaction (which
	// commits nothing itself), or a read. A connection lost here applied
	// nothing: the server rolls back a transaction whose connection dies.
	inTransaction phase = iota
	// atCommit: the answer to a COMMIT, to a batch that holds one, or to
	// a write run outside a transaction (autocommit). A connection lost
	// here leaves the outcome unknown.
	atCommit
)

// fail wraps an error of a statement run inside a transaction before its
// COMMIT was sent, or of a read (see wrapErr).
func (s *Store) fail(ctx context.Context, what string, err error) error {
	return wrapErr(ctx, what, err, inTransaction)
}

// wrapErr is the store's one mapping of a driver error, what naming the
// store operation ("update", "claim", …, optionally followed by ": " and
// the step), ph where the error arose. In order:
//
//   - the server's definite refusals: constraint violations as the
//     store's sentinel errors, bad input (CHECK, out of range, bad
//     datetime or characters, an index row too large) as
//     jobstate.ErrInvalidArgument;
//   - at a COMMIT, once it was sent, any error but the server's definite
//     answer: a lost connection, a connection or shutdown error of the
//     server, a context that ended (the commit's own timeout, or for an
//     autocommit statement the caller's context), or an error of the
//     client reading the answers (pgx reads no further, so the COMMIT's
//     own answer is not known): a *jobstate.UnavailableError with
//     MayHaveApplied set, whatever the caller's context, since the write
//     may have been applied;
//   - the caller's context ended: its error, beside the driver's;
//   - a failure to connect, an error pgconn says happened before anything
//     was sent, a lost connection, a connection or shutdown error of the
//     server, or one of the store's own timeouts: a
//     *jobstate.UnavailableError, MayHaveApplied unset;
//   - anything else, wrapped.
func wrapErr(ctx context.Context, what string, err error, ph phase) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505" && pe.ConstraintName == "jobs_pkey":
			return fmt.Errorf("pgstore: %s: %w: %w", what, jobstate.ErrDuplicateJob, err)
		case pe.Code == "23505" && pe.ConstraintName == "transitions_pkey":
			return fmt.Errorf("pgstore: %s: %w: %w", what, jobstate.ErrVersionConflict, err)
		case pe.Code == "23514" && pe.ConstraintName == "jobs_one_commit":
			return fmt.Errorf("pgstore: %s: %w: %w", what, jobstate.ErrAlreadyCommitted, err)
		case pe.Code == "23505" && pe.ConstraintName == "effects_pkey":
			return fmt.Errorf("pgstore: %s: %w: %w", what, jobstate.ErrEffectApplied, err)
		case pe.Code == "22012":
			// The update guard: no row at the version read under the lock.
			return fmt.Errorf("pgstore: %s: %w: the job changed under its lock: %w", what, jobstate.ErrVersionConflict, err)
		case pe.Code == "23514" || pe.Code == "22003" || pe.Code == "22008" || pe.Code == "22P05" || pe.Code == "22021" || pe.Code == "54000":
			// CHECK, out of range, bad datetime, bad characters, a
			// value too large for an index row.
			return fmt.Errorf("pgstore: %s: %w: %w", what, jobstate.ErrInvalidArgument, err)
		}
	}
	unsent := pgconn.SafeToRetry(err) || isConnectError(err)
	ctxErr := isContextError(err)
	if ph == atCommit && !unsent && !isDefinite(err) {
		// The COMMIT was sent and its answer is not known.
		return &jobstate.UnavailableError{Op: opName(what), MayHaveApplied: true, Err: err}
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return fmt.Errorf("pgstore: %s: %w: %w", what, cerr, err)
	}
	if unsent || ctxErr || lostConnection(err) {
		return &jobstate.UnavailableError{Op: opName(what), Err: err}
	}
	return fmt.Errorf("pgstore: %s: %w", what, err)
}

// isContextError reports whether err is, or was caused by, the end of a
// context.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// opName is the operation what names, without the step.
func opName(what string) string {
	op, _, _ := strings.Cut(what, ":")
	return op
}

// isConnectError reports whether err is a failure to connect.
func isConnectError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// connClass reports whether a server error code says that the
// connection is ending or cannot be made: class 08 (connection
// exception), 57P01 (admin_shutdown, the backend was terminated), 57P02
// (crash_shutdown), 57P03 (cannot_connect_now).
func connClass(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}

// isDefinite reports whether err is the server's answer that the
// statement failed, so that its transaction did not commit: a server
// error other than a connection or shutdown error, or a COMMIT that
// answered ROLLBACK.
func isDefinite(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return !connClass(pe.Code)
	}
	return errors.Is(err, pgx.ErrTxCommitRollback)
}

// lostConnection reports whether err says that the server could not be
// reached or the connection was lost: a failure to connect, a connection
// or shutdown error of the server, an error before anything was sent
// (pgconn.SafeToRetry: among them, a statement on a connection already
// closed), the end of the stream, or a network error; not the end of a
// context.
func lostConnection(err error) bool {
	if isConnectError(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return connClass(pe.Code)
	}
	if isContextError(err) {
		// A context's end, not the server's (a context's deadline is a
		// net.Error too).
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// commitPhase is the phase of an error of a batch that ends with a
// COMMIT, reached telling whether the COMMIT's answer was being read. A
// server error (even a connection or shutdown error) that answered a
// statement before the COMMIT is definite: the server processes a batch
// in order and runs nothing after an error, or after ending the
// connection. Anything else may have come after the COMMIT ran, or
// cannot be placed before it (pgx reports a loss met in a round trip of
// its own just before the batch, deallocating evicted statements, as a
// closed connection).
func commitPhase(err error, reached bool) phase {
	var pe *pgconn.PgError
	if !reached && errors.As(err, &pe) {
		return inTransaction
	}
	return atCommit
}

// bodyError returns the error of a call's steps before its write (its
// function's, or the store's own, already mapped) as it is, unless the
// call's connection (conn) was lost and err is that loss, reported by a
// statement the function sent through Tx: that is a
// *jobstate.UnavailableError, MayHaveApplied unset, since the server
// rolled the transaction back. The end of a context (the caller's, or
// one the function gave a statement) is returned as it is.
func bodyError(ctx context.Context, what string, conn *pgx.Conn, err error) error {
	if !lostWith(ctx, conn, err) {
		return err
	}
	return &jobstate.UnavailableError{Op: opName(what), Err: err}
}

// lostWith reports whether err, an error of a call's steps before its
// write, is the loss of the call's connection conn, not yet mapped (see
// bodyError).
func lostWith(ctx context.Context, conn *pgx.Conn, err error) bool {
	var ue *jobstate.UnavailableError
	return !errors.As(err, &ue) && ctx.Err() == nil && conn != nil && conn.IsClosed() && lostConnection(err)
}
