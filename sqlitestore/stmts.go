package sqlitestore

import (
	"context"
	"database/sql"
)

// The driver (modernc.org/sqlite) parses a statement each time it runs,
// prepared or not: the store sends its statements as text, and keeps the
// ones it runs most often short (SELECT * of a job, an UPDATE of the
// columns that changed).

// txQ runs statements in a transaction.
type txQ struct {
	s  *Store
	tx *sql.Tx
}

// QueryContext runs a query in the transaction.
func (q txQ) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query of one row in the transaction.
func (q txQ) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return q.tx.QueryRowContext(ctx, query, args...)
}

// ExecContext runs a statement in the transaction.
func (q txQ) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return q.tx.ExecContext(ctx, query, args...)
}

// readQ runs queries on the readers.
type readQ struct{ s *Store }

// QueryContext runs a query on a reader.
func (q readQ) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.s.r.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query of one row on a reader.
func (q readQ) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return q.s.r.QueryRowContext(ctx, query, args...)
}
