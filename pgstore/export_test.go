package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
)

// Hooks for the external tests.

// ClaimSQL returns the store's claim statement.
func ClaimSQL(s *Store) string { return s.sql.claim }

// DueSQL returns the store's Due statement for any machine.
func DueSQL(s *Store) string { return s.sql.dueAny }

// ChannelOf returns the store's notification channel.
func ChannelOf(s *Store) string { return s.sql.channel }

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
