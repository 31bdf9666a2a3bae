package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// claimPage bounds how many candidates one read of the claim index
// returns: twice the jobs still wanted, so that a ClaimNext whose first
// candidate is taken reads two.
const claimPage = 16

// sqlCandidates reads the next page of a machine's due ready jobs in
// claim order, after the cursor (?4 … ?9) when ?10 is set, from the
// partial index jobs_claim, which is in that order: the jobs passed over
// are those of a higher priority that are not due yet, and those the
// function skipped. (Whether any job is due is asked first, from
// jobs_ready_at: a claim with none reads no more.)
const sqlCandidates = `SELECT id, priority, due_s, due_ns, created_s, created_ns FROM jobs INDEXED BY jobs_claim
 WHERE kind = 2 AND machine = ?1
 AND (not_before_s, not_before_ns) <= (?2, ?3)
 AND (?10 = 0 OR priority < ?4 OR (priority = ?4 AND (due_s, due_ns, created_s, created_ns, id) > (?5, ?6, ?7, ?8, ?9)))
 ORDER BY priority DESC, due_s, due_ns, created_s, created_ns, id
 LIMIT ?11`

// sqlKeysAtLimit is the subquery of the keys of machine ?1 whose live
// executions have reached ?12, read from jobs_key_live (a few entries: the
// keyed jobs holding leases). SQLite runs it once per statement.
const sqlKeysAtLimit = `SELECT concurrency_key FROM jobs INDEXED BY jobs_key_live
 WHERE machine = ?1 AND leases > 0 AND concurrency_key <> ''
 GROUP BY concurrency_key HAVING sum(leases) >= ?12`

// sqlCandidatesKeyed is sqlCandidates for a machine with a limit per
// concurrency key (?12): it passes over the jobs whose key is at the
// limit, testing each entry's key from jobs_claim itself, and returns
// each candidate's key too.
const sqlCandidatesKeyed = `SELECT id, priority, due_s, due_ns, created_s, created_ns, concurrency_key FROM jobs INDEXED BY jobs_claim
 WHERE kind = 2 AND machine = ?1
 AND (not_before_s, not_before_ns) <= (?2, ?3)
 AND (?10 = 0 OR priority < ?4 OR (priority = ?4 AND (due_s, due_ns, created_s, created_ns, id) > (?5, ?6, ?7, ?8, ?9)))
 AND concurrency_key NOT IN (` + sqlKeysAtLimit + `)
 ORDER BY priority DESC, due_s, due_ns, created_s, created_ns, id
 LIMIT ?11`

// sqlAnyDue says whether a machine has a due ready job, from the partial
// index jobs_ready_at.
const sqlAnyDue = `SELECT EXISTS (SELECT 1 FROM jobs WHERE kind = 2 AND machine = ?1
 AND (not_before_s, not_before_ns) <= (?2, ?3))`

// sqlAnyDueKeyed says whether a machine with a limit per concurrency key
// (?12) has a due ready job whose key is below it, from jobs_claim.
const sqlAnyDueKeyed = `SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_claim WHERE kind = 2 AND machine = ?1
 AND (not_before_s, not_before_ns) <= (?2, ?3)
 AND concurrency_key NOT IN (` + sqlKeysAtLimit + `))`

// claimKey is a job's place in claim order, and its concurrency key when
// the claim has a limit per key.
type claimKey struct {
	id                    []byte
	priority              int64
	dueS, dueNs, crS, crN int64
	key                   string
}

// ClaimNext implements jobstate.Store: one transaction on the writer
// offering the candidates, read in claim order from the claim index a
// page at a time, each re-read whole before it is offered. With
// q.MaxPerKey above zero, a candidate whose concurrency key holds
// q.MaxPerKey live executions is not offered (jobstate.KeyLimiter): the
// page passes over the keys at the limit when it is read, and each
// keyed candidate's count is read again in the transaction before it is
// offered, since a job taken earlier in the batch, or a call a function
// made, may have changed it.
func (s *Store) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	jobs, err := s.claim(ctx, q, 1, fn)
	if err != nil {
		return jobstate.Job{}, err
	}
	if len(jobs) == 0 {
		return jobstate.Job{}, fmt.Errorf("%w: machine %q", jobstate.ErrNoJob, q.Machine)
	}
	return jobs[0], nil
}

// ClaimBatch implements jobstate.BatchClaimer: the candidates of
// ClaimNext, offered in claim order until n are taken or none is left,
// in one transaction: with an error, none is taken.
func (s *Store) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: batch of %d jobs", jobstate.ErrInvalidArgument, n)
	}
	return s.claim(ctx, q, n, fn)
}

