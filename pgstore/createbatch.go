package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// CreateBatch implements jobstate.BatchCreator (Engine.CreateMany): it
// inserts n new jobs without idempotency keys in one transaction. fn is
// called for i = 0 … n-1 inside it, with a context that carries the
// transaction (Tx) as Create's function's does, so that creation effects
// can write through it; then the jobs (each with its executions, rare at
// creation) and their history go to the server with COPY (naming only
// the columns some job sets to another value than the column's default),
// their effects (rare too) with INSERTs, the recomputation of the heads
// of the concurrency keys of the ready jobs with one (queueHeads), and
// the COMMIT. Either every job is created or, with an error, none is;
// fn's error is returned as it is.
//
// Each Write is a new job as a CreateFunc returns it: a new ID, Version
// >= 1, and its transitions. A duplicate id fails the batch with
// jobstate.ErrDuplicateJob. The jobs are returned as written, in order.
func (s *Store) CreateBatch(ctx context.Context, n int, fn func(ctx context.Context, i int) (jobstate.Write, error)) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil || n < 0 {
		return nil, fmt.Errorf("%w: create batch: nil function or negative count", jobstate.ErrInvalidArgument)
	}
	if n == 0 {
		return nil, nil
	}
	// Room grows with the jobs fn returns, not with n: a huge n from a
	// caller must not allocate before fn has made a single job.
	out := make([]jobstate.Job, 0, min(n, createBatchRoom))
	err := s.inTx(ctx, "create batch", func(tx *connTx) (*pgx.Batch, error) {
		lazy := newLazyTx(tx)
		fctx := s.fnContext(ctx, lazy)
		jobs := make([][]any, 0, min(n, createBatchRoom))
		var hist [][]any
		b := &pgx.Batch{}
		ready := map[string]bool{}
		var heads []headKey
		for i := 0; i < n; i++ {
			w, err := fn(fctx, i)
			if err != nil {
				return nil, err
			}
			if err := jobstate.CheckNew(w); err != nil {
				return nil, err
			}
			args, err := jobArgs(&w.Job, mergeExecs(nil, w.Executions))
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, args)
			id := w.Job.ID
			for k := range w.Transitions {
				hist = append(hist, transitionArgs(id, &w.Transitions[k]))
			}
			for k := range w.Effects {
				b.Queue(s.sql.insertEffect, effectArgs(id, &w.Effects[k])...)
			}
			if becameReady(nil, &w.Job) {
				ready[w.Job.Machine] = true
			}
			heads = append(heads, touchedHeads(nil, &w.Job)...)
			out = append(out, asStored(w.Job))
		}
		cols, rows := copyColumns(jobWriteNames, jobDefaults, jobs)
		if _, err := tx.CopyFrom(context.WithoutCancel(ctx), pgx.Identifier{s.schema, "jobs"}, cols, pgx.CopyFromRows(rows)); err != nil {
			return nil, s.fail(ctx, "create batch", err)
		}
		if len(hist) > 0 {
			cols, rows := copyColumns(transitionNames, transitionDefaults, hist)
			if _, err := tx.CopyFrom(context.WithoutCancel(ctx), pgx.Identifier{s.schema, "transitions"}, cols, pgx.CopyFromRows(rows)); err != nil {
				return nil, s.fail(ctx, "create batch", err)
			}
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

// createBatchRoom bounds the room CreateBatch allocates before its jobs
// are made.
const createBatchRoom = 1024

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
