package pgstore

import (
	"context"

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
			snaps, planned, err := s.plannedSnapshots(ctx, tx, q, now, nowNs, excluded, want, ids)
			if err != nil {
				return nil, s.fail(ctx, "claim batch", err)
			}
			many.reserve(len(snaps))
			for i := range snaps {
				snap := &snaps[i]
				excluded = append(excluded, snap.Job.ID)
				if planned[i] {
					ids = ids[1:]
					j := &snap.Job
					if j.ConcurrencyKey != "" {
						before := *j
						before.Kind = jobstate.KindReady
						heads = append(heads, touchedHeads(&before, j)...)
					}
					results = append(results, j)
					continue
				}
				j, _, err := s.offer(ctx, tx, lazy, snap, fn, nil, &many, writes)
				if err != nil {
					return nil, err
				}
				if j == nil {
					continue
				}
				results = append(results, j)
			}
			if len(snaps) < want {
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
	return jobsOf(results), nil
}

// plannedSnapshots runs claim_planned for up to n candidates not in
// excluded, with the execution ids ids, and the read of the effects of
// the candidates it did not write, in one round trip. It returns the
// candidates' snapshots in claim order (a job the plan took as written)
// and, for each, whether the plan took it. Its errors are the driver's.
func (s *Store) plannedSnapshots(ctx context.Context, tx *connTx, q jobstate.ClaimQuery, now pgtype.Timestamptz, nowNs int16, excluded []uuid.UUID, n int, ids []uuid.UUID) ([]jobstate.Snapshot, []bool, error) {
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
	snaps, planned, err := readPlanned(br, n, pinned, restored)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return snaps, planned, err
}

// readPlanned reads the answers of plannedSnapshots' batch, for up to n
// candidates.
func readPlanned(br pgx.BatchResults, n int, pinned, restored bool) ([]jobstate.Snapshot, []bool, error) {
	if err := skipPlan(br, pinned); err != nil {
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	snaps, planned := make([]jobstate.Snapshot, 0, n), make([]bool, 0, n)
	var r jobRow
	var x execRow
	var took bool
	var from string
	var ord int64
	dest := append(append(r.dest(), x.dest()...), &took, &from, &ord)
	for rows.Next() {
		r, x = jobRow{}, execRow{}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, nil, err
		}
		j, err := r.job()
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		xs, err := x.executions(j.ID)
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		snaps = append(snaps, jobstate.Snapshot{Job: j, Executions: xs})
		planned = append(planned, took)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if err := readEffects(br, snaps); err != nil {
		return nil, nil, err
	}
	return snaps, planned, skipPlan(br, restored)
}