// claim offers the candidates of q to fn, each once, until n were taken,
// q.Limit were offered (all when q.Limit <= 0) or none is left, and
// returns the jobs taken, in one write transaction.
func (s *Store) claim(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	if joinedTx(ctx) == nil {
		// Whether there is anything to take is asked of a reader first:
		// a worker polling an empty queue never holds up the writer.
		due, err := s.anyDue(ctx, q)
		if err != nil || !due {
			return nil, err
		}
	}
	var out []jobstate.Job
	err := s.write(ctx, "claim", func(fctx context.Context, st *txState) error {
		out = nil
		offers := 0
		var after *claimKey
		// full holds the keys found at the limit in this transaction; a
		// key stays at it while no savepoint was taken since (no nested
		// store call and no effect ran: the writes between are the claims
		// of this loop, which only add leases).
		full, mark := map[string]bool{}, st.n
		for len(out) < n && (q.Limit <= 0 || offers < q.Limit) {
			limit := min(claimPage, 2*(n-len(out)))
			page, err := s.candidates(fctx, st, q, after, limit)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				return nil
			}
			for i := range page {
				after = &page[i]
				if len(out) == n || (q.Limit > 0 && offers == q.Limit) {
					return nil
				}
				if err := fctx.Err(); err != nil {
					return err
				}
				if st.n != mark {
					clear(full)
					mark = st.n
				}
				if full[page[i].key] {
					continue // its key reached the limit in this transaction
				}
				id, err := decID(page[i].id)
				if err != nil {
					return err
				}
				snap, err := loadSnapshot(fctx, s.tx(st), id)
				if err != nil {
					if errors.Is(err, jobstate.ErrNotFound) {
						continue // pruned by a call the function made
					}
					return s.fail(fctx, "claim", err)
				}
				if !snap.Job.Due(q.Now) || snap.Job.Machine != q.Machine {
					continue // moved by a call an earlier function made
				}
				if k := snap.Job.ConcurrencyKey; q.MaxPerKey > 0 && k != "" {
					at, err := s.atKeyLimit(fctx, st, &snap.Job, q.MaxPerKey)
					if err != nil {
						return err
					}
					if at {
						full[k] = true
						continue // its key reached the limit in this transaction
					}
				}
				offers++
				job, err := s.runFn(fctx, st, &snap, fn)
				switch {
				case err == nil:
					out = append(out, job)
				case !errors.Is(err, jobstate.ErrSkip):
					return err
				}
			}
			if len(page) < limit {
				return nil // the last page
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// candidates returns the next page of q's candidates after the cursor
// (from the first when nil).
func (s *Store) candidates(ctx context.Context, st *txState, q jobstate.ClaimQuery, after *claimKey, limit int) ([]claimKey, error) {
	now, nowNs := encTime(q.Now)
	var c claimKey
	set := 0
	if after != nil {
		c, set = *after, 1
	}
	if c.id == nil {
		c.id = idArg(uuid.Nil)
	}
	args := []any{q.Machine, now, nowNs, c.priority, c.dueS, c.dueNs, c.crS, c.crN, c.id, set, limit}
	stmt := sqlCandidates
	if q.MaxPerKey > 0 {
		stmt, args = sqlCandidatesKeyed, append(args, q.MaxPerKey)
	}
	rows, err := s.tx(st).QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, s.fail(ctx, "claim", err)
	}
	defer rows.Close()
	var out []claimKey
	dest := func(k *claimKey) []any { return []any{&k.id, &k.priority, &k.dueS, &k.dueNs, &k.crS, &k.crN} }
	if q.MaxPerKey > 0 {
		dest = func(k *claimKey) []any { return []any{&k.id, &k.priority, &k.dueS, &k.dueNs, &k.crS, &k.crN, &k.key} }
	}
	for rows.Next() {
		var k claimKey
		if err := rows.Scan(dest(&k)...); err != nil {
			return nil, s.fail(ctx, "claim", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "claim", err)
	}
	return out, nil
}

// anyDue reports whether q's machine has a due ready job (under
// q.MaxPerKey, one whose key is below it), as a reader sees the database.
func (s *Store) anyDue(ctx context.Context, q jobstate.ClaimQuery) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now, nowNs := encTime(q.Now)
	stmt, args := sqlAnyDue, []any{q.Machine, now, nowNs}
	if q.MaxPerKey > 0 {
		// ?4 … ?11 are unused: the limit keeps its number (?12) in the
		// subquery both statements share.
		stmt = sqlAnyDueKeyed
		args = append(args, nil, nil, nil, nil, nil, nil, nil, nil, q.MaxPerKey)
	}
	var due bool
	if err := (readQ{s}).QueryRowContext(ctx, stmt, args...).Scan(&due); err != nil {
		return false, s.fail(ctx, "claim", err)
	}
	return due, nil
}
