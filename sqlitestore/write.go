package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// The statements of the write path.
var (
	// The reads of a job, its executions and effects select every column
	// (*: the jobs table's columns are in the order jobRow.destAll scans,
	// the others' in the order of execColumns and effectColumns): the
	// driver parses each statement every time it runs, and a short one is
	// less to parse.
	sqlGetJob     = `SELECT * FROM jobs WHERE id = ?`
	sqlGetExecs   = `SELECT * FROM executions WHERE job_id = ? ORDER BY rowid`
	sqlGetEffects = `SELECT * FROM effects WHERE job_id = ? ORDER BY rowid`
	sqlInsertJob  = `INSERT INTO jobs (` + jobWriteColumns + `) VALUES (` + placeholders(jobColumnCount) + `)`
	sqlInsertTr   = `INSERT INTO transitions (` + transitionColumns + `) VALUES (` + placeholders(10) + `)`
	sqlUpsertExec = `INSERT INTO executions (` + execColumns + `) VALUES (` + placeholders(16) + `)
 ON CONFLICT (job_id, id) DO UPDATE SET ` + excludedSet(execColumns, 2)
	sqlInsertEffect = `INSERT INTO effects (` + effectColumns + `) VALUES (` + placeholders(6) + `)`
	sqlKeyHolder    = `SELECT job_id FROM idempotency_keys WHERE machine = ? AND key = ?`
	sqlTakeKey      = `INSERT INTO idempotency_keys (machine, key, job_id) VALUES (?, ?, ?)
 ON CONFLICT (machine, key) DO UPDATE SET job_id = excluded.job_id`
	sqlJobExists = `SELECT 1 FROM jobs WHERE id = ?`
)

// placeholders is "?, ..., ?" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// columnNames splits a column list.
func columnNames(list string) []string {
	parts := strings.Split(list, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// excludedSet is "c = excluded.c, ..." for the columns of list after the
// first skip ones.
func excludedSet(list string, skip int) string {
	cols := columnNames(list)[skip:]
	for i, c := range cols {
		cols[i] = c + " = excluded." + c
	}
	return strings.Join(cols, ", ")
}

// Create implements jobstate.Store: one transaction (or a savepoint of
// the one ctx carries) holding the key's look-up, fn and the insert.
func (s *Store) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if fn == nil {
		return jobstate.Job{}, false, fmt.Errorf("%w: nil create function", jobstate.ErrInvalidArgument)
	}
	var c jobstate.Created
	err := s.write(ctx, "create", func(fctx context.Context, st *txState) error {
		var err error
		c, err = s.createIn(fctx, st, "create", machine, key, fn)
		return err
	})
	if err != nil {
		return jobstate.Job{}, false, err
	}
	return c.Job, !c.Existing, nil
}

// createIn is one creation in the writer's transaction st: the holder of
// key (none without a key) is read, fn called, and its new job inserted,
// taking the key over; a zero Write keeps the holder.
func (s *Store) createIn(fctx context.Context, st *txState, op, machine, key string, fn jobstate.CreateFunc) (jobstate.Created, error) {
	var existing *jobstate.Job
	if key != "" {
		j, found, err := s.keyHolder(fctx, s.tx(st), machine, key)
		if err != nil {
			return jobstate.Created{}, s.fail(fctx, op, err)
		}
		if found {
			existing = &j
		}
	}
	w, err := fn(fctx, existing)
	if err != nil {
		return jobstate.Created{}, err
	}
	kept, err := jobstate.KeepsHolder(w, existing)
	if err != nil {
		return jobstate.Created{}, err
	}
	if kept {
		return jobstate.Created{Job: *existing, Existing: true}, nil
	}
	wctx := context.WithoutCancel(fctx)
	if err := s.insert(wctx, st, &w); err != nil {
		return jobstate.Created{}, err
	}
	if key != "" {
		if _, err := s.tx(st).ExecContext(wctx, sqlTakeKey, machine, key, idArg(w.Job.ID)); err != nil {
			return jobstate.Created{}, s.fail(wctx, op, err)
		}
	}
	return jobstate.Created{Job: asStored(w.Job)}, nil
}

// keyHolder returns the job holding key of machine, if any.
func (s *Store) keyHolder(ctx context.Context, tx txQ, machine, key string) (jobstate.Job, bool, error) {
	var raw []byte
	err := tx.QueryRowContext(ctx, sqlKeyHolder, machine, key).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return jobstate.Job{}, false, nil
	}
	if err != nil {
		return jobstate.Job{}, false, err
	}
	id, err := decID(raw)
	if err != nil {
		return jobstate.Job{}, false, err
	}
	j, err := getJob(ctx, tx, id)
	if errors.Is(err, jobstate.ErrNotFound) {
		return jobstate.Job{}, false, nil
	}
	return j, err == nil, err
}

