package pgstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
)

// txKey is the context key of the transaction a store call joins.
type txKey struct{}

// joined is the transaction a context carries: a caller's (WithTx, pool
// nil) or the one a store function runs in (pool set: only stores on the
// same pool join it).
type joined struct {
	tx   pgx.Tx
	pool *pgxpool.Pool
}

// WithTx returns ctx carrying tx: every Store method called with the
// returned context (or a context derived from it) runs inside tx, in a
// savepoint, instead of in a transaction of its own, and commits nothing:
// what it wrote is committed, or rolled back, with tx. A job created this
// way exists exactly when the caller's own rows written in tx do.
//
// A method that fails rolls back to its savepoint, so tx stays usable. tx
// must not be used by anything else while a method runs, and must belong
// to the database the store was made for. Notifications of jobs made
// ready in tx are delivered when tx commits.
//
// A nil tx (or a nil pointer of a pgx.Tx type) is refused: every Store
// method called with the returned context fails with
// jobstate.ErrInvalidArgument, sending nothing and calling no function,
// rather than running outside the transaction the caller meant.
func WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	if isNilTx(tx) {
		tx = nilTx{}
	}
	return context.WithValue(ctx, txKey{}, joined{tx: tx})
}

// isNilTx reports whether tx is nil or a nil pointer.
func isNilTx(tx pgx.Tx) bool {
	if tx == nil {
		return true
	}
	v := reflect.ValueOf(tx)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// errNilTx is the error of a store call whose context WithTx gave a nil
// transaction.
var errNilTx = fmt.Errorf("%w: pgstore: WithTx: nil transaction", jobstate.ErrInvalidArgument)

// nilTx stands for the nil transaction given to WithTx: every statement
// fails with errNilTx.
type nilTx struct{}

var _ pgx.Tx = nilTx{}

func (nilTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNilTx }
func (nilTx) Commit(context.Context) error          { return errNilTx }
func (nilTx) Rollback(context.Context) error        { return errNilTx }
func (nilTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNilTx
}
func (nilTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return errBatch{errNilTx} }
func (nilTx) LargeObjects() pgx.LargeObjects                         { return pgx.LargeObjects{} }
func (nilTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errNilTx
}
func (nilTx) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNilTx
}
func (nilTx) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errNilTx }
func (nilTx) QueryRow(context.Context, string, ...any) pgx.Row        { return errRow{errNilTx} }
func (nilTx) Conn() *pgx.Conn                                         { return nil }

// Tx returns the transaction of the store call whose function (an engine
// operation's effects, guards and nested calls) was given ctx, or the
// transaction set by WithTx. Writes made through it are committed with
// the store's write, or not at all: a commit effect that inserts a row
// through it is exactly-once. Each user effect the engine runs has its own
// savepoint, so a failing effect's writes are undone alone.
//
// The transaction must not be committed or rolled back (Commit and
// Rollback of the transaction returned inside a store function fail),
// must not be used after the function returns, and must not be used by
// several goroutines at once.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	j, ok := ctx.Value(txKey{}).(joined)
	if !ok || j.tx == nil {
		return nil, false
	}
	if _, bad := j.tx.(nilTx); bad {
		return nil, false
	}
	return j.tx, true
}

// outer returns the transaction a call with ctx on pool must join.
func outer(ctx context.Context, pool *pgxpool.Pool) pgx.Tx {
	j, ok := ctx.Value(txKey{}).(joined)
	if !ok || j.tx == nil || (j.pool != nil && j.pool != pool) {
		return nil
	}
	return j.tx
}

// ErrTxOwned is returned by Commit and Rollback of the transaction Tx
// gives inside a store function: the store ends it.
var ErrTxOwned = errors.New("pgstore: the store's transaction is ended by the store")

// lazyTx is the transaction a store function sees. Its savepoints are
// taken lazily: Savepoint only notes one, and the SAVEPOINT statements
// go to the server in front of the next statement that runs through the
// transaction, in its round trip, so an effect that writes nothing costs
// nothing; ending a savepoint (RELEASE, or ROLLBACK TO) likewise travels
// with the next statement, or with the COMMIT. The planner settings the
// store pinned are restored in the same way, in front of the first
// statement sent through it while they are pinned (plans.go).
type lazyTx struct {
	inner *connTx
	stack []savepoint
	n     int
	// In a group (group commit): before runs before any statement is
	// sent (it sends the group's pending writes and queues the member's
	// savepoint), nested is called when a nested transaction begins (a
	// store call joining this one), and detach keeps a statement, once
	// sent, from being interrupted by its context, which would end the
	// connection of every member of the group.
	before func(ctx context.Context) error
	nested func()
	detach bool
	// exec, when set, runs a statement of Exec (in a group: with the
	// group's pending writes, in one round trip).
	exec func(ctx context.Context, sql string, args []any) (pgconn.CommandTag, error)
}

type savepoint struct {
	name string
	sent bool
	done bool
}

var _ pgx.Tx = (*lazyTx)(nil)

func newLazyTx(inner *connTx) *lazyTx { return &lazyTx{inner: inner} }

// flush queues the restoring of the plans (when they may be pinned) and
// the savepoints noted but not sent yet, to go with the statement that
// follows.
func (l *lazyTx) flush(ctx context.Context) error {
	if l.before != nil {
		if err := l.before(ctx); err != nil {
			return err
		}
	}
	l.inner.restoreFirst()
	l.queueSavepoints()
	return nil
}

