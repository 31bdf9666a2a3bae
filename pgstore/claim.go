package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// ClaimNext implements jobstate.Store. Each offer is one statement that
// walks the partial index of the machine's ready jobs in claim order and
// locks the first due row no other transaction holds (FOR NO KEY UPDATE
// SKIP LOCKED), inside a savepoint: a skipped candidate is released at
// once, with whatever fn wrote, and excluded from later offers.
func (s *Store) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, err
	}
	if fn == nil {
		return jobstate.Job{}, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	now, nowNs := encTime(q.Now)
	var out jobstate.Job
	taken := false
	err := s.inTxSync(ctx, "claim", s.opts.DurableClaims, func(tx pgx.Tx) (*pgx.Batch, error) {
		passed := []uuid.UUID{}
		for offers := 0; q.Limit <= 0 || offers < q.Limit; offers++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			jobs, snap, err := s.claimSnapshots(ctx, tx, "claim", "SAVEPOINT jobstate_offer", q.Machine, now, nowNs, passed, 1)
			if err != nil {
				return nil, err
			}
			if len(jobs) == 0 {
				return nil, nil
			}
			w, err := s.prepareFn(ctx, tx, &snap[0], fn, &out)
			if err == nil {
				taken = true
				return w, nil
			}
			if !errors.Is(err, jobstate.ErrSkip) {
				return nil, err
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT jobstate_offer; RELEASE SAVEPOINT jobstate_offer"); err != nil {
				return nil, s.fail(ctx, "claim: passing over a job", err)
			}
			passed = append(passed, jobs[0].ID)
		}
		return nil, nil
	})
	if err != nil {
		return jobstate.Job{}, err
	}
	if !taken {
		return jobstate.Job{}, fmt.Errorf("%w: machine %q", jobstate.ErrNoJob, q.Machine)
	}
	return out, nil
}

// claimSnapshots locks up to n due ready jobs of machine in claim order,
// not in excluded, and reads their executions and effects, in one round
// trip (after prefix, a statement sent first when not empty); what names
// the operation in errors. The claim
// statement leaves the ids it locked in a transaction-local setting, so
// that the reads, later statements of the same batch, run after the locks
// were granted and see the jobs' last versions.
func (s *Store) claimSnapshots(ctx context.Context, tx pgx.Tx, what, prefix, machine string, now pgtype.Timestamptz, nowNs int16, excluded []uuid.UUID, n int) ([]jobstate.Job, []jobstate.Snapshot, error) {
	b := &pgx.Batch{}
	if prefix != "" {
		b.Queue(prefix)
	}
	b.Queue(s.sql.claim, machine, now, nowNs, excluded, n)
	b.Queue(s.sql.claimExecs, claimedSetting)
	b.Queue(s.sql.claimEffs, claimedSetting)
	br := tx.SendBatch(ctx, b)
	var jobs []jobstate.Job
	var snaps []jobstate.Snapshot
	err := func() error {
		if prefix != "" {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if jobs, err = scanJobs(rows); err != nil {
			return err
		}
		at := make(map[uuid.UUID]int, len(jobs))
		snaps = make([]jobstate.Snapshot, len(jobs))
		for i, j := range jobs {
			at[j.ID] = i
			snaps[i].Job = j
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		execs, err := scanExecs(rows)
		if err != nil {
			return err
		}
		for _, x := range execs {
			if i, ok := at[x.JobID]; ok {
				snaps[i].Executions = append(snaps[i].Executions, x)
			}
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			e, err := scanEffect(rows, &id)
			if err != nil {
				return err
			}
			if i, ok := at[id]; ok {
				snaps[i].Effects = append(snaps[i].Effects, e)
			}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, s.fail(ctx, what, err)
	}
	return jobs, snaps, nil
}

// claimedSetting is the transaction-local setting in which the claim
// statement (and a group's lock) records the ids it locked.
const claimedSetting = "jobstate.claimed"

// ClaimBatch implements jobstate.BatchClaimer: one statement locks up to
// n candidates in claim order (FOR NO KEY UPDATE SKIP LOCKED), one more
// reads their executions and effects, fn runs on each in a savepoint of
// its own (taken only if fn writes through the transaction), and the
// writes of every job taken go to the server in one batch before the
// single COMMIT. A skipped candidate stays locked until the batch ends;
// when candidates were skipped, the next ones are locked likewise until n
// are taken or none is left. q.Limit, when positive, bounds the offers.
func (s *Store) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: batch of %d jobs", jobstate.ErrInvalidArgument, n)
	}
	now, nowNs := encTime(q.Now)
	var results []*jobstate.Job
	err := s.inTxSync(ctx, "claim batch", s.opts.DurableClaims, func(tx pgx.Tx) (*pgx.Batch, error) {
		lazy := newLazyTx(tx)
		excluded := []uuid.UUID{}
		writes := &pgx.Batch{}
		var many multiWrite
		results = nil
		offers := 0
		for len(results) < n && (q.Limit <= 0 || offers < q.Limit) {
			want := n - len(results)
			if q.Limit > 0 && q.Limit-offers < want {
				want = q.Limit - offers
			}
			jobs, snaps, err := s.claimSnapshots(ctx, tx, "claim batch", "", q.Machine, now, nowNs, excluded, want)
			if err != nil {
				return nil, err
			}
			if len(jobs) == 0 {
				break
			}
			for i := range snaps {
				offers++
				excluded = append(excluded, snaps[i].Job.ID)
				end, _ := lazy.Savepoint(ctx)
				w, err := fn(s.fnContext(ctx, lazy), snaps[i])
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
				cur := &snaps[i].Job
				if w.Job.ID != cur.ID {
					return nil, fmt.Errorf("%w: write for job %s applied to job %s", jobstate.ErrInvalidArgument, w.Job.ID, cur.ID)
				}
				j := new(jobstate.Job)
				if w.Job.Version == cur.Version && len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
					*j = *cur
				} else {
					if err := checkWrite(cur, snaps[i].Executions, snaps[i].Effects, &w); err != nil {
						return nil, err
					}
					ok, err := many.add(cur, &w, j)
					if err != nil {
						return nil, err
					}
					if !ok {
						if err := s.queueWrite(writes, cur, &w, j); err != nil {
							return nil, err
						}
					}
				}
				results = append(results, j)
			}
			if len(jobs) < want {
				break
			}
		}
		if err := s.queueMulti(writes, &many); err != nil {
			return nil, err
		}
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
