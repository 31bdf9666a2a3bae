package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// ClaimNext implements jobstate.Store. Each offer is one statement
// (claim in queries/claims.sql) that merges, in claim order, the walk of the partial
// index of the machine's ready jobs without a key and the walk of its
// keys' heads, and locks the first due row no other transaction holds
// (FOR NO KEY UPDATE SKIP LOCKED), inside a savepoint: a skipped
// candidate is released at once, with whatever fn wrote, and excluded
// from later offers.
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
	err := s.inTxSync(ctx, "claim", s.opts.DurableClaims, func(tx *connTx) (*pgx.Batch, error) {
		passed := []uuid.UUID{}
		keys := claimKeys{limit: q.MaxPerKey, passed: []string{}}
		for offers := 0; q.Limit <= 0 || offers < q.Limit; {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			snaps, err := s.claimSnapshots(ctx, tx, "SAVEPOINT jobstate_offer", q.Machine, now, nowNs, passed, &keys, 1)
			if err != nil {
				return nil, s.fail(ctx, "claim", err)
			}
			if len(snaps) == 0 {
				return nil, nil
			}
			var live *int
			if k := snaps[0].Job.ConcurrencyKey; k != "" && keys.limit > 0 {
				// The claim statement took the key's lock: count.
				counts, err := s.gateKeys(ctx, tx, q.Machine, []string{k})
				if err != nil {
					return nil, s.fail(ctx, "claim: counting the concurrency key", err)
				}
				n := counts[k]
				if n >= keys.limit {
					// At its limit: its jobs are not offered.
					tx.plans.rolledBack()
					if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT jobstate_offer; RELEASE SAVEPOINT jobstate_offer"); err != nil {
						return nil, s.fail(ctx, "claim: passing over a key", err)
					}
					keys.passed = append(keys.passed, k)
					continue
				}
				live = &n
			}
			offers++
			w, err := s.callFn(ctx, tx, &snaps[0], fn, &out, live)
			if err == nil {
				taken = true
				return w, nil
			}
			if !errors.Is(err, jobstate.ErrSkip) {
				return nil, err
			}
			tx.plans.rolledBack()
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT jobstate_offer; RELEASE SAVEPOINT jobstate_offer"); err != nil {
				return nil, s.fail(ctx, "claim: passing over a job", err)
			}
			passed = append(passed, snaps[0].Job.ID)
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
// not in excluded, and reads their snapshots, in one round trip (after
// prefix, a statement sent first when not empty). The claim statement
// leaves the ids it took in a transaction-local setting, from which the
// reads take them. A job with a key is a candidate only as its key's head
// for its priority, and only if its key's lock is free (the statement
// takes it). With a limit per key (keys.limit above zero), the jobs of a
// key at its limit, or in keys.passed, are left out too.
func (s *Store) claimSnapshots(ctx context.Context, tx *connTx, prefix, machine string, now pgtype.Timestamptz, nowNs int16, excluded []uuid.UUID, keys *claimKeys, n int) ([]jobstate.Snapshot, error) {
	lock, args := s.sql.claim, []any{machine, now, nowNs, pgIDs(excluded), n}
	if keys.limit > 0 {
		lock, args = s.sql.claimKeyed, append(args, keys.limit, keys.passed, s.keyLockPrefix(machine))
	} else {
		args = append(args, s.keyLockPrefix(machine))
	}
	return s.loadSnapshots(ctx, tx, snapshotQuery{
		prefix: prefix,
		lock:   lock, lockArgs: args,
		effects: s.sql.claimEffs, readArgs: []any{claimedSetting},
	})
}

// claimKeys is what a claim knows of the concurrency keys: the limit per
// key (0: none), the keys whose jobs it passes over (at the limit), and
// the live executions of the keys it counted, with its own claims.
type claimKeys struct {
	limit  int
	passed []string
	live   map[string]int
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
	if q.Plan != nil && q.MaxPerKey <= 0 && q.Limit <= 0 && len(q.Plan.ExecIDs) >= n {
		return s.claimBatchPlanned(ctx, q, n, fn)
	}
	now, nowNs := encTime(q.Now)
	var results []*jobstate.Job
	err := s.inTxSync(ctx, "claim batch", s.opts.DurableClaims, func(tx *connTx) (*pgx.Batch, error) {
		lazy := newLazyTx(tx)
		excluded := []uuid.UUID{}
		keys := claimKeys{limit: q.MaxPerKey, passed: []string{}, live: map[string]int{}}
		writes := &pgx.Batch{}
		var many multiWrite
		results = nil
		offers := 0
		for len(results) < n && (q.Limit <= 0 || offers < q.Limit) {
			want := n - len(results)
			if q.Limit > 0 && q.Limit-offers < want {
				want = q.Limit - offers
			}
			snaps, err := s.claimSnapshots(ctx, tx, "", q.Machine, now, nowNs, excluded, &keys, want)
			if err != nil {
				return nil, s.fail(ctx, "claim batch", err)
			}
			many.reserve(len(snaps))
			if err := s.gateBatch(ctx, tx, q.Machine, &keys, snaps); err != nil {
				return nil, s.fail(ctx, "claim batch: locking the concurrency keys", err)
			}
			for i := range snaps {
				excluded = append(excluded, snaps[i].Job.ID)
				var live *int
				if k := snaps[i].Job.ConcurrencyKey; k != "" && keys.limit > 0 {
					n := keys.live[k]
					if n >= keys.limit {
						// Passed over (it stays locked until the batch
						// ends), with the rest of its key.
						if !slices.Contains(keys.passed, k) {
							keys.passed = append(keys.passed, k)
						}
						continue
					}
					live = &n
				}
				offers++
				j, added, err := s.offer(ctx, tx, lazy, &snaps[i], fn, live, &many, writes)
				if err != nil {
					return nil, err
				}
				if j == nil {
					continue
				}
				if live != nil {
					keys.live[snaps[i].Job.ConcurrencyKey] += added
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
		return writes, nil
	})
	if err != nil {
		return nil, err
	}
	return jobsOf(results), nil
}

// jobsOf returns the jobs a claim batch took, as written.
func jobsOf(taken []*jobstate.Job) []jobstate.Job {
	out := make([]jobstate.Job, len(taken))
	for i, j := range taken {
		out[i] = *j
	}
	return out
}

// offer runs fn on one candidate of a claim batch, in a savepoint of its
// own (taken only if fn writes through the transaction), checks the
// concurrency key's limit (live: the key's live executions, nil without
// a limit) and stages the job's write in many and writes. It returns
// the job to be filled in as written when the batch's writes return, or
// nil when fn skipped it (what fn wrote is undone), and the live
// executions the write adds; any other error of fn is returned as it is.
func (s *Store) offer(ctx context.Context, tx *connTx, lazy *lazyTx, snap *jobstate.Snapshot, fn jobstate.UpdateFunc, live *int, many *multiWrite, writes *pgx.Batch) (*jobstate.Job, int, error) {
	end, _ := lazy.Savepoint(ctx)
	w, err := fn(s.fnContext(ctx, lazy), *snap)
	if err == nil {
		err = s.checkKey(ctx, lazy, snap, &w, live)
	}
	if err != nil {
		if eerr := end(false); eerr != nil {
			return nil, 0, eerr
		}
		if errors.Is(err, jobstate.ErrSkip) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	if err := end(true); err != nil {
		return nil, 0, err
	}
	j := new(jobstate.Job)
	if err := s.stage(tx.plans, snap, &w, j, many, writes); err != nil {
		return nil, 0, err
	}
	return j, w.Job.Leases - snap.Job.Leases, nil
}

// gateBatch counts the live executions of the concurrency keys of snaps
// that the batch has not counted yet (keys.live), whose locks the claim
// statement took. Nothing is sent without a limit, or when every key is
// counted already. Its errors are the driver's.
func (s *Store) gateBatch(ctx context.Context, tx *connTx, machine string, keys *claimKeys, snaps []jobstate.Snapshot) error {
	if keys.limit <= 0 {
		return nil
	}
	var want []string
	for i := range snaps {
		k := snaps[i].Job.ConcurrencyKey
		if _, counted := keys.live[k]; k != "" && !counted {
			want = append(want, k)
		}
	}
	if len(want) == 0 {
		return nil
	}
	counts, err := s.gateKeys(ctx, tx, machine, want)
	if err != nil {
		return err
	}
	for _, k := range want {
		keys.live[k] = counts[k]
	}
	return nil
}
