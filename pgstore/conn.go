package pgstore

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// beginSQL starts every transaction of the store. The isolation level is
// set explicitly, so that a server or role default cannot change it.
const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// ender is a transaction that can send its last batch and end in the same
// round trip: its COMMIT (or, for a savepoint, its RELEASE) is queued
// after the batch's statements.
type ender interface {
	pgx.Tx
	// commitWith returns, with an error, where it arose: atCommit
	// when the error may have come after a COMMIT ran.
	commitWith(ctx context.Context, b *pgx.Batch) (phase, error)
}

// connTx is a transaction of the store: its own, on a pooled connection
// (BEGIN … COMMIT), or a savepoint of another transaction (SAVEPOINT …
// RELEASE SAVEPOINT). Its first statement is not sent by itself: it goes
// to the server in front of the first batch, and the last one (COMMIT or
// RELEASE) goes with the last batch (commitWith), so that a write that
// locks, reads and writes costs two round trips, not four, and a
// savepoint that is never used costs nothing. Statements queued meanwhile
// (the savepoints a function takes or ends) go the same way, in front of
// the next statement. An Exec, Query or QueryRow (from a user's effect)
// takes them in its own round trip, in one batch; COPY and a statement
// with pgx's per-query options send them by themselves first.
type connTx struct {
	q       querier       // where statements go: the connection, or the parent transaction, guarded
	conn    *pgxpool.Conn // the pooled connection, released at the end (own transactions only)
	tx      pgx.Tx        // the parent transaction (savepoints only)
	start   string        // BEGIN, or SAVEPOINT name
	also    string        // a statement sent right after start ("": none)
	end     string        // COMMIT, or RELEASE SAVEPOINT name
	abort   string        // ROLLBACK, or ROLLBACK TO SAVEPOINT name; RELEASE SAVEPOINT name
	pending bool          // start not sent yet
	queued  []string      // statements to send in front of the next round trip
	ended   bool
	// plans is what the transaction's statements did to the planner
	// settings, shared by the savepoints of one transaction.
	plans *plans
	// user marks a nested transaction a user's function began: its
	// statements restore the plans first. restores marks a savepoint of
	// a caller's transaction: the plans are restored before its RELEASE.
	user, restores bool
}

var _ ender = (*connTx)(nil)

// spSeq names savepoints, uniquely in a process.
var spSeq atomic.Uint64

// beginConn acquires a connection for a transaction whose BEGIN is sent
// with its first statements.
func (s *Store) beginConn(ctx context.Context) (*connTx, error) {
	c, err := acquire(ctx, s.pool, s.opts.RoundTripTimeout)
	if err != nil {
		return nil, err
	}
	return &connTx{q: bounded{q: c, conn: c.Conn, d: s.opts.RoundTripTimeout}, conn: c,
		start: beginSQL, end: "COMMIT", abort: "ROLLBACK", pending: true, plans: &plans{}}, nil
}

// savepointOf returns a savepoint of q (a transaction), sent with its
// first statements, for the store's own statements. The statements of a
// savepoint of the store's own transactions are guarded by them (and
// share their plans, sent without restoring them: storeSide); those of a
// caller's transaction are guarded here, bounded by d, and restore the
// plans before the savepoint's RELEASE.
func savepointOf(q pgx.Tx, d time.Duration) *connTx {
	name := "pgstore_sp" + strconv.FormatUint(spSeq.Add(1), 10)
	t := &connTx{tx: q, start: "SAVEPOINT " + name, end: "RELEASE SAVEPOINT " + name,
		abort: "ROLLBACK TO SAVEPOINT " + name + "; RELEASE SAVEPOINT " + name, pending: true}
	switch q := q.(type) {
	case *connTx:
		t.plans = q.plans
		t.q = storeSide{t: q, p: q.plans}
	case *lazyTx:
		t.plans = q.inner.plans
		t.q = storeSide{t: q, p: q.inner.plans}
	case detachedTx:
		t.plans = &plans{}
		if c, ok := q.tx.(*connTx); ok {
			t.plans = c.plans
		}
		t.q = storeSide{t: q, p: t.plans}
	default:
		t.q = bounded{q: q, conn: q.Conn, d: d}
		t.plans, t.restores = &plans{}, true
	}
	return t
}

func (t *connTx) live() error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	return nil
}