// queueSavepoints queues the savepoints noted but not sent yet.
func (l *lazyTx) queueSavepoints() {
	for i := range l.stack {
		if !l.stack[i].sent {
			l.inner.queue("SAVEPOINT " + l.stack[i].name)
			l.stack[i].sent = true
		}
	}
}

// Savepoint implements jobstate.Savepointer. Savepoints must be ended in
// the reverse order they were taken.
func (l *lazyTx) Savepoint(context.Context) (func(keep bool) error, error) {
	l.n++
	name := "jobstate_sp" + strconv.Itoa(l.n)
	l.stack = append(l.stack, savepoint{name: name})
	depth := len(l.stack)
	return func(keep bool) error {
		if depth != len(l.stack) || l.stack[depth-1].done {
			return fmt.Errorf("pgstore: savepoint %s ended out of order", name)
		}
		sp := l.stack[depth-1]
		l.stack = l.stack[:depth-1]
		if !sp.sent {
			return nil
		}
		// Sent with what follows: the transaction cannot go on without
		// it, so it goes first whatever comes next.
		if !keep {
			l.inner.queue("ROLLBACK TO SAVEPOINT " + name)
			l.inner.plans.rolledBack()
		}
		l.inner.queue("RELEASE SAVEPOINT " + name)
		return nil
	}, nil
}

// Begin starts a nested transaction (a savepoint) of the store's.
func (l *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.flush(ctx); err != nil {
		return nil, err
	}
	if l.nested != nil {
		l.nested()
	}
	tx, err := l.inner.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if sp, ok := tx.(*connTx); ok {
		// The user's statements restore the plans a nested store call
		// may have pinned meanwhile.
		sp.user = true
	}
	if !l.detach {
		return tx, nil
	}
	return detachedTx{tx}, nil
}

// sctx is the context a statement is sent with: ctx, or in a group ctx
// without its cancellation, once checked.
func (l *lazyTx) sctx(ctx context.Context) (context.Context, error) {
	if !l.detach {
		return ctx, nil
	}
	return detach(ctx)
}

func detach(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// Commit refuses: the store commits its transaction.
func (l *lazyTx) Commit(context.Context) error { return ErrTxOwned }

// Rollback refuses: the store rolls its transaction back.
func (l *lazyTx) Rollback(context.Context) error { return ErrTxOwned }

// CopyFrom runs COPY FROM in the transaction.
func (l *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return 0, err
	}
	if err := l.flush(ctx); err != nil {
		return 0, err
	}
	return l.inner.CopyFrom(ctx, table, cols, src)
}

// SendBatch sends a batch in the transaction.
func (l *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return errBatch{err}
	}
	if err := l.flush(ctx); err != nil {
		return errBatch{err}
	}
	return l.inner.SendBatch(ctx, b)
}

// LargeObjects returns the large objects of the transaction. Savepoints
// noted but not sent are not taken first.
func (l *lazyTx) LargeObjects() pgx.LargeObjects { return l.inner.LargeObjects() }

// Prepare prepares a statement on the transaction's connection.
func (l *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.flush(ctx); err != nil {
		return nil, err
	}
	return l.inner.Prepare(ctx, name, sql)
}

// Exec runs a statement in the transaction.
func (l *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if l.exec != nil && !withOptions(args) {
		l.inner.restoreFirst()
		l.queueSavepoints()
		return l.exec(ctx, sql, args)
	}
	if err := l.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return l.inner.Exec(ctx, sql, args...)
}

// Query runs a query in the transaction.
func (l *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.flush(ctx); err != nil {
		return nil, err
	}
	return l.inner.Query(ctx, sql, args...)
}

// QueryRow runs a query of one row in the transaction.
func (l *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, err := l.sctx(ctx)
	if err != nil {
		return errRow{err}
	}
	if err := l.flush(ctx); err != nil {
		return errRow{err}
	}
	return l.inner.QueryRow(ctx, sql, args...)
}

// Conn returns the transaction's connection.
func (l *lazyTx) Conn() *pgx.Conn { return l.inner.Conn() }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }

// detachedTx is a nested transaction of a group member: its statements,
// once sent, are not interrupted by their context (see lazyTx.detach).
type detachedTx struct{ tx pgx.Tx }

var _ ender = detachedTx{}

func (d detachedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := d.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return detachedTx{tx}, nil
}

func (d detachedTx) commitWith(ctx context.Context, b *pgx.Batch) (phase, error) {
	return endWith(context.WithoutCancel(ctx), d.tx, b)
}

func (d detachedTx) Commit(ctx context.Context) error { return d.tx.Commit(context.WithoutCancel(ctx)) }

func (d detachedTx) Rollback(ctx context.Context) error {
	return d.tx.Rollback(context.WithoutCancel(ctx))
}

func (d detachedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return 0, err
	}
	return d.tx.CopyFrom(ctx, table, cols, src)
}

func (d detachedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	ctx, err := detach(ctx)
	if err != nil {
		return errBatch{err}
	}
	return d.tx.SendBatch(ctx, b)
}

func (d detachedTx) LargeObjects() pgx.LargeObjects { return d.tx.LargeObjects() }

func (d detachedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return nil, err
	}
	return d.tx.Prepare(ctx, name, sql)
}

func (d detachedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return d.tx.Exec(ctx, sql, args...)
}

func (d detachedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return nil, err
	}
	return d.tx.Query(ctx, sql, args...)
}

func (d detachedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, err := detach(ctx)
	if err != nil {
		return errRow{err}
	}
	return d.tx.QueryRow(ctx, sql, args...)
}

func (d detachedTx) Conn() *pgx.Conn { return d.tx.Conn() }
