package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// Create implements jobstate.Store. With a key, the key is locked for the
// transaction by a transaction-level advisory lock (no row is written to
// lock it), its holder read, and fn called; the new job takes the key
// over in the same transaction.
func (s *Store) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, false, err
	}
	if fn == nil {
		return jobstate.Job{}, false, fmt.Errorf("%w: nil create function", jobstate.ErrInvalidArgument)
	}
	var out jobstate.Job
	created := false
	err := s.inTx(ctx, "create", func(tx pgx.Tx) (*pgx.Batch, error) {
		var existing *jobstate.Job
		if key != "" {
			lockKey := fmt.Sprintf("jobstate.key:%d:%s:%d:%s:%s", len(s.schema), s.schema, len(machine), machine, key)
			b := &pgx.Batch{}
			b.Queue(s.sql.keyLock, lockKey)
			b.Queue(s.sql.holder, machine, key)
			br := tx.SendBatch(ctx, b)
			_, err := br.Exec()
			var jobs []jobstate.Job
			if err == nil {
				var rows pgx.Rows
				if rows, err = br.Query(); err == nil {
					jobs, err = scanJobs(rows)
				}
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, s.fail(ctx, "create: locking the key", err)
			}
			if len(jobs) > 0 {
				existing = &jobs[0]
			}
		}
		lazy := newLazyTx(tx)
		w, err := fn(s.fnContext(ctx, lazy), existing)
		if err != nil {
			return nil, err
		}
		if w == nil {
			if existing == nil {
				return nil, fmt.Errorf("%w: create function returned no job and there is none to keep", jobstate.ErrInvalidArgument)
			}
			out = *existing
			return nil, nil
		}
		if err := checkNew(w); err != nil {
			return nil, err
		}
		b := &pgx.Batch{}
		if err := s.queueWrite(b, nil, w, &out); err != nil {
			return nil, err
		}
		if key != "" {
			b.Queue(s.sql.takeKey, machine, key, w.Job.ID)
		}
		created = true
		return b, nil
	})
	if err != nil {
		return jobstate.Job{}, false, err
	}
	return out, created, nil
}

// fnContext is the context a store function runs with: the transaction
// (Tx) and its savepoints (jobstate.ContextWithSavepointer).
func (s *Store) fnContext(ctx context.Context, lazy *lazyTx) context.Context {
	ctx = context.WithValue(ctx, txKey{}, joined{tx: lazy, pool: s.pool})
	return jobstate.ContextWithSavepointer(ctx, lazy)
}

// checkNew checks a write that creates a job.
func checkNew(w *jobstate.Write) error {
	if w.Job.ID == uuid.Nil {
		return fmt.Errorf("%w: new job has no id", jobstate.ErrInvalidArgument)
	}
	if w.Job.Version < 1 {
		return fmt.Errorf("%w: new job %s has version %d", jobstate.ErrVersionConflict, w.Job.ID, w.Job.Version)
	}
	return checkWrite(&jobstate.Job{ID: w.Job.ID}, nil, nil, w)
}

// Update implements jobstate.Store: the job row is locked (FOR NO KEY
// UPDATE), its executions and effects read after the lock, fn called, and
// the write applied in one round trip, the job's row guarded by its
// version.
func (s *Store) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil update function", jobstate.ErrInvalidArgument)
	}
	if s.group != nil && outer(ctx, s.pool) == nil {
		return s.group.update(ctx, id, fn)
	}
	return s.updateAlone(ctx, id, fn)
}

// updateAlone is Update in a transaction of its own (or a savepoint of
// the caller's).
func (s *Store) updateAlone(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	var out jobstate.Job
	err := s.inTx(ctx, "update", func(tx pgx.Tx) (*pgx.Batch, error) {
		snap, err := s.lockSnapshot(ctx, tx, id, s.sql.lock)
		if err != nil {
			return nil, err
		}
		return s.prepareFn(ctx, tx, snap, fn, &out)
	})
	if err != nil {
		return jobstate.Job{}, err
	}
	return out, nil
}

// lockSnapshot locks the job with lockSQL and reads its snapshot, the
// executions and effects in statements after the lock (one round trip).
func (s *Store) lockSnapshot(ctx context.Context, tx pgx.Tx, id uuid.UUID, lockSQL string) (*jobstate.Snapshot, error) {
	b := &pgx.Batch{}
	b.Queue(lockSQL, id)
	b.Queue(s.sql.snapExecs, id)
	b.Queue(s.sql.snapEffects, id)
	br := tx.SendBatch(ctx, b)
	snap, err := readSnapshot(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, s.fail(ctx, "update: locking the job", err)
	}
	if snap == nil {
		return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
	}
	return snap, nil
}

func readSnapshot(br pgx.BatchResults) (*jobstate.Snapshot, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	execs, err := scanExecs(rows)
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	effects, err := scanEffects(rows)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	return &jobstate.Snapshot{Job: jobs[0], Executions: execs, Effects: effects}, nil
}

// prepareFn calls fn on the locked snapshot, checks its write and returns
// the batch that applies it (nil when it changes nothing, *out then being
// the current job). *out is set when the batch has run.
func (s *Store) prepareFn(ctx context.Context, tx pgx.Tx, snap *jobstate.Snapshot, fn jobstate.UpdateFunc, out *jobstate.Job) (*pgx.Batch, error) {
	lazy := newLazyTx(tx)
	w, err := fn(s.fnContext(ctx, lazy), *snap)
	if err != nil {
		return nil, err
	}
	cur := &snap.Job
	if w.Job.ID != cur.ID {
		return nil, fmt.Errorf("%w: write for job %s applied to job %s", jobstate.ErrInvalidArgument, w.Job.ID, cur.ID)
	}
	if w.Job.Version == cur.Version && len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
		*out = *cur
		return nil, nil
	}
	if err := checkWrite(cur, snap.Executions, snap.Effects, &w); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	if err := s.queueWrite(b, cur, &w, out); err != nil {
		return nil, err
	}
	return b, nil
}