// queue adds a statement to send in front of the next round trip: the
// savepoints a function takes, ends or rolls back travel with the
// statement that follows them (or with the COMMIT).
func (t *connTx) queue(sql ...string) { t.queued = append(t.queued, sql...) }

// restoreFirst queues restorePlans in front of the next statement when
// the plans may be pinned (plans.restore).
func (t *connTx) restoreFirst() {
	if r := t.plans.restore(); r != "" {
		t.queue(r)
	}
}

// userFirst restores the plans in front of a statement of a nested
// transaction a user's function began (user).
func (t *connTx) userFirst() {
	if t.user {
		t.restoreFirst()
	}
}

// takeQueued returns the queued statements and forgets them.
func (t *connTx) takeQueued() []string {
	q := t.queued
	t.queued = nil
	return q
}

// hasPrefix reports whether statements wait to go in front of the next
// round trip: the first statement, or queued ones.
func (t *connTx) hasPrefix() bool { return t.pending || len(t.queued) > 0 }

// takePrefix returns the statements that go in front of the next round
// trip, and marks them sent.
func (t *connTx) takePrefix() []string {
	var p []string
	if t.pending {
		p = append(p, t.start)
		if t.also != "" {
			p = append(p, t.also)
		}
		t.pending = false
	}
	p = append(p, t.queued...)
	t.queued = nil
	return p
}

// sendPrefix sends the statements waiting to go first, by themselves.
func (t *connTx) sendPrefix(ctx context.Context) error {
	if err := t.live(); err != nil {
		return err
	}
	if !t.hasPrefix() {
		return nil
	}
	_, err := t.q.Exec(ctx, strings.Join(t.takePrefix(), "; "))
	return err
}

// SendBatch sends b, preceded by the statements waiting to go first.
func (t *connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.live(); err != nil {
		return errBatch{err}
	}
	t.userFirst()
	if !t.hasPrefix() {
		return t.q.SendBatch(ctx, b)
	}
	prefix := t.takePrefix()
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+len(prefix))}
	for _, sql := range prefix {
		nb.Queue(sql)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := t.q.SendBatch(ctx, nb)
	for range prefix {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return errBatch{err}
		}
	}
	return br
}

// withOptions reports whether args start with pgx's per-query options
// (an exec mode, a rewriter such as pgx.NamedArgs), which a batch does
// not take.
func withOptions(args []any) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryRewriter:
		return true
	}
	return false
}

// batchOf sends sql with the statements waiting to go first, in one
// round trip.
func (t *connTx) batchOf(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.SendBatch(ctx, b)
}

// commitWith sends b (nil: nothing) and the last statement (COMMIT or
// RELEASE) in one round trip, and releases the connection. A COMMIT that
// rolled back (the transaction had failed) is pgx.ErrTxCommitRollback.
// The phase of an error is atCommit when it may have come after the
// COMMIT of a transaction of the store's own ran (commitPhase); a
// savepoint's RELEASE commits nothing.
func (t *connTx) commitWith(ctx context.Context, b *pgx.Batch) (phase, error) {
	if err := t.live(); err != nil {
		return inTransaction, err
	}
	if t.pending && (b == nil || b.Len() == 0) {
		// Nothing was ever sent: there is nothing to end.
		t.finish()
		return inTransaction, nil
	}
	if b == nil {
		b = &pgx.Batch{}
	}
	if t.restores {
		// A caller's transaction gets its own settings back.
		if r := t.plans.restore(); r != "" {
			b.Queue(r)
		}
	}
	reached := false
	queueCommit(b, t.end, &reached)
	err := t.SendBatch(ctx, b).Close()
	if err == nil {
		t.finish()
		return inTransaction, nil
	}
	if t.conn == nil {
		return inTransaction, err
	}
	return commitPhase(err, reached), err
}

// queueCommit queues the statement that ends a transaction (or a
// savepoint), checking that it did not roll back instead. *reached is
// set when its answer is read (before the batch's error, if any, is
// known to be its own).
func queueCommit(b *pgx.Batch, sql string, reached *bool) {
	b.Queue(sql).Fn = func(br pgx.BatchResults) error {
		*reached = true
		ct, err := br.Exec()
		if err != nil {
			return err
		}
		if ct.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}
}

