package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
)

// Options configure a Store and Migrate.
type Options struct {
	// Schema is the PostgreSQL schema holding the store's tables, so that
	// several applications (or several stores) can share one database;
	// "public" when empty.
	Schema string
	// CommitTimeout bounds the statements a write runs after the engine's
	// function returned (applying the write and COMMIT). They run even if
	// the caller's context ends meanwhile, so that a late cancellation
	// cannot throw away the record of an effect that already acted
	// elsewhere; 30 seconds when zero.
	CommitTimeout time.Duration
	// RoundTripTimeout bounds each wait of the store for the server's
	// answers (from sending a statement, or a batch of them, to reading
	// its last answer) and for a connection of the pool, besides the
	// caller's context: a server or a network that stops answering
	// without closing the connection (a hang) fails the call with a
	// *jobstate.UnavailableError after it, and the connection is closed,
	// instead of holding the caller until the connection is reset. A wait
	// for a row lock that another transaction holds, and for a free
	// connection of a busy pool, count: keep it above the longest such
	// wait that is not a fault. 30 seconds when zero; a negative value
	// sets no bound.
	RoundTripTimeout time.Duration
	// NoNotify turns off the pg_notify a write sends when it leaves a job
	// ready (it takes a lock at commit shared by every notifying
	// transaction). Subscribers then hear nothing and rely on polling.
	NoNotify bool
	// GroupCommit, when above 1, turns on group commit: concurrent
	// Updates (Engine.Succeed, Fail, Heartbeat, Fire, …) of different
	// jobs are coalesced, up to GroupCommit of them, into one
	// transaction with a savepoint per job and one COMMIT, so that many
	// jobs share one WAL flush. Each job's write and what its effects
	// wrote through Tx still commit together or not at all, and a job
	// whose function or write fails is rolled back to its savepoint
	// without undoing the others. Throughput under load rises several
	// times; a lone Update costs the same round trips, but may wait for
	// the group in flight to commit first, and while its function runs
	// the group holds the locks of the other jobs of the group (see
	// docs/store.md). Updates that join a caller's transaction (WithTx,
	// or nested calls) are never grouped. 0 or 1: off.
	GroupCommit int
	// GroupCommitters bounds the groups in flight at once, each on a
	// connection of the pool. A group starts at once for the Updates
	// waiting when none is in flight, and takes as many as run within a
	// few of the groups' recent COMMIT round trips (all GroupCommit of
	// them when their functions send nothing, a few when each writes
	// through Tx to a far server); another starts when more Updates wait
	// than the groups in flight can take and they have waited longer
	// than two of those round trips (at least 5 ms). So on a near server
	// a few large groups share each WAL flush, and on a far one several
	// small ones overlap their round trips. Three quarters of the pool's
	// connections (at least 2) when zero.
	GroupCommitters int
	// DurableClaims makes a claim (ClaimNext, ClaimBatch) wait for its
	// WAL flush as every other write does. By default a claim made in a
	// transaction of its own commits with synchronous_commit off: it
	// returns without waiting for the flush, which the server makes a
	// moment later. A claim that a server crash loses in that moment is
	// as if it had never been made: the job is ready again, and every
	// write through its lease is refused (ErrLeaseLost), because a lease
	// names its execution by an id the lost claim alone had; a later
	// durable write (a commit) flushes the claim before it, so the
	// exactly-once commit is never at risk. What a claim rule's effects
	// wrote through Tx shares the claim's fate. Claims made in a caller's
	// transaction (WithTx) follow that transaction's setting.
	DurableClaims bool
}

func (o Options) schema() string {
	if o.Schema == "" {
		return "public"
	}
	return o.Schema
}

// cleanupTimeout bounds a ROLLBACK or the end of a savepoint, which run
// whatever the caller's context.
const cleanupTimeout = 5 * time.Second

