package main

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The floor's claim and commit, and the same with the jobs read first.
//
// Read first, a claim is what a library whose engine decides each job's
// next state must do: one round trip that begins a transaction and
// locks and reads the candidates (floorClaimRead), then, the attempts
// decided in the client, one that writes them (floorClaimWriteHistory)
// and commits. A commit likewise locks and reads its group's jobs
// (floorCommitRead) before the commit's statement. pgstore's claim and
// group commit take those two round trips.

// floorClaimRead locks and reads up to $1 ready jobs in claim order.
const floorClaimRead = `
SELECT id, attempt FROM floor_jobs
WHERE state = 0 AND run_at <= now()
ORDER BY priority, run_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED`

// floorClaimWriteUpdate marks the jobs of $1 running with the attempts
// of $2, returning their ids and attempts.
const floorClaimWriteUpdate = `
UPDATE floor_jobs j
SET state = 1, attempt = d.attempt, lease_until = now() + interval '1 minute'
FROM unnest($1::uuid[], $2::bigint[]) AS d (id, attempt)
WHERE j.id = d.id
RETURNING j.id, j.attempt`

// floorClaimWriteHistory is the claim's write with a history row for
// each job.
const floorClaimWriteHistory = `WITH u AS (` + floorClaimWriteUpdate + claimHistory

// floorCommitRead locks and reads the jobs of $1; floorCommitPeek reads
// them without locking them (the commit's fence by attempt then guards
// them alone).
const (
	floorCommitRead = `SELECT id, attempt FROM floor_jobs WHERE id = ANY ($1) FOR NO KEY UPDATE`
	floorCommitPeek = `SELECT id, attempt FROM floor_jobs WHERE id = ANY ($1)`
)

// claimJobs claims up to n jobs on conn and returns them.
func (f *floorQueue) claimJobs(ctx context.Context, conn *pgx.Conn, n int) ([]floorJob, error) {
	var got []floorJob
	collect := func(rows pgx.Rows) (err error) {
		got, err = pgx.CollectRows(rows, scanFloorJob)
		return err
	}
	if !f.readFirst {
		rows, err := conn.Query(ctx, f.claim, n)
		if err == nil {
			err = collect(rows)
		}
		return got, err
	}
	err := readThenWrite(ctx, conn, floorClaimRead, []any{n}, func(read []floorJob) []any {
		ids := make([]uuid.UUID, len(read))
		attempts := make([]int64, len(read))
		for i, j := range read {
			ids[i], attempts[i] = j.id, j.attempt+1 // the client decides
		}
		return []any{ids, attempts}
	}, f.claim, collect)
	return got, err
}

// commitJobs commits the jobs of ids at their attempts and returns how
// many it committed.
func (f *floorQueue) commitJobs(ctx context.Context, ids []uuid.UUID, attempts []int64) (int64, error) {
	var n int64
	if !f.readFirst {
		err := f.pool.QueryRow(ctx, f.commit, ids, attempts).Scan(&n)
		return n, err
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	read := floorCommitRead
	if f.peek {
		read = floorCommitPeek
	}
	err = readThenWrite(ctx, conn.Conn(), read, []any{ids}, func([]floorJob) []any {
		return []any{ids, attempts}
	}, f.commit, func(rows pgx.Rows) error {
		n, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
		return err
	})
	return n, err
}

// readThenWrite runs one transaction on conn in two round trips: BEGIN
// and read (its rows collected as floor jobs), then write, with the
// arguments args makes of what read returned, and COMMIT. collect reads
// write's rows. On an error the transaction is rolled back.
func readThenWrite(ctx context.Context, conn *pgx.Conn, read string, readArgs []any, args func([]floorJob) []any, write string, collect func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(read, readArgs...)
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var got []floorJob
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			got, err = pgx.CollectRows(rows, scanFloorJob)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		b = &pgx.Batch{}
		b.Queue(write, args(got)...)
		b.Queue("COMMIT")
		br = conn.SendBatch(ctx, b)
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = collect(rows)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

func scanFloorJob(r pgx.CollectableRow) (floorJob, error) {
	var j floorJob
	err := r.Scan(&j.id, &j.attempt)
	return j, err
}