// insert checks w as a new job (jobstate.CheckNew, and its id free) and
// writes it with its transitions, executions and effects.
func (s *Store) insert(ctx context.Context, st *txState, w *jobstate.Write) error {
	if err := jobstate.CheckNew(*w); err != nil {
		return err
	}
	var one int
	err := s.tx(st).QueryRowContext(ctx, sqlJobExists, idArg(w.Job.ID)).Scan(&one)
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s", jobstate.ErrDuplicateJob, w.Job.ID)
	case !errors.Is(err, sql.ErrNoRows):
		return s.fail(ctx, "create", err)
	}
	return s.apply(ctx, st, nil, w)
}

// Update implements jobstate.Store: one transaction (or a savepoint of
// the one ctx carries) holding the job's read, fn and the write.
func (s *Store) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil update function", jobstate.ErrInvalidArgument)
	}
	var out jobstate.Job
	err := s.write(ctx, "update", func(fctx context.Context, st *txState) error {
		snap, err := loadSnapshot(fctx, s.tx(st), id)
		if err != nil {
			return s.fail(fctx, "update", err)
		}
		out, err = s.runFn(fctx, st, &snap, fn)
		return err
	})
	if err != nil {
		return jobstate.Job{}, err
	}
	return out, nil
}

// runFn calls fn on snap and applies the Write it returns, unless the
// contract refuses it (jobstate.CheckWrite) or it would take the job's
// concurrency key above the limit it carries (jobstate.CheckKeyLimit,
// counted in the same transaction), and returns the job as written. Once fn returned, the write runs whatever fctx says.
func (s *Store) runFn(fctx context.Context, st *txState, snap *jobstate.Snapshot, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	w, err := fn(fctx, *snap)
	if err != nil {
		return jobstate.Job{}, err
	}
	cur := &snap.Job
	if w.Job.ID == cur.ID && w.Job.Version == cur.Version &&
		len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
		return *cur, nil
	}
	if err := jobstate.CheckWrite(*snap, w); err != nil {
		return jobstate.Job{}, err
	}
	if err := s.checkKeyLimit(fctx, st, cur, &w); err != nil {
		return jobstate.Job{}, err
	}
	if err := s.apply(context.WithoutCancel(fctx), st, cur, &w); err != nil {
		return jobstate.Job{}, err
	}
	return asStored(w.Job), nil
}