// Store is a jobstate.Store on PostgreSQL (version 12 or later), with
// every optional capability of jobstate: Counter, Pruner, BatchClaimer,
// BatchCreator, Notifier, Lister and KeyLimiter. Every method is one transaction on
// a connection of its pool (or a savepoint of the transaction its
// context carries: see WithTx and Tx); the engine's functions run inside
// it, with jobstate's savepoints, so that effects writing through Tx
// commit with the job or not at all.
//
// A method that cannot reach the server (it cannot connect, the
// connection is lost, the server is shutting down or not yet accepting
// connections) returns a *jobstate.UnavailableError, which matches
// jobstate.ErrUnavailable. Its MayHaveApplied is set when the connection
// was lost, or the commit timed out (Options.CommitTimeout), once the
// write's COMMIT may have been sent (for Prune outside a caller's
// transaction, its statement), so that the write may have been applied;
// the error then matches jobstate.ErrOutcomeUnknown too. Otherwise
// nothing was written. A caller's context that ends first gives its own
// error, as ever, except once a COMMIT was sent: its outcome is unknown
// whatever the context. See docs/store.md, "When the server cannot be
// reached".
//
// The schema must have been brought to SchemaVersion by Migrate. A Store
// is safe for concurrent use; Close ends its notification listener.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	schema string
	sql    statements
	lis    *listener
	group  *grouper // nil without group commit
}

var (
	_ jobstate.Store        = (*Store)(nil)
	_ jobstate.Counter      = (*Store)(nil)
	_ jobstate.Pruner       = (*Store)(nil)
	_ jobstate.BatchClaimer = (*Store)(nil)
	_ jobstate.BatchCreator = (*Store)(nil)
	_ jobstate.Notifier     = (*Store)(nil)
	_ jobstate.Lister       = (*Store)(nil)
	_ jobstate.KeyLimiter   = (*Store)(nil)
)

// New returns a store on pool's database, in opts.Schema. It sends
// nothing to the server: call Migrate first (once per deployment, or at
// every start: it is idempotent). A negative CommitTimeout is refused.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", jobstate.ErrInvalidArgument)
	}
	if opts.CommitTimeout < 0 {
		return nil, fmt.Errorf("%w: pgstore: negative commit timeout", jobstate.ErrInvalidArgument)
	}
	if opts.CommitTimeout == 0 {
		opts.CommitTimeout = 30 * time.Second
	}
	switch {
	case opts.RoundTripTimeout == 0:
		opts.RoundTripTimeout = 30 * time.Second
	case opts.RoundTripTimeout < 0:
		opts.RoundTripTimeout = 0
	}
	if opts.GroupCommit < 0 || opts.GroupCommitters < 0 {
		return nil, fmt.Errorf("%w: pgstore: negative group commit option", jobstate.ErrInvalidArgument)
	}
	if opts.GroupCommitters == 0 {
		opts.GroupCommitters = max(2, int(pool.Config().MaxConns)*3/4)
	}
	s := &Store{pool: pool, opts: opts, schema: opts.schema()}
	sql, err := newStatements(s.schema)
	if err != nil {
		return nil, err
	}
	s.sql = sql
	s.lis = newListener(pool, s.sql.channel)
	if opts.GroupCommit > 1 {
		s.group = newGrouper(s, opts.GroupCommit, opts.GroupCommitters)
	}
	return s, nil
}

// Close ends the store's notification listener, every subscription and,
// with group commit, its committers (after the groups in flight). It does
// not close the pool.
func (s *Store) Close() {
	s.lis.close()
	if s.group != nil {
		s.group.close()
	}
}

// Pool returns the pool the store runs on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// querier is what reads need: the pool, or a joined transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error)
}

// q returns what a read with ctx runs on.
func (s *Store) q(ctx context.Context) querier {
	if tx := outer(ctx, s.pool); tx != nil {
		switch tx.(type) {
		case *connTx, *lazyTx, detachedTx:
			return tx
		}
		return bounded{q: tx, conn: tx.Conn, d: s.opts.RoundTripTimeout}
	}
	return poolQ{pool: s.pool, d: s.opts.RoundTripTimeout}
}

