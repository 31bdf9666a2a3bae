package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobstate/jobstate"
)

// txKey is the context key of the transaction a store call joins.
type txKey struct{}

// txState is the transaction a context carries: a caller's (WithTx) or
// the one a store write runs its function in.
type txState struct {
	tx *sql.Tx // nil: WithTx was given none
	// caller is set for a caller's transaction, whose commit the store
	// does not see: signals go out as each call returns.
	caller bool
	// n numbers the savepoints taken in the transaction.
	n int
	// ready are the machines whose jobs the transaction made ready, to
	// signal once it commits.
	ready []string
	// aborted is set when SQLite rolled the whole transaction back on a
	// failed statement (a full disk, an I/O error), so that no savepoint
	// is left to end.
	aborted bool
}

// errAborted is the error of a call whose transaction SQLite rolled back
// under it while a function that ignored the failure ran.
var errAborted = &jobstate.UnavailableError{Op: "transaction", Err: fmt.Errorf("%w: sqlitestore: the database rolled the transaction back after a failed statement", ErrIO)}

// WithTx returns ctx carrying tx, a transaction on the store's writer
// (Store.Begin, or Store.DB().BeginTx): every Store method called with
// the returned context (or one derived from it) runs inside tx, in a
// savepoint, instead of in a transaction of its own, and commits nothing:
// what it wrote is committed, or rolled back, with tx. A job created this
// way exists exactly when the caller's own rows written in tx do. Reads
// made with the context see tx's writes.
//
// A method that fails rolls back to its savepoint, so tx stays usable. tx
// must not be used by anything else while a method runs. Subscribers are
// signalled as each method returns, before tx commits: a worker that
// wakes then waits for the writer until tx ends, and finds the job if tx
// committed.
//
// A nil tx is refused: every Store method called with the returned
// context fails with jobstate.ErrInvalidArgument, calling no function,
// rather than running outside the transaction the caller meant.
func WithTx(ctx context.Context, tx *sql.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, &txState{tx: tx, caller: true})
}

// errNilTx is the error of a store call whose context WithTx gave a nil
// transaction.
var errNilTx = fmt.Errorf("%w: sqlitestore: WithTx: nil transaction", jobstate.ErrInvalidArgument)

// Tx returns the transaction of the store call whose function (an engine
// operation's effects, guards and nested calls) was given ctx, or the
// transaction set by WithTx. Writes made through it are committed with
// the store's write, or not at all: a commit effect that inserts a row
// through it is exactly-once. Each user effect the engine runs has its
// own savepoint, so a failing effect's writes are undone alone.
//
// Inside a store function the transaction is the store's: it must not be
// committed or rolled back (the store's write would then fail and be
// lost), must not be used after the function returns, and must not be
// used by several goroutines at once.
func Tx(ctx context.Context) (*sql.Tx, bool) {
	st := joinedTx(ctx)
	if st == nil || st.tx == nil {
		return nil, false
	}
	return st.tx, true
}

// joinedTx returns the transaction ctx carries, or nil.
func joinedTx(ctx context.Context) *txState {
	st, _ := ctx.Value(txKey{}).(*txState)
	return st
}

// Savepoint implements jobstate.Savepointer: SAVEPOINT now, RELEASE (keep)
// or ROLLBACK TO and RELEASE at the end.
func (st *txState) Savepoint(ctx context.Context) (func(keep bool) error, error) {
	st.n++
	name := "jobstate_sp" + strconv.Itoa(st.n)
	if _, err := st.tx.ExecContext(context.WithoutCancel(ctx), "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return func(keep bool) error { return st.end(ctx, name, keep) }, nil
}

// end ends savepoint name: released, after a roll back to it unless
// keep. It runs whatever ctx says, so that the transaction is left whole.
//
// When SQLite rolled the whole transaction back (after a full disk or an
// I/O error), there is no savepoint left: a roll back to it is done
// already, and a release reports errAborted.
func (st *txState) end(ctx context.Context, name string, keep bool) error {
	ctx = context.WithoutCancel(ctx)
	if st.aborted {
		if keep {
			return errAborted
		}
		return nil
	}
	if !keep {
		if _, err := st.tx.ExecContext(ctx, "ROLLBACK TO "+name); err != nil {
			if noSavepoint(err) {
				st.aborted = true
				return nil
			}
			return err
		}
	}
	_, err := st.tx.ExecContext(ctx, "RELEASE "+name)
	if err != nil && noSavepoint(err) {
		st.aborted = true
		return errAborted
	}
	return err
}

// noSavepoint reports whether err says the savepoint is gone: the
// transaction was rolled back whole.
func noSavepoint(err error) bool {
	return strings.Contains(err.Error(), "no such savepoint")
}

// write runs f in a write transaction: the one ctx carries, in a
// savepoint (rolled back to when f fails), or a new IMMEDIATE transaction
// on the writer, committed when f succeeds and rolled back otherwise. f
// is given the context its function must be called with (carrying the
// transaction and jobstate's Savepointer) and the transaction. An error
// from f is returned as it is; errors of the transaction's own statements
// are the store's (fail).
func (s *Store) write(ctx context.Context, op string, f func(ctx context.Context, st *txState) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st := joinedTx(ctx); st != nil {
		return s.joined(ctx, op, st, f)
	}
	// The connection is taken with ctx (waiting for it ends with ctx),
	// the transaction begun without ctx's cancellation: database/sql
	// would roll it back the moment ctx ends, even after the function
	// ran and the effects it ran outside the database acted.
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	st := &txState{tx: tx}
	fctx := jobstate.ContextWithSavepointer(context.WithValue(ctx, txKey{}, st), st)
	if err := f(fctx, st); err != nil {
		_ = tx.Rollback()
		return fileError(op, err)
	}
	if st.aborted {
		_ = tx.Rollback()
		return errAborted
	}
	if err := tx.Commit(); err != nil {
		return s.failCommit(op, err)
	}
	s.signal(st.ready...)
	return nil
}

// joined runs f in a savepoint of st.
func (s *Store) joined(ctx context.Context, op string, st *txState, f func(ctx context.Context, st *txState) error) error {
	if st.tx == nil {
		return errNilTx
	}
	st.n++
	name := "jobstate_call" + strconv.Itoa(st.n)
	if _, err := st.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return s.fail(ctx, op, err)
	}
	fctx := jobstate.ContextWithSavepointer(ctx, st)
	mark := len(st.ready)
	if err := f(fctx, st); err != nil {
		st.ready = st.ready[:mark]
		if endErr := st.end(ctx, name, false); endErr != nil {
			return s.fail(ctx, op, endErr)
		}
		return fileError(op, err)
	}
	if err := st.end(ctx, name, true); err != nil {
		return s.fail(ctx, op, err)
	}
	if st.caller {
		s.signal(st.ready...)
		st.ready = st.ready[:0]
	}
	return nil
}
