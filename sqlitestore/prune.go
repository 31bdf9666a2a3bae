package sqlitestore

import (
	"context"
	"time"
)

// pruneBatch bounds how many jobs one transaction of Prune deletes, after
// which the writer is free for other writes.
const pruneBatch = 500

// The statements of Prune: the next batch of finished jobs, oldest
// completion first, from the partial index jobs_done, noted in a
// temporary table, and the deletion of everything stored with them.
var sqlPrune = []string{
	`CREATE TEMP TABLE IF NOT EXISTS jobstate_prune (id BLOB PRIMARY KEY) WITHOUT ROWID`,
	`DELETE FROM temp.jobstate_prune`,
	`INSERT INTO temp.jobstate_prune SELECT id FROM jobs
 WHERE kind = 5 AND (completed_s < ?1 OR (completed_s = ?1 AND completed_ns < ?2))
 ORDER BY completed_s, completed_ns, id LIMIT ?3`,
	`DELETE FROM executions WHERE job_id IN (SELECT id FROM temp.jobstate_prune)`,
	`DELETE FROM transitions WHERE job_id IN (SELECT id FROM temp.jobstate_prune)`,
	`DELETE FROM effects WHERE job_id IN (SELECT id FROM temp.jobstate_prune)`,
	`DELETE FROM idempotency_keys WHERE job_id IN (SELECT id FROM temp.jobstate_prune)`,
	`DELETE FROM jobs WHERE id IN (SELECT id FROM temp.jobstate_prune)`,
}

// Prune implements jobstate.Pruner: batches of up to pruneBatch jobs,
// each one write transaction (all in the one ctx carries, when it carries
// one), until limit jobs were deleted or none is left. Its cost grows
// with the jobs deleted: each batch is a range of the completion index.
// A key a deleted job held is freed.
func (s *Store) Prune(ctx context.Context, completedBefore time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sec, ns := encTime(completedBefore)
	n := 0
	for {
		want := pruneBatch
		if limit > 0 {
			want = min(want, limit-n)
		}
		if want <= 0 {
			return n, nil
		}
		var deleted int64
		err := s.write(ctx, "prune", func(fctx context.Context, st *txState) error {
			for i, stmt := range sqlPrune {
				var args []any
				if i == 2 {
					args = []any{sec, ns, want}
				}
				res, err := s.tx(st).ExecContext(fctx, stmt, args...)
				if err != nil {
					return s.fail(fctx, "prune", err)
				}
				if i == len(sqlPrune)-1 {
					deleted, err = res.RowsAffected()
					if err != nil {
						return s.fail(fctx, "prune", err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += int(deleted)
		if int(deleted) < want {
			return n, nil
		}
	}
}