// GroupsWrites reports whether the store groups concurrent writes
// (Options.GroupCommit above 1): the worker runtime then lets handlers'
// commits run ahead by default (worker.WriteGrouper).
func (s *Store) GroupsWrites() bool { return s.group != nil }

// inTx runs body in the call's transaction: a new one, or a savepoint of
// the one ctx carries. body returns the batch of the call's writes (nil:
// none), which is sent with the COMMIT (or the savepoint's RELEASE) in
// one round trip, on a context that outlives ctx by at most
// CommitTimeout. body's error is returned as it is, after a rollback
// (unless it is the loss of the call's connection: bodyError); an error
// of the writes is mapped by wrapErr, labelled what, in the phase
// endWith gives.
func (s *Store) inTx(ctx context.Context, what string, body func(tx *connTx) (*pgx.Batch, error)) error {
	return s.inTxSync(ctx, what, true, body)
}

// asyncCommit is the statement a claim's own transaction begins with when
// it need not wait for its WAL flush (see Options.DurableClaims).
const asyncCommit = "SET LOCAL synchronous_commit = off"

// inTxSync is inTx; with durable false, a transaction of the call's own
// commits without waiting for its WAL flush.
func (s *Store) inTxSync(ctx context.Context, what string, durable bool, body func(tx *connTx) (*pgx.Batch, error)) error {
	var tx *connTx
	if o := outer(ctx, s.pool); o != nil {
		if _, bad := o.(nilTx); bad {
			return fmt.Errorf("pgstore: %s: %w", what, errNilTx)
		}
		// A savepoint of the caller's transaction, sent with the first
		// statements and released with the last.
		if l, ok := o.(*lazyTx); ok && l.nested != nil {
			l.nested()
		}
		tx = savepointOf(o, s.opts.RoundTripTimeout)
	} else {
		t, err := s.beginConn(ctx)
		if err != nil {
			return s.fail(ctx, what, err)
		}
		if !durable {
			t.also = asyncCommit
		}
		tx = t
	}
	b, err := body(tx)
	if err != nil {
		err = bodyError(ctx, what, tx.Conn(), err)
		rollback(tx)
		return err
	}
	cctx, cancel := s.afterFn(ctx)
	defer cancel()
	if ph, err := endWith(cctx, tx, b); err != nil {
		rollback(tx)
		return wrapErr(ctx, what, err, ph)
	}
	return nil
}

// afterFn returns the context of the statements after a function ran.
func (s *Store) afterFn(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.opts.CommitTimeout)
}

// rollback ends tx on a context of its own; if it fails the pool closes
// the connection, and the server aborts the transaction.
func rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// Get implements jobstate.Store.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	rows, err := s.q(ctx).Query(ctx, s.sql.get, pgID(id))
	if err != nil {
		return jobstate.Job{}, s.fail(ctx, "get", err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return jobstate.Job{}, s.fail(ctx, "get", err)
	}
	if len(jobs) == 0 {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	return jobs[0], nil
}

// exists reports whether the job is stored, for the read what that found
// no row.
func (s *Store) exists(ctx context.Context, what string, id uuid.UUID) error {
	var ok bool
	if err := s.q(ctx).QueryRow(ctx, s.sql.exists, pgID(id)).Scan(&ok); err != nil {
		return s.fail(ctx, what, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	return nil
}

// Executions implements jobstate.Store.
// The executions are read from the job's row: ErrNotFound when there is
// none.
func (s *Store) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var x execRow
	if err := s.q(ctx).QueryRow(ctx, s.sql.execs, pgID(id)).Scan(x.dest()...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
		}
		return nil, s.fail(ctx, "executions", err)
	}
	xs, err := x.executions(id)
	if err != nil {
		return nil, s.fail(ctx, "executions", err)
	}
	return xs, nil
}

// History implements jobstate.Store.
func (s *Store) History(ctx context.Context, id uuid.UUID) ([]jobstate.Transition, error) {
	return readOf(ctx, s, "history", s.sql.history, id, scanTransitions)
}

// Effects implements jobstate.Store.
func (s *Store) Effects(ctx context.Context, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	return readOf(ctx, s, "effects", s.sql.effects, id, scanEffects)
}

// readOf runs the read what (sql, of job id) and scans its rows; no row
// is ErrNotFound for an unknown job, else an empty list.
func readOf[T any](ctx context.Context, s *Store, what, sql string, id uuid.UUID, scan func(pgx.Rows) ([]T, error)) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := s.q(ctx).Query(ctx, sql, pgID(id))
	if err != nil {
		return nil, s.fail(ctx, what, err)
	}
	out, err := scan(rows)
	if err != nil {
		return nil, s.fail(ctx, what, err)
	}
	if len(out) == 0 {
		return nil, s.exists(ctx, what, id)
	}
	return out, nil
}

