package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Get implements jobstate.Store.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	q, err := s.q(ctx)
	if err != nil {
		return jobstate.Job{}, err
	}
	j, err := getJob(ctx, q, id)
	if err != nil {
		if errors.Is(err, jobstate.ErrNotFound) {
			return jobstate.Job{}, err
		}
		return jobstate.Job{}, s.fail(ctx, "get", err)
	}
	return j, nil
}

// Executions implements jobstate.Store.
func (s *Store) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	return readOf(s, ctx, "executions", id, queryExecs)
}

// History implements jobstate.Store.
func (s *Store) History(ctx context.Context, id uuid.UUID) ([]jobstate.Transition, error) {
	return readOf(s, ctx, "history", id, queryHistory)
}

// Effects implements jobstate.Store.
func (s *Store) Effects(ctx context.Context, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	return readOf(s, ctx, "effects", id, queryEffects)
}

var (
	sqlHistory = `SELECT ` + transitionColumns + ` FROM transitions WHERE job_id = ? ORDER BY version`
	sqlDue     = `SELECT id, wake_s, wake_ns FROM jobs WHERE wake_s IS NOT NULL
 AND (wake_s, wake_ns) <= (?1, ?2) AND (wake_s, wake_ns, id) > (?3, ?4, ?5)`
	sqlStale = `SELECT ` + jobColumns + ` FROM jobs WHERE leases > 0
 AND (heartbeat_s, heartbeat_ns) < (?1, ?2)`
	sqlCount = `SELECT state, count(*) FROM jobs WHERE machine = ? GROUP BY state`
)

func queryHistory(ctx context.Context, q querier, id uuid.UUID) ([]jobstate.Transition, error) {
	rows, err := q.QueryContext(ctx, sqlHistory, idArg(id))
	if err != nil {
		return nil, err
	}
	return scanTransitions(rows)
}

// readOf reads the rows of job id that read returns, in one read
// transaction with the job's existence (jobstate.ErrNotFound when it
// does not exist).
func readOf[T any](s *Store, ctx context.Context, op string, id uuid.UUID, read func(context.Context, querier, uuid.UUID) ([]T, error)) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if st := joinedTx(ctx); st != nil {
		if st.tx == nil {
			return nil, errNilTx
		}
		return readIn(s, ctx, op, txQ{s, st.tx}, id, read)
	}
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	defer tx.Rollback() //nolint:errcheck // read only: nothing to keep
	return readIn(s, ctx, op, readTx{tx}, id, read)
}

func readIn[T any](s *Store, ctx context.Context, op string, q querier, id uuid.UUID, read func(context.Context, querier, uuid.UUID) ([]T, error)) ([]T, error) {
	out, err := read(ctx, q, id)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	if len(out) > 0 {
		return out, nil
	}
	var one int
	if err := q.QueryRowContext(ctx, sqlJobExists, idArg(id)).Scan(&one); err != nil {
		if isNoRows(err) {
			return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
		}
		return nil, s.fail(ctx, op, err)
	}
	return out, nil
}

// Due implements jobstate.Store, from the index of wake times.
func (s *Store) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db, err := s.q(ctx)
	if err != nil {
		return nil, err
	}
	now, nowNs := encTime(q.Now)
	after, afterNs := encTime(q.AfterWake)
	args := []any{now, nowNs, after, afterNs, idArg(q.AfterID)}
	stmt := sqlDue
	if len(q.Machines) > 0 {
		marks := make([]string, len(q.Machines))
		for i, m := range q.Machines {
			args = append(args, m)
			marks[i] = fmt.Sprintf("?%d", len(args))
		}
		stmt += " AND machine IN (" + strings.Join(marks, ", ") + ")"
	}
	stmt += " ORDER BY wake_s, wake_ns, id"
	if q.Limit > 0 {
		args = append(args, q.Limit)
		stmt += fmt.Sprintf(" LIMIT ?%d", len(args))
	}
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	defer rows.Close()
	var out []jobstate.DueJob
	for rows.Next() {
		var raw []byte
		var sec, ns int64
		if err := rows.Scan(&raw, &sec, &ns); err != nil {
			return nil, s.fail(ctx, "due", err)
		}
		id, err := decID(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, jobstate.DueJob{ID: id, WakeAt: decTime(sec, ns)})
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	return out, nil
}

// Stale implements jobstate.Store, from the index of heartbeats.
func (s *Store) Stale(ctx context.Context, machine string, heartbeatBefore time.Time, limit int) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db, err := s.q(ctx)
	if err != nil {
		return nil, err
	}
	sec, ns := encTime(heartbeatBefore)
	args := []any{sec, ns}
	stmt := sqlStale
	if machine != "" {
		args = append(args, machine)
		stmt += " AND machine = ?3"
	}
	stmt += " ORDER BY heartbeat_s, heartbeat_ns, id"
	if limit > 0 {
		args = append(args, limit)
		stmt += fmt.Sprintf(" LIMIT ?%d", len(args))
	}
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, s.fail(ctx, "stale", err)
	}
	out, err := scanJobs(rows)
	if err != nil {
		return nil, s.fail(ctx, "stale", err)
	}
	return out, nil
}

// Count implements jobstate.Counter with one aggregate over the
// machine's range of the (machine, state) index.
func (s *Store) Count(ctx context.Context, machine string) (map[jobstate.State]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db, err := s.q(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, sqlCount, machine)
	if err != nil {
		return nil, s.fail(ctx, "count", err)
	}
	defer rows.Close()
	out := make(map[jobstate.State]int)
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, s.fail(ctx, "count", err)
		}
		out[jobstate.State(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "count", err)
	}
	return out, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// readTx runs the queries of a read transaction.
type readTx struct{ tx *sql.Tx }

func (q readTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.tx.QueryContext(ctx, query, args...)
}

func (q readTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return q.tx.QueryRowContext(ctx, query, args...)
}