// apply writes w over cur (nil: w is a new job): the job's row, its
// transitions, executions (inserted or replaced by id) and effects, and
// notes the machine to signal when the job became ready.
func (s *Store) apply(ctx context.Context, st *txState, cur *jobstate.Job, w *jobstate.Write) error {
	op := "update"
	if cur == nil {
		op = "create"
	}
	args, err := jobArgs(&w.Job)
	if err != nil {
		return err
	}
	stmt := sqlInsertJob
	if cur != nil {
		stmt, args, err = updateOf(cur, args)
		if err != nil {
			return err
		}
	}
	if stmt != "" {
		if _, err := s.tx(st).ExecContext(ctx, stmt, args...); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	id := w.Job.ID
	for i := range w.Transitions {
		if _, err := s.tx(st).ExecContext(ctx, sqlInsertTr, transitionArgs(id, &w.Transitions[i])...); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	for i := range w.Executions {
		if _, err := s.tx(st).ExecContext(ctx, sqlUpsertExec, execArgs(id, &w.Executions[i])...); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	for i := range w.Effects {
		if _, err := s.tx(st).ExecContext(ctx, sqlInsertEffect, effectArgs(id, &w.Effects[i])...); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	if becameReady(cur, &w.Job) {
		st.ready = append(st.ready, w.Job.Machine)
	}
	return nil
}

// updateOf returns the UPDATE of the columns of a job whose values in
// args (jobArgs of the new version) differ from cur's, with its
// arguments, or "" when none does. The driver parses every statement
// each time it runs: a claim or a heartbeat changes a few columns, and
// sets only those.
func updateOf(cur *jobstate.Job, args []any) (string, []any, error) {
	old, err := jobArgs(cur)
	if err != nil {
		return "", nil, err
	}
	cols := jobWriteNames
	var b strings.Builder
	out := []any{args[0]}
	for i := 1; i < len(args); i++ {
		if sameArg(old[i], args[i]) {
			continue
		}
		if len(out) > 1 {
			b.WriteString(", ")
		}
		out = append(out, args[i])
		fmt.Fprintf(&b, "%s = ?%d", cols[i], len(out))
	}
	if len(out) == 1 {
		return "", nil, nil
	}
	return "UPDATE jobs SET " + b.String() + " WHERE id = ?1", out, nil
}

// jobWriteNames are the names of jobWriteColumns.
var jobWriteNames = columnNames(jobWriteColumns)

// sameArg reports whether two values of jobArgs are the same.
func sameArg(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && (x == nil) == (y == nil) && string(x) == string(y)
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	}
	return a == b
}

// becameReady reports whether a write may have made a job claimable: it
// leaves the job ready, and it was not ready before, or its state or
// not-before time changed.
func becameReady(cur, next *jobstate.Job) bool {
	if next.Kind != jobstate.KindReady {
		return false
	}
	return cur == nil || cur.Kind != jobstate.KindReady || cur.State != next.State || !cur.NotBefore.Equal(next.NotBefore)
}

// getJob reads job id through q, or returns jobstate.ErrNotFound.
func getJob(ctx context.Context, q querier, id uuid.UUID) (jobstate.Job, error) {
	var r jobRow
	err := q.QueryRowContext(ctx, sqlGetJob, idArg(id)).Scan(r.destAll()...)
	if errors.Is(err, sql.ErrNoRows) {
		return jobstate.Job{}, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	if err != nil {
		return jobstate.Job{}, err
	}
	return r.job()
}

// loadSnapshot reads job id with its executions and effects through q.
func loadSnapshot(ctx context.Context, q querier, id uuid.UUID) (jobstate.Snapshot, error) {
	j, err := getJob(ctx, q, id)
	if err != nil {
		return jobstate.Snapshot{}, err
	}
	execs, err := queryExecs(ctx, q, id)
	if err != nil {
		return jobstate.Snapshot{}, err
	}
	effects, err := queryEffects(ctx, q, id)
	if err != nil {
		return jobstate.Snapshot{}, err
	}
	return jobstate.Snapshot{Job: j, Executions: execs, Effects: effects}, nil
}

func queryExecs(ctx context.Context, q querier, id uuid.UUID) ([]jobstate.Execution, error) {
	rows, err := q.QueryContext(ctx, sqlGetExecs, idArg(id))
	if err != nil {
		return nil, err
	}
	return scanExecs(rows)
}

func queryEffects(ctx context.Context, q querier, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	rows, err := q.QueryContext(ctx, sqlGetEffects, idArg(id))
	if err != nil {
		return nil, err
	}
	return scanEffects(rows)
}

// tx returns what statements of st's transaction run through.
func (s *Store) tx(st *txState) txQ { return txQ{s, st.tx} }
