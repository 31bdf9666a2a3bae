package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
)

// Hooks for the external tests.

// ClaimSQL returns the store's claim statement.
func ClaimSQL(s *Store) string { return s.sql.claim }

// ClaimKeyedSQL returns the store's claim statement with a limit per key.
func ClaimKeyedSQL(s *Store) string { return s.sql.claimKeyed }

// KeyLockPrefix returns the prefix of the names of machine's key locks,
// the claim statements' last parameter.
func KeyLockPrefix(s *Store, machine string) string { return s.keyLockPrefix(machine) }

// DueSQL returns the store's Due statement for any machine.
func DueSQL(s *Store) string { return s.sql.dueAny }

// ListSQL returns the statement of a listing and its arguments.
func ListSQL(s *Store, q jobstate.ListQuery) (string, []any) {
	sql, args, err := s.listSQL(q)
	if err != nil {
		panic(err)
	}
	return sql, args
}

// GroupQueued returns the number of Updates waiting for a group.
func GroupQueued(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.q)
}

// MigrateUpTo applies the migrations up to version v only, as an older
// release would have.
func MigrateUpTo(ctx context.Context, pool *pgxpool.Pool, opts Options, v int) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer rollback(tx)
	if _, err := migrateTx(ctx, tx, opts.schema(), all[:v]); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// MigrationCount is the number of embedded migrations.
func MigrationCount() (int, error) {
	all, err := migrations()
	return len(all), err
}

// HotSQL returns the statements of the claim, update and commit paths, by
// name.
func HotSQL(s *Store) map[string]string {
	q := s.sql
	return map[string]string{
		"claim": q.claim, "claimEffs": q.claimEffs,
		"lock": q.lock, "lockMany": q.lockMany, "snapEffects": q.snapEffects,
		"updateJob": q.updateJob, "updateMany": q.updateMany,
		"insertTransitions": q.insertTransitions, "holders": q.holders, "get": q.get,
		"claimKeyed": q.claimKeyed, "keyLive": q.keyLive, "heads": q.heads,
	}
}

// PinPlansSQL is the statement sent in front of the hot statements.
const PinPlansSQL = pinPlans

// GroupRoundTrip returns the moving average of the round trips of the
// groups' COMMITs (0 before one was measured).
func GroupRoundTrip(s *Store) time.Duration { return time.Duration(s.group.rtt.Load()) }

// CopyTypes returns, for each table a COPY writes, the SQL type it sends
// each column as.
func CopyTypes() map[string]map[string]string {
	out := map[string]map[string]string{"jobs": {}, "transitions": {}}
	for i, c := range jobWriteNames {
		out["jobs"][c] = jobCopyTypes[i]
	}
	for i, c := range transitionNames {
		out["transitions"][c] = transitionTypes[i]
	}
	return out
}