// finish marks t ended and releases its connection.
func (t *connTx) finish() {
	if !t.ended {
		t.ended = true
		if t.conn != nil {
			t.conn.Release()
		}
	}
}

// Commit ends the transaction, keeping what it wrote.
func (t *connTx) Commit(ctx context.Context) error {
	_, err := t.commitWith(ctx, nil)
	return err
}

// Rollback undoes the transaction on a context of its own. A pooled
// connection whose rollback failed is closed by the pool, which makes
// the server abort the transaction.
func (t *connTx) Rollback(context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	defer t.finish()
	if t.pending {
		return nil
	}
	if t.tx != nil {
		t.plans.rolledBack()
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_, err := t.q.Exec(ctx, t.abort)
	return err
}

// Begin starts a nested transaction: a savepoint, sent with its first
// statements.
func (t *connTx) Begin(context.Context) (pgx.Tx, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	sp := savepointOf(t, 0)
	if t.user {
		sp.q, sp.user = t, true
	}
	return sp, nil
}

// CopyFrom runs COPY FROM in the transaction.
func (t *connTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.ended {
		return 0, pgx.ErrTxClosed
	}
	t.userFirst()
	if err := t.sendPrefix(ctx); err != nil {
		return 0, err
	}
	return t.q.CopyFrom(ctx, table, cols, src)
}

// LargeObjects returns the large objects of the transaction.
func (t *connTx) LargeObjects() pgx.LargeObjects {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = t.sendPrefix(ctx)
	if t.tx != nil {
		return t.tx.LargeObjects()
	}
	// pgx builds LargeObjects only on a transaction of its own: a BEGIN
	// inside ours is a no-op (the server warns), and the pgx transaction
	// is never ended, so it ends nothing.
	tx, err := t.Conn().Begin(ctx)
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Prepare prepares a statement on the transaction's connection.
func (t *connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	return t.Conn().Prepare(ctx, name, sql)
}

// Exec runs a statement in the transaction, in the same round trip as
// the statements waiting to go first.
func (t *connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.live(); err != nil {
		return pgconn.CommandTag{}, err
	}
	t.userFirst()
	switch {
	case !t.hasPrefix():
		return t.q.Exec(ctx, sql, args...)
	case len(args) == 0:
		// The simple protocol: one message, the command tag of the last.
		return t.q.Exec(ctx, strings.Join(append(t.takePrefix(), sql), "; "))
	case withOptions(args):
		if err := t.sendPrefix(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return t.q.Exec(ctx, sql, args...)
	}
	br := t.batchOf(ctx, sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs a query in the transaction, in the same round trip as the
// statements waiting to go first.
func (t *connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.live(); err != nil {
		return nil, err
	}
	t.userFirst()
	if !t.hasPrefix() || withOptions(args) {
		if err := t.sendPrefix(ctx); err != nil {
			return nil, err
		}
		return t.q.Query(ctx, sql, args...)
	}
	br := t.batchOf(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &guardedRows{Rows: rows, end: func() { _ = br.Close() }}, nil
}

// QueryRow runs a query of one row in the transaction, in the same round
// trip as the statements waiting to go first.
func (t *connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.live(); err != nil {
		return errRow{err}
	}
	t.userFirst()
	if !t.hasPrefix() || withOptions(args) {
		if err := t.sendPrefix(ctx); err != nil {
			return errRow{err}
		}
		return t.q.QueryRow(ctx, sql, args...)
	}
	br := t.batchOf(ctx, sql, args)
	return guardedRow{row: br.QueryRow(), end: func() { _ = br.Close() }}
}

// Conn returns the transaction's connection.
func (t *connTx) Conn() *pgx.Conn {
	if t.conn != nil {
		return t.conn.Conn()
	}
	return t.tx.Conn()
}

// endWith sends b (nil: nothing) and ends tx: in the same round trip for
// the store's own transactions and savepoints, else (a savepoint of a
// caller's pgx transaction, which commits nothing) by a Commit after the
// batch. The phase of an error is that of commitWith.
func endWith(ctx context.Context, tx pgx.Tx, b *pgx.Batch) (phase, error) {
	if e, ok := tx.(ender); ok {
		return e.commitWith(ctx, b)
	}
	if b != nil && b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return inTransaction, err
		}
	}
	return inTransaction, tx.Commit(ctx)
}