// queueWrite queues the statements of w on b: the job (inserted when cur
// is nil, else updated under cur's version), its transitions, executions
// and effects, and the notification of a job left ready. The job as
// written is scanned into *out when the batch runs.
func (s *Store) queueWrite(b *pgx.Batch, cur *jobstate.Job, w *jobstate.Write, out *jobstate.Job) error {
	args, err := jobArgs(&w.Job)
	if err != nil {
		return err
	}
	id := w.Job.ID
	payload, result := w.Job.Payload, w.Job.Result
	scan := func(row pgx.Row) error {
		var r jobRow
		if err := row.Scan(r.dest()...); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s", jobstate.ErrDuplicateJob, id)
			}
			return err
		}
		j, err := r.job()
		if err != nil {
			return err
		}
		j.Payload, j.Result = payload, result
		*out = j
		return nil
	}
	if cur == nil {
		b.Queue(s.sql.insertJob, args...).QueryRow(scan)
	} else {
		newPayload := !sameBytes(cur.Payload, payload)
		newResult := !sameBytes(cur.Result, result)
		if !newPayload {
			args[5], payload = nil, cur.Payload
		}
		if !newResult {
			args[6], result = nil, cur.Result
		}
		// The update returns only its guard (a division by zero unless
		// the job was updated at the version read); the job as written
		// is known here, as the server stores it.
		written := asStored(w.Job)
		b.Queue(s.sql.updateJob, append(args, cur.Version, newPayload, newResult)...).QueryRow(func(row pgx.Row) error {
			var updated int64
			if err := row.Scan(&updated); err != nil {
				return err
			}
			written.Payload, written.Result = payload, result
			*out = written
			return nil
		})
	}
	for i := range w.Transitions {
		b.Queue(s.sql.insertTransition, transitionArgs(id, &w.Transitions[i])...)
	}
	for i := range w.Executions {
		b.Queue(s.sql.upsertExec, execArgs(id, &w.Executions[i])...)
	}
	for i := range w.Effects {
		b.Queue(s.sql.insertEffect, effectArgs(id, &w.Effects[i])...)
	}
	if !s.opts.NoNotify && becameReady(cur, &w.Job) {
		b.Queue(s.sql.notify, s.sql.channel, notifyPayload(w.Job.Machine))
	}
	return nil
}

// sameBytes reports whether a and b are the same value as stored: equal
// bytes, and both nil (NULL) or both not.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// becameReady reports whether a write may have made a job claimable: it
// leaves the job ready, and it was not ready before or its not-before
// moved.
func becameReady(cur, next *jobstate.Job) bool {
	if next.Kind != jobstate.KindReady {
		return false
	}
	return cur == nil || cur.Kind != jobstate.KindReady || !cur.NotBefore.Equal(next.NotBefore)
}

// checkWrite enforces the store's constraints on w against the current
// job, executions and effects, before anything is sent: the database's
// constraints are the second line.
func checkWrite(cur *jobstate.Job, execs []jobstate.Execution, effects []jobstate.EffectRecord, w *jobstate.Write) error {
	if w.Job.Version <= cur.Version {
		return fmt.Errorf("%w: job %s: write of version %d over version %d", jobstate.ErrVersionConflict, cur.ID, w.Job.Version, cur.Version)
	}
	last := cur.Version
	for _, t := range w.Transitions {
		if t.JobID != cur.ID {
			return fmt.Errorf("%w: transition for job %s in a write for job %s", jobstate.ErrInvalidArgument, t.JobID, cur.ID)
		}
		if t.Version <= last || t.Version > w.Job.Version {
			return fmt.Errorf("%w: job %s: transition version %d outside (%d, %d]", jobstate.ErrVersionConflict, cur.ID, t.Version, last, w.Job.Version)
		}
		last = t.Version
	}
	committed := uuid.Nil
	note := func(x *jobstate.Execution) error {
		if x.Status != jobstate.ExecCommitted && x.Status != jobstate.ExecDone {
			return nil
		}
		if committed != uuid.Nil && committed != x.ID {
			return &jobstate.CommitError{JobID: cur.ID, ExecID: x.ID, Winner: committed}
		}
		committed = x.ID
		return nil
	}
	for i := range execs {
		if execIndex(w.Executions, execs[i].ID) < 0 {
			if err := note(&execs[i]); err != nil {
				return err
			}
		}
	}
	for i := range w.Executions {
		x := &w.Executions[i]
		if x.JobID != cur.ID {
			return fmt.Errorf("%w: execution %s of job %s in a write for job %s", jobstate.ErrInvalidArgument, x.ID, x.JobID, cur.ID)
		}
		if x.ID == uuid.Nil {
			return fmt.Errorf("%w: execution without id", jobstate.ErrInvalidArgument)
		}
		if err := note(x); err != nil {
			return err
		}
	}
	for i, ef := range w.Effects {
		dup := false
		for _, old := range effects {
			dup = dup || old.Name == ef.Name
		}
		for _, other := range w.Effects[:i] {
			dup = dup || other.Name == ef.Name
		}
		if dup {
			return fmt.Errorf("%w: job %s: effect %q", jobstate.ErrEffectApplied, cur.ID, ef.Name)
		}
	}
	return nil
}

func execIndex(list []jobstate.Execution, id uuid.UUID) int {
	for i := range list {
		if list[i].ID == id {
			return i
		}
	}
	return -1
}
