package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// Concurrency keys (Policy.MaxPerKey). The live executions of a key are
// the sum of jobs.leases over its machine's jobs with that
// concurrency_key, read through the partial index jobs_key_live. A
// transaction that may raise them first holds the key's lock, a
// transaction-level advisory lock on (schema, machine, key), taken in a
// statement before the one that counts: under READ COMMITTED each
// statement reads a snapshot taken when it starts, and an advisory lock
// is released only once its holder's commit is visible, so the count
// sees every claim of the key that committed before. A claim takes the
// lock of a candidate's key without waiting, in the claim statement
// itself, before it locks the candidate's row, and passes over the jobs
// of a key whose lock another transaction holds: the rows of a key are
// locked by claims only under its lock, so each key's jobs are claimed
// in claim order. Update waits for the lock, after the job's row. The
// same lock guards the key's heads (keyheads.go), which every claim of a
// job with a key changes, with a limit or without.

// LimitsKeys implements jobstate.KeyLimiter: the store enforces
// Policy.MaxPerKey. ClaimNext and ClaimBatch with ClaimQuery.MaxPerKey
// above zero pass over the jobs of a key at its limit, and of a key whose
// lock another transaction holds; Update refuses a Write whose MaxPerKey
// its key would pass (jobstate.CheckKeyLimit), writing nothing.
func (s *Store) LimitsKeys() bool { return true }

// keyLockName is the name whose hash is the advisory lock of a
// concurrency key.
func (s *Store) keyLockName(machine, key string) string {
	return fmt.Sprintf("jobstate.limit:%d:%s:%d:%s:%s", len(s.schema), s.schema, len(machine), machine, key)
}

// needsKeyCheck reports whether w over cur must be checked against the
// limit of cur's concurrency key: it carries a limit and raises the
// leases of a job with a key.
func needsKeyCheck(cur *jobstate.Job, w *jobstate.Write) bool {
	return w.MaxPerKey > 0 && cur.ConcurrencyKey != "" && w.Job.Leases > cur.Leases
}

// keyLockPrefix is the start of keyLockName for machine's keys.
func (s *Store) keyLockPrefix(machine string) string {
	return fmt.Sprintf("jobstate.limit:%d:%s:%d:%s:", len(s.schema), s.schema, len(machine), machine)
}

// gateKeys takes the locks of keys (of machine), waiting for each in a
// fixed order (at once for a lock the transaction holds), and counts
// their live executions, in one round trip: the lock statement first,
// then the count, which therefore sees every claim committed before the
// locks were granted. Its errors are the driver's.
func (s *Store) gateKeys(ctx context.Context, q querier, machine string, keys []string) (map[string]int, error) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = s.keyLockName(machine, k)
	}
	b := &pgx.Batch{}
	b.Queue(s.sql.keyWait, names)
	p := plansOf(q)
	pinned := p.pin(b)
	b.Queue(s.sql.keyLive, machine, keys)
	restored := p.unpin(b, pinned)
	br := q.SendBatch(ctx, b)
	live, err := readGate(br, len(keys), pinned, restored)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return live, err
}

// readGate reads the answers of gateKeys' batch (of n keys): the live
// executions of each key holding any. pinned and restored tell whether
// pinPlans and restorePlans were queued.
func readGate(br pgx.BatchResults, n int, pinned, restored bool) (map[string]int, error) {
	if _, err := br.Exec(); err != nil { // the locks
		return nil, err
	}
	if err := skipPlan(br, pinned); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	live := make(map[string]int, n)
	for rows.Next() {
		var k string
		var c int64
		if err := rows.Scan(&k, &c); err != nil {
			rows.Close()
			return nil, err
		}
		live[k] = int(c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := skipPlan(br, restored); err != nil {
		return nil, err
	}
	return live, nil
}

// checkKey checks w over snap against its key's limit when it must be
// (needsKeyCheck): live is the key's live executions when the
// transaction holds its lock already and has counted them, else nil, and
// the lock is waited for and the key counted in q. A write the limit
// refuses gives the error of jobstate.CheckKeyLimit; a write that breaks
// the Store contract, jobstate.CheckWrite's.
func (s *Store) checkKey(ctx context.Context, q querier, snap *jobstate.Snapshot, w *jobstate.Write, live *int) error {
	cur := &snap.Job
	if !needsKeyCheck(cur, w) {
		return nil
	}
	if err := jobstate.CheckWrite(*snap, *w); err != nil {
		return err
	}
	if live == nil {
		counts, err := s.gateKeys(ctx, q, cur.Machine, []string{cur.ConcurrencyKey})
		if err != nil {
			return s.fail(ctx, "update: locking the concurrency key", err)
		}
		n := counts[cur.ConcurrencyKey]
		live = &n
	}
	return jobstate.CheckKeyLimit(*cur, *w, *live)
}

// waitKeys takes the locks of the concurrency keys named (keyLockName),
// waiting for each, in the names' order once sorted. Its errors are the
// driver's.
func (s *Store) waitKeys(ctx context.Context, q querier, names []string) error {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	_, err := q.Exec(ctx, s.sql.keyWait, names)
	return err
}
