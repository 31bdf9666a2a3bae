package pgstore

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// AppliesClaimPlans implements jobstate.ClaimPlanner: a claim batch whose
// query carries a plan, and no limit per concurrency key, applies it in
// the statement that locks the candidates (claim_planned in
// queries/claims.sql), to every candidate it covers that has no
// execution yet; the function decides for the others.
func (s *Store) AppliesClaimPlans() bool { return true }

// claimBatchPlanned is ClaimBatch with q.Plan: each round locks up to the
// jobs still wanted and writes those the plan covers in one statement,
// whose round trip also reads the effects of the others, which go to fn
// as in ClaimBatch. The plan's execution ids go to the jobs it takes in
// claim order, across rounds.
func (s *Store) claimBatchPlanned(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	now, nowNs := encTime(q.Now)
	var results []*jobstate.Job
	err := s.inTxSync(ctx, "claim batch", s.opts.DurableClaims, func(tx *connTx) (*pgx.Batch, error) {
		lazy := newLazyTx(tx)
		excluded := []uuid.UUID{}
		ids := q.Plan.ExecIDs
		writes := &pgx.Batch{}
		var many multiWrite
		var heads []headKey
		results = nil
		for len(results) < n {
			want := n - len(results)
			rows, err := s.plannedSnapshots(ctx, tx, q, now, nowNs, excluded, want, ids)
			if err != nil {
				return nil, s.fail(ctx, "claim batch", err)
			}
			many.reserve(len(rows))
			for i := range rows {
				snap := &rows[i].snap
				excluded = append(excluded, snap.Job.ID)
				if rows[i].planned {
					ids = ids[1:]
					j := snap.Job
					if j.ConcurrencyKey != "" {
						before := j
						before.Kind = jobstate.KindReady
						heads = append(heads, touchedHeads(&before, &j)...)
					}
					results = append(results, &j)
					continue
				}
				end, _ := lazy.Savepoint(ctx)
				w, err := fn(s.fnContext(ctx, lazy), *snap)
				if err == nil {
					err = s.checkKey(ctx, lazy, snap, &w, nil)
				}
				if err != nil {
					if eerr := end(false); eerr != nil {
						return nil, eerr
					}
					if errors.Is(err, jobstate.ErrSkip) {
						continue
					}
					return nil, err
				}
				if err := end(true); err != nil {
					return nil, err
				}
				j := new(jobstate.Job)
				if err := s.stage(tx.plans, snap, &w, j, &many, writes); err != nil {
					return nil, err
				}
				results = append(results, j)
			}
			if len(rows) < want {
				break
			}
		}
		if err := s.queueMulti(writes, tx.plans, &many); err != nil {
			return nil, err
		}
		s.queueHeads(writes, tx.plans, heads, false)
		return writes, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]jobstate.Job, len(results))
	for i, j := range results {
		out[i] = *j
	}
	return out, nil
}

// plannedRow is a candidate claim_planned locked: its snapshot (its job
// as written, when the plan took it) and whether the plan took it.
type plannedRow struct {
	snap    jobstate.Snapshot
	planned bool
}

// plannedSnapshots runs claim_planned for up to n candidates not in
// excluded, with the execution ids ids, and the read of the effects of
// the candidates it did not write, in one round trip. Its errors are the
// driver's.
func (s *Store) plannedSnapshots(ctx context.Context, tx *connTx, q jobstate.ClaimQuery, now pgtype.Timestamptz, nowNs int16, excluded []uuid.UUID, n int, ids []uuid.UUID) ([]plannedRow, error) {
	p := q.Plan
	from := make([]string, len(p.Moves))
	to := make([]string, len(p.Moves))
	outcomes := make([]string, len(p.Moves))
	for i, m := range p.Moves {
		from[i], to[i], outcomes[i] = string(m.From), string(m.To), string(m.Outcome)
	}
	expiring := make([]string, len(p.Expiring))
	for i, st := range p.Expiring {
		expiring[i] = string(st)
	}
	lease, leaseNs := encTime(p.LeaseExpiresAt)
	b := &pgx.Batch{}
	pinned := tx.plans.pin(b)
	b.Queue(s.sql.claimPlanned, q.Machine, now, nowNs, pgIDs(excluded), n, s.keyLockPrefix(q.Machine),
		pgIDs(ids), from, to, outcomes, expiring, lease, leaseNs, p.Worker)
	b.Queue(s.sql.claimEffs, claimedSetting)
	restored := tx.plans.unpin(b, pinned)
	br := tx.SendBatch(ctx, b)
	rows, err := readPlanned(br, pinned, restored)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return rows, err
}

// readPlanned reads the answers of plannedSnapshots' batch.
func readPlanned(br pgx.BatchResults, pinned, restored bool) ([]plannedRow, error) {
	if err := skipPlan(br, pinned); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	var out []plannedRow
	var snaps []jobstate.Snapshot
	var r jobRow
	var x execRow
	var planned bool
	var from string
	var ord int64
	dest := append(append(r.dest(), x.dest()...), &planned, &from, &ord)
	for rows.Next() {
		r, x = jobRow{}, execRow{}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			rows.Close()
			return nil, err
		}
		xs, err := x.executions(j.ID)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, plannedRow{planned: planned})
		snaps = append(snaps, jobstate.Snapshot{Job: j, Executions: xs})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := readEffects(br, snaps); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].snap = snaps[i]
	}
	return out, skipPlan(br, restored)
}
