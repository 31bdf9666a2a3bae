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
	err := s.inTx(ctx, "create", func(tx *connTx) (*pgx.Batch, error) {
		var existing *jobstate.Job
		if key != "" {
			jobs, err := s.lockHolders(ctx, tx, []string{s.idemLockName(machine, key)}, []string{machine}, []string{key})
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
		kept, err := jobstate.KeepsHolder(w, existing)
		if err != nil {
			return nil, err
		}
		if kept {
			out = *existing
			return nil, nil
		}
		if err := jobstate.CheckNew(w); err != nil {
			return nil, err
		}
		b := &pgx.Batch{}
		if err := s.queueWrite(b, tx.plans, nil, nil, &w, &out); err != nil {
			return nil, err
		}
		if key != "" {
			b.Queue(s.sql.takeKeys, []string{machine}, []string{key}, pgIDs([]uuid.UUID{w.Job.ID}))
		}
		created = true
		return b, nil
	})
	if err != nil {
		return jobstate.Job{}, false, err
	}
	return out, created, nil
}

// idemLockName is the name whose hash is the advisory lock of the
// idempotency key of machine in the store's schema.
func (s *Store) idemLockName(machine, key string) string {
	return fmt.Sprintf("jobstate.key:%d:%s:%d:%s:%s", len(s.schema), s.schema, len(machine), machine, key)
}

// fnContext is the context a store function runs with: the transaction
// (Tx) and its savepoints (jobstate.ContextWithSavepointer).
func (s *Store) fnContext(ctx context.Context, lazy *lazyTx) context.Context {
	ctx = context.WithValue(ctx, txKey{}, joined{tx: lazy, pool: s.pool})
	return jobstate.ContextWithSavepointer(ctx, lazy)
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
	err := s.inTx(ctx, "update", func(tx *connTx) (*pgx.Batch, error) {
		snaps, err := s.loadSnapshots(ctx, tx, snapshotQuery{
			lock: s.sql.lock, lockArgs: []any{pgID(id)},
			effects: s.sql.snapEffects, readArgs: []any{pgID(id)},
		})
		if err != nil {
			return nil, s.fail(ctx, "update: locking the job", err)
		}
		if len(snaps) == 0 {
			return nil, fmt.Errorf("%w: %s", jobstate.ErrNotFound, id)
		}
		return s.callFn(ctx, tx, &snaps[0], fn, &out, nil)
	})
	if err != nil {
		return jobstate.Job{}, err
	}
	return out, nil
}

// snapshotQuery is what loadSnapshots sends: a statement that locks jobs
// (the job of an Update, a claim's candidates, a group's jobs) and reads
// them with their executions (snapColumns), then the read of their
// effects, a later statement of the same batch, which therefore runs
// once the locks are granted and sees what the previous holders
// committed. Both are planned without regard to statistics (pinPlans).
type snapshotQuery struct {
	prefix   string // a statement sent first ("": none)
	lock     string
	lockArgs []any
	effects  string // each row led by its job's id
	readArgs []any
}

// loadSnapshots runs sq in one round trip on q and returns the snapshots
// of the jobs locked, in the order the lock statement returned them. Its
// errors are the driver's.
func (s *Store) loadSnapshots(ctx context.Context, q querier, sq snapshotQuery) ([]jobstate.Snapshot, error) {
	b := &pgx.Batch{}
	if sq.prefix != "" {
		b.Queue(sq.prefix)
	}
	p := plansOf(q)
	pinned := p.pin(b)
	b.Queue(sq.lock, sq.lockArgs...)
	b.Queue(sq.effects, sq.readArgs...)
	restored := p.unpin(b, pinned)
	br := q.SendBatch(ctx, b)
	snaps, err := readSnapshots(br, sq.prefix != "", pinned, restored)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return snaps, nil
}

