package sqlitestore

import (
	"context"

	"github.com/jobstate/jobstate"
)

var _ jobstate.KeyLimiter = (*Store)(nil)

// LimitsKeys implements jobstate.KeyLimiter: the store enforces
// Policy.MaxPerKey. A claim, and an Update whose Write carries MaxPerKey,
// count the live executions of the job's key (the sum of leases over the
// machine's jobs with that key, from the index jobs_key_live) inside the
// write's own transaction, which is IMMEDIATE: it holds the database's
// write lock from its first statement, so no other writer (another
// goroutine on the store's one writer connection, or another process on
// the file) can change the count between the read and the write.
func (s *Store) LimitsKeys() bool { return true }

// sqlKeyLive is the number of live executions of a machine's key: the sum
// of leases over its keyed jobs that hold any, read from jobs_key_live.
const sqlKeyLive = `SELECT coalesce(sum(leases), 0) FROM jobs INDEXED BY jobs_key_live
 WHERE machine = ?1 AND concurrency_key = ?2 AND leases > 0 AND concurrency_key <> ''`

// keyLive returns the live executions of key among machine's jobs, read
// in st's transaction.
func (s *Store) keyLive(ctx context.Context, st *txState, machine, key string) (int, error) {
	var n int64
	if err := s.tx(st).QueryRowContext(ctx, sqlKeyLive, machine, key).Scan(&n); err != nil {
		return 0, s.fail(ctx, "key limit", err)
	}
	return int(n), nil
}

// checkKeyLimit returns the error of jobstate.CheckKeyLimit for w over
// cur, with the live executions of cur's key counted in st's transaction.
// A write that carries no limit, of a job without a key, or that does not
// raise its leases reads nothing.
func (s *Store) checkKeyLimit(ctx context.Context, st *txState, cur *jobstate.Job, w *jobstate.Write) error {
	if w.MaxPerKey <= 0 || cur.ConcurrencyKey == "" || w.Job.Leases <= cur.Leases {
		return nil
	}
	live, err := s.keyLive(context.WithoutCancel(ctx), st, cur.Machine, cur.ConcurrencyKey)
	if err != nil {
		return err
	}
	return jobstate.CheckKeyLimit(*cur, *w, live)
}

// atKeyLimit reports whether j may not be claimed under a limit of limit
// live executions per key (none when limit <= 0), counted in st's
// transaction.
func (s *Store) atKeyLimit(ctx context.Context, st *txState, j *jobstate.Job, limit int) (bool, error) {
	if limit <= 0 || j.ConcurrencyKey == "" {
		return false, nil
	}
	live, err := s.keyLive(ctx, st, j.Machine, j.ConcurrencyKey)
	if err != nil {
		return false, err
	}
	return live >= limit, nil
}
