package sqlitestore

import (
	"context"
	"database/sql"
)

// The statements prepared when the store opens, on the writer (used
// through each transaction: database/sql reuses the one connection's
// prepared statement) and on the readers.
var (
	writerStatements = []string{
		sqlGetJob, sqlGetExecs, sqlGetEffects, sqlInsertJob, sqlUpdateJob, sqlInsertTr,
		sqlUpsertExec, sqlInsertEffect, sqlKeyHolder, sqlTakeKey, sqlJobExists, sqlCandidates,
	}
	readerStatements = []string{
		sqlGetJob, sqlGetExecs, sqlGetEffects, sqlHistory, sqlJobExists, sqlCount, sqlAnyDue,
	}
)

// prepare prepares qs on db, into a map by text.
func prepare(ctx context.Context, db *sql.DB, qs []string) (map[string]*sql.Stmt, error) {
	m := make(map[string]*sql.Stmt, len(qs))
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, p := range m {
				p.Close()
			}
			return nil, err
		}
		m[q] = st
	}
	return m, nil
}

// closeAll closes the statements of m.
func closeAll(m map[string]*sql.Stmt) {
	for _, st := range m {
		st.Close()
	}
}

// txQ runs statements in a transaction, through the writer's prepared
// statements where there is one.
type txQ struct {
	s  *Store
	tx *sql.Tx
}

func (q txQ) stmt(ctx context.Context, query string) *sql.Stmt {
	if p := q.s.wstmts[query]; p != nil {
		return q.tx.StmtContext(ctx, p)
	}
	return nil
}

// QueryContext runs a query in the transaction.
func (q txQ) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query of one row in the transaction.
func (q txQ) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}

// ExecContext runs a statement in the transaction.
func (q txQ) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

// readQ runs queries on the readers, through their prepared statements
// where there is one.
type readQ struct{ s *Store }

// QueryContext runs a query on a reader.
func (q readQ) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if p := q.s.rstmts[query]; p != nil {
		return p.QueryContext(ctx, args...)
	}
	return q.s.r.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query of one row on a reader.
func (q readQ) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if p := q.s.rstmts[query]; p != nil {
		return p.QueryRowContext(ctx, args...)
	}
	return q.s.r.QueryRowContext(ctx, query, args...)
}