// readSnapshots reads the answers of loadSnapshots' batch: prefix,
// pinned and restored tell whether its prefix, pinPlans and restorePlans
// were queued.
func readSnapshots(br pgx.BatchResults, prefix, pinned, restored bool) ([]jobstate.Snapshot, error) {
	if prefix {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if err := skipPlan(br, pinned); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	snaps, err := scanSnapshots(rows)
	if err != nil {
		return nil, err
	}
	if err := readEffects(br, snaps); err != nil {
		return nil, err
	}
	if err := skipPlan(br, restored); err != nil {
		return nil, err
	}
	return snaps, nil
}

// readEffects reads the next answer of br, effects each led by its job's
// id, into the snapshots of snaps of those jobs.
func readEffects(br pgx.BatchResults, snaps []jobstate.Snapshot) error {
	at := make(map[uuid.UUID]int, len(snaps))
	for i := range snaps {
		at[snaps[i].Job.ID] = i
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	for rows.Next() {
		var id uuid.UUID
		e, err := scanEffect(rows, &id)
		if err != nil {
			rows.Close()
			return err
		}
		if i, ok := at[id]; ok {
			snaps[i].Effects = append(snaps[i].Effects, e)
		}
	}
	rows.Close()
	return rows.Err()
}

// callFn calls fn on the locked snapshot in tx and returns the batch that
// applies its write (nil when it changes nothing, *out then being the
// current job). *out is set when the batch has run. A write that raises
// the leases of a job with a concurrency key under a limit is checked
// against it (checkKey; live: the key's live executions when the
// transaction holds its lock, else nil).
func (s *Store) callFn(ctx context.Context, tx *connTx, snap *jobstate.Snapshot, fn jobstate.UpdateFunc, out *jobstate.Job, live *int) (*pgx.Batch, error) {
	w, err := fn(s.fnContext(ctx, newLazyTx(tx)), *snap)
	if err != nil {
		return nil, err
	}
	if err := s.checkKey(ctx, tx, snap, &w, live); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	if err := s.stage(tx.plans, snap, &w, out, nil, b); err != nil {
		return nil, err
	}
	if b.Len() == 0 {
		return nil, nil
	}
	return b, nil
}

// stage checks w, the write a function returned over snap, against the
// Store contract (jobstate.CheckWrite) and stages it: in many, when many
// is not nil and w can go with the others, else as statements queued on
// b, its plans pinned as p tells (queueWrite). *out gets the job as
// written once they have run; a write that changes nothing stages
// nothing, and *out is the current job.
func (s *Store) stage(p *plans, snap *jobstate.Snapshot, w *jobstate.Write, out *jobstate.Job, many *multiWrite, b *pgx.Batch) error {
	cur := &snap.Job
	if w.Job.ID == cur.ID && w.Job.Version == cur.Version && len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
		*out = *cur
		return nil
	}
	if err := jobstate.CheckWrite(*snap, *w); err != nil {
		return err
	}
	if many != nil {
		return many.add(cur, snap.Executions, w, out)
	}
	return s.queueWrite(b, p, cur, snap.Executions, w, out)
}

// queueWrite queues the statements of w on b: the job with its
// executions (known, the executions it had, with w's replacing or added:
// mergeExecs), inserted when cur is nil, else updated under cur's
// version; its transitions and effects; the recomputation of the heads
// of its concurrency key when it changes them (queueHeads), and the
// notification of a job left ready. The job as written is scanned into
// *out when the batch runs. An update's statements are planned without
// regard to statistics: pinPlans is queued in front of them unless p,
// the plans of the transaction b is sent in, are pinned already
// (plans.pin).
func (s *Store) queueWrite(b *pgx.Batch, p *plans, cur *jobstate.Job, known []jobstate.Execution, w *jobstate.Write, out *jobstate.Job) error {
	args, err := jobArgs(&w.Job, mergeExecs(known, w.Executions))
	if err != nil {
		return err
	}
	id := w.Job.ID
	payload, result := w.Job.Payload, w.Job.Result
	pinned := false
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
		var newPayload, newResult bool
		payload, result, newPayload, newResult = unchangedBlobs(cur, args)
		// The update returns only its guard (a division by zero unless
		// the job was updated at the version read); the job as written
		// is known here, as the server stores it.
		written := asStored(w.Job)
		pinned = p.pin(b)
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
	for i := range w.Effects {
		b.Queue(s.sql.insertEffect, effectArgs(id, &w.Effects[i])...)
	}
	s.queueHeads(b, p, touchedHeads(cur, &w.Job), cur != nil)
	p.unpin(b, pinned)
	if !s.opts.NoNotify && becameReady(cur, &w.Job) {
		b.Queue(s.sql.notify, s.sql.channel, notifyPayload(w.Job.Machine))
	}
	return nil
}

// unchangedBlobs leaves out of args (jobArgs of a write over cur) the
// payload and the result when they are as cur has them, so that they do
// not cross the network again, and returns the payload and result as
// written and whether each is sent.
func unchangedBlobs(cur *jobstate.Job, args []any) (payload, result []byte, newPayload, newResult bool) {
	payload, _ = args[5].([]byte)
	result, _ = args[6].([]byte)
	newPayload = !sameBytes(cur.Payload, payload)
	newResult = !sameBytes(cur.Result, result)
	if !newPayload {
		args[5], payload = nil, cur.Payload
	}
	if !newResult {
		args[6], result = nil, cur.Result
	}
	return payload, result, newPayload, newResult
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
