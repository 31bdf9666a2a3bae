package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Bounds on the wait for the server's answers.
//
// The store never gives pgx a context that can end. pgx watches such a
// context with a goroutine of the connection's, which it releases when
// the statement's results are read to the end; but when the connection
// fails while the answers of a batch are being read (a reset, a
// deadline), pgx closes the connection without releasing the watch, and
// the goroutine stays parked for the life of the process. Instead, a
// guard watches the caller's context (and the store's own timeouts) and,
// when it ends or the round trip's bound passes, sets the connection's
// deadline: the read fails at once, pgx closes the connection, and the
// guard, released when the results are closed, leaves nothing behind.

// guard bounds one round trip on a connection: from sending to reading
// the last answer.
type guard struct {
	nc      *pgconn.PgConn
	stopCtx func() bool
	timer   *time.Timer

	mu       sync.Mutex
	fired    bool // the deadline was set
	released bool
}

// arm starts guarding a round trip on conn with ctx, bounded by d (no
// bound when d <= 0), and returns the context to give pgx: ctx's values
// without its end. ctx must not be done.
func arm(ctx context.Context, conn *pgx.Conn, d time.Duration) (context.Context, *guard) {
	g := &guard{nc: conn.PgConn()}
	if ctx.Done() != nil {
		g.stopCtx = context.AfterFunc(ctx, g.fire)
	}
	if d > 0 {
		g.timer = time.AfterFunc(d, g.fire)
	}
	return context.WithoutCancel(ctx), g
}

// fire makes the connection's reads and writes fail from now on, unless
// the round trip was over.
func (g *guard) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	g.fired = true
	_ = g.nc.Conn().SetDeadline(time.Now())
}

// release ends the guard. A deadline it set on a connection that is
// still open (the round trip ended just as it fired) is cleared, so that
// the connection serves the next round trip.
func (g *guard) release() {
	if g == nil {
		return
	}
	if g.stopCtx != nil {
		g.stopCtx()
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	g.released = true
	if g.fired && !g.nc.IsClosed() {
		_ = g.nc.Conn().SetDeadline(time.Time{})
	}
}

// bounded is a querier whose every round trip is guarded: statements go
// to q, on the connection conn returns.
type bounded struct {
	q    querier
	conn func() *pgx.Conn
	d    time.Duration
}

var _ querier = bounded{}

// start checks ctx and arms a guard on the connection.
func (b bounded) start(ctx context.Context) (context.Context, *guard, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c := b.conn()
	if c == nil {
		return ctx, nil, nil
	}
	gctx, g := arm(ctx, c, b.d)
	return gctx, g, nil
}

// Exec runs a statement.
func (b bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	gctx, g, err := b.start(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer g.release()
	return b.q.Exec(gctx, sql, args...)
}

// Query runs a query; the guard lasts until its rows are closed.
func (b bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	gctx, g, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := b.q.Query(gctx, sql, args...)
	if err != nil {
		g.release()
		return nil, err
	}
	return &guardedRows{Rows: rows, end: g.release}, nil
}

// QueryRow runs a query of one row; the guard lasts until it is scanned.
func (b bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	gctx, g, err := b.start(ctx)
	if err != nil {
		return errRow{err}
	}
	return guardedRow{row: b.q.QueryRow(gctx, sql, args...), end: g.release}
}

// SendBatch sends a batch; the guard lasts until its results are closed.
func (b bounded) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	gctx, g, err := b.start(ctx)
	if err != nil {
		return errBatch{err}
	}
	return &guardedBatch{BatchResults: b.q.SendBatch(gctx, batch), end: g.release}
}

// CopyFrom runs COPY FROM; the store's binary COPY data (binaryCopy) is
// sent on the connection as it is, its own columns named.
func (b bounded) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	gctx, g, err := b.start(ctx)
	if err != nil {
		return 0, err
	}
	defer g.release()
	if c, ok := src.(*binaryCopy); ok {
		return c.send(gctx, b.conn().PgConn(), table)
	}
	return b.q.CopyFrom(gctx, table, cols, src)
}

// guardedRows ends its guard (and whatever else end does) when the rows
// are closed, or read to their end.
type guardedRows struct {
	pgx.Rows
	end  func()
	once sync.Once
}

func (r *guardedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *guardedRows) Close() {
	r.Rows.Close()
	r.finish()
}

func (r *guardedRows) finish() { r.once.Do(r.end) }

type guardedRow struct {
	row pgx.Row
	end func()
}

func (r guardedRow) Scan(dest ...any) error {
	defer r.end()
	return r.row.Scan(dest...)
}

type guardedBatch struct {
	pgx.BatchResults
	end func()
}

func (b *guardedBatch) Close() error {
	defer b.end()
	return b.BatchResults.Close()
}

// poolQ runs each statement on a connection of the pool, acquired for
// it (the wait for one bounded as a round trip is) and guarded.
type poolQ struct {
	pool *pgxpool.Pool
	d    time.Duration
}

var _ querier = poolQ{}

// acquire takes a connection and returns a querier on it, guarded.
func (p poolQ) acquire(ctx context.Context) (*pgxpool.Conn, bounded, error) {
	if err := ctx.Err(); err != nil {
		return nil, bounded{}, err
	}
	c, err := acquire(ctx, p.pool, p.d)
	if err != nil {
		return nil, bounded{}, err
	}
	return c, bounded{q: c, conn: c.Conn, d: p.d}, nil
}

// acquire takes a connection of pool, waiting at most d (no bound when
// d <= 0) besides ctx.
func acquire(ctx context.Context, pool *pgxpool.Pool, d time.Duration) (*pgxpool.Conn, error) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection: %w", err)
	}
	return c, nil
}

func (p poolQ) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, b, err := p.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return b.Exec(ctx, sql, args...)
}

func (p poolQ) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, b, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	gr := rows.(*guardedRows)
	end := gr.end
	gr.end = func() { end(); c.Release() }
	return gr, nil
}

func (p poolQ) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, b, err := p.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	row := b.QueryRow(ctx, sql, args...)
	if gr, ok := row.(guardedRow); ok {
		end := gr.end
		gr.end = func() { end(); c.Release() }
		return gr
	}
	c.Release()
	return row
}

func (p poolQ) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	c, b, err := p.acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	br := b.SendBatch(ctx, batch)
	if gb, ok := br.(*guardedBatch); ok {
		end := gb.end
		gb.end = func() { end(); c.Release() }
		return gb
	}
	c.Release()
	return br
}

func (p poolQ) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	c, b, err := p.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	return b.CopyFrom(ctx, table, cols, src)
}
