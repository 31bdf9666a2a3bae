package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobstate/jobstate"
)

// CreateBatch implements jobstate.BatchCreator (Engine.CreateMany) in one
// transaction. The batch's idempotency keys are locked first, in one
// statement, and their holders read in one more. Then fn is called for
// each job, with a context that carries the transaction (Tx) as Create's
// function's does, so that creation effects can write through it; then
// the new jobs (each with its executions, rare at creation) and their
// history go to the server with COPY (naming only the columns some job
// sets to another value than the column's default), their effects (rare
// too) with INSERTs, the keys they take over with one statement, the
// recomputation of the heads of the concurrency keys of the ready jobs
// with one (queueHeads), and the COMMIT. Either every job is created or,
// with an error, none is; fn's error is returned as it is. A duplicate
// id fails the batch with jobstate.ErrDuplicateJob.
//
// Each distinct key holds one advisory lock until the transaction ends,
// and the server keeps those in its shared lock table
// (max_locks_per_transaction × (max_connections +
// max_prepared_transactions) entries, shared by every transaction). A
// batch whose keys do not fit is refused with
// jobstate.ErrInvalidArgument, naming the setting, and creates nothing.
func (s *Store) CreateBatch(ctx context.Context, keys []jobstate.BatchKey, fn jobstate.BatchCreateFunc) ([]jobstate.Created, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: create batch: nil function", jobstate.ErrInvalidArgument)
	}
	var names, machines, ks []string
	seen := map[jobstate.BatchKey]bool{}
	for i, k := range keys {
		if k.Key == "" {
			continue
		}
		if k.Machine == "" {
			return nil, fmt.Errorf("%w: create batch: job %d has a key and no machine", jobstate.ErrInvalidArgument, i)
		}
		if !seen[k] {
			seen[k] = true
			names = append(names, s.idemLockName(k.Machine, k.Key))
			machines, ks = append(machines, k.Machine), append(ks, k.Key)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var out []jobstate.Created
	err := s.inTx(ctx, "create batch", func(tx *connTx) (*pgx.Batch, error) {
		out = make([]jobstate.Created, 0, len(keys))
		holders := map[jobstate.BatchKey]*jobstate.Job{}
		if len(names) > 0 {
			held, err := s.lockHolders(ctx, tx, names, machines, ks)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "53200" {
				return nil, fmt.Errorf("pgstore: create batch: %w: its %d keys need more locks than the server's lock table has room for (max_locks_per_transaction); create them in smaller batches: %w",
					jobstate.ErrInvalidArgument, len(names), err)
			}
			if err != nil {
				return nil, s.fail(ctx, "create batch: locking the keys", err)
			}
			for i := range held {
				holders[jobstate.BatchKey{Machine: held[i].Machine, Key: held[i].IdempotencyKey}] = &held[i]
			}
		}
		lazy := newLazyTx(tx)
		fctx := s.fnContext(ctx, lazy)
		jobs := make([]rowValues, 0, len(keys))
		hist := make([]transitionValues, 0, len(keys))
		b := &pgx.Batch{}
		ready := map[string]bool{}
		var heads []headKey
		taken := map[jobstate.BatchKey]uuid.UUID{}
		for i, k := range keys {
			var existing *jobstate.Job
			if k.Key != "" {
				existing = holders[k]
			}
			w, err := fn(fctx, i, existing)
			if err != nil {
				return nil, err
			}
			kept, err := jobstate.KeepsHolder(w, existing)
			if err != nil {
				return nil, err
			}
			if kept {
				out = append(out, jobstate.Created{Job: *existing, Existing: true})
				continue
			}
			if err := jobstate.CheckNew(w); err != nil {
				return nil, err
			}
			jobs = append(jobs, rowValues{})
			if err := jobs[len(jobs)-1].set(&w.Job, mergeExecs(nil, w.Executions)); err != nil {
				return nil, err
			}
			id := w.Job.ID
			for k := range w.Transitions {
				hist = append(hist, transitionValues{})
				hist[len(hist)-1].set(id, &w.Transitions[k])
			}
			for k := range w.Effects {
				b.Queue(s.sql.insertEffect, effectArgs(id, &w.Effects[k])...)
			}
			if becameReady(nil, &w.Job) {
				ready[w.Job.Machine] = true
			}
			heads = append(heads, touchedHeads(nil, &w.Job)...)
			j := asStored(w.Job)
			if k.Key != "" {
				holders[k], taken[k] = &j, id
			}
			out = append(out, jobstate.Created{Job: j})
		}
		if len(jobs) > 0 {
			data, err := copyIn("jobs", jobWriteNames, jobCopyTypes, jobDefaults, jobs, (*rowValues).appendPtrs)
			if err != nil {
				return nil, err
			}
			if _, err := tx.CopyFrom(context.WithoutCancel(ctx), pgx.Identifier{s.schema, "jobs"}, data.cols, data); err != nil {
				return nil, s.fail(ctx, "create batch", err)
			}
		}
		if len(hist) > 0 {
			data, err := copyIn("transitions", transitionNames, transitionTypes, transitionDefaults, hist, (*transitionValues).appendPtrs)
			if err != nil {
				return nil, err
			}
			if _, err := tx.CopyFrom(context.WithoutCancel(ctx), pgx.Identifier{s.schema, "transitions"}, data.cols, data); err != nil {
				return nil, s.fail(ctx, "create batch", err)
			}
		}
		if len(taken) > 0 {
			var tm, tk []string
			var ids []uuid.UUID
			for k, id := range taken {
				tm, tk, ids = append(tm, k.Machine), append(tk, k.Key), append(ids, id)
			}
			b.Queue(s.sql.takeKeys, tm, tk, pgIDs(ids))
		}
		s.queueHeads(b, tx.plans, heads, false)
		if !s.opts.NoNotify {
			for m := range ready {
				b.Queue(s.sql.notify, s.sql.channel, notifyPayload(m))
			}
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockHolders locks the idempotency keys named (their lock names, and
// each key's machine and key, in one order) for the transaction, and
// returns the jobs holding them.
func (s *Store) lockHolders(ctx context.Context, tx *connTx, names, machines, keys []string) ([]jobstate.Job, error) {
	b := &pgx.Batch{}
	b.Queue(s.sql.keyLocks, names)
	pinned := tx.plans.pin(b)
	b.Queue(s.sql.holders, machines, keys)
	restored := tx.plans.unpin(b, pinned)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = skipPlan(br, pinned)
	}
	var jobs []jobstate.Job
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			jobs, err = scanJobs(rows)
		}
	}
	if err == nil {
		err = skipPlan(br, restored)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return jobs, err
}

var (
	jobWriteNames   = columnNames(jobWriteColumns)
	transitionNames = columnNames(transitionColumns)
)

func columnNames(list string) []string {
	parts := strings.Split(list, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// asStored returns j as the store reads it back: its instants in UTC at
// the precision kept, without monotonic readings.
func asStored(j jobstate.Job) jobstate.Job {
	rt := func(t time.Time) time.Time { return decTime(encTime(t)) }
	j.CreatedAt, j.UpdatedAt, j.StartedAt = rt(j.CreatedAt), rt(j.UpdatedAt), rt(j.StartedAt)
	j.CompletedAt, j.NotBefore, j.Deadline = rt(j.CompletedAt), rt(j.NotBefore), rt(j.Deadline)
	j.LeaseExpiresAt, j.HeartbeatAt, j.SweepRetryAt = rt(j.LeaseExpiresAt), rt(j.HeartbeatAt), rt(j.SweepRetryAt)
	j.WakeAt = decTime(encNullTime(j.WakeAt))
	return j
}