// Count implements jobstate.Counter: one GROUP BY over the machine's
// entries of the machine-and-state index.
func (s *Store) Count(ctx context.Context, machine string) (map[jobstate.State]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := s.q(ctx).Query(ctx, s.sql.count, machine)
	if err != nil {
		return nil, s.fail(ctx, "count", err)
	}
	defer rows.Close()
	out := make(map[jobstate.State]int)
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, s.fail(ctx, "count", err)
		}
		out[jobstate.State(st)] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "count", err)
	}
	return out, nil
}

// Stale implements jobstate.Store, walking the index of leased jobs by
// heartbeat.
func (s *Store) Stale(ctx context.Context, machine string, before time.Time, limit int) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cut, cutNs := encTime(before)
	var lim any
	if limit > 0 {
		lim = limit
	}
	sql, args := s.sql.staleAny, []any{cut, cutNs, lim}
	if machine != "" {
		sql, args = s.sql.staleMachine, append(args, machine)
	}
	rows, err := s.q(ctx).Query(ctx, sql, args...)
	if err != nil {
		return nil, s.fail(ctx, "stale", err)
	}
	out, err := scanJobs(rows)
	if err != nil {
		return nil, s.fail(ctx, "stale", err)
	}
	return out, nil
}

// Due implements jobstate.Store, walking the wake index from the cursor.
func (s *Store) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now, nowNs := encTime(q.Now)
	after, afterNs := encTime(q.AfterWake)
	var lim any
	if q.Limit > 0 {
		lim = q.Limit
	}
	sql, args := s.sql.dueAny, []any{now, nowNs, after, afterNs, pgID(q.AfterID), lim}
	if len(q.Machines) > 0 {
		sql, args = s.sql.dueMachines, append(args, q.Machines)
	}
	rows, err := s.q(ctx).Query(ctx, sql, args...)
	if err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	defer rows.Close()
	var out []jobstate.DueJob
	for rows.Next() {
		var d jobstate.DueJob
		var id pgtype.UUID
		var w tsPair
		if err := rows.Scan(&id, &w.ts, &w.ns); err != nil {
			return nil, s.fail(ctx, "due", err)
		}
		d.ID, d.WakeAt = decUUID(id), w.time()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	return out, nil
}

// pruneBatch bounds the jobs one statement of Prune deletes, each batch
// its own transaction.
const pruneBatch = 500

// Prune implements jobstate.Pruner: batches of up to 500 finished jobs,
// oldest completion first, each deleted (with its executions, history,
// effects and key) in its own transaction. Jobs locked by a
// running operation are left for a later call.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cut, cutNs := encTime(before)
	// Each statement outside a caller's transaction commits by itself:
	// a connection lost in it leaves its deletions unknown.
	ph := atCommit
	if outer(ctx, s.pool) != nil {
		ph = inTransaction
	}
	n := 0
	for limit <= 0 || n < limit {
		batch := pruneBatch
		if limit > 0 && limit-n < batch {
			batch = limit - n
		}
		var deleted int64
		if err := s.q(ctx).QueryRow(ctx, s.sql.prune, cut, cutNs, batch).Scan(&deleted); err != nil {
			return n, wrapErr(ctx, "prune", err, ph)
		}
		n += int(deleted)
		if int(deleted) < batch {
			break
		}
	}
	return n, nil
}
