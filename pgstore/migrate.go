package pgstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/storemigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one versioned step of the schema.
type migration = storemigrate.Migration

// migrations returns the embedded migrations in version order. A file is
// named NNNN_name.sql; its number is its version.
func migrations() ([]migration, error) {
	return storemigrate.Load(migrationFiles, "migrations", "pgstore")
}

// SchemaVersion is the schema version this package's migrations lead to.
const SchemaVersion = 8

// Migrate brings the store's schema (opts.Schema, "public" when empty) to
// SchemaVersion, creating the schema if it does not exist, and returns
// the versions it applied (none when the schema was current).
//
// It is idempotent and safe when several processes call it at once: the
// whole migration is one transaction that first takes a transaction-level
// advisory lock on the schema's name, so concurrent callers wait for one
// another and find the work done. Applied versions are recorded in the
// table jobstate_migrations of the schema. A schema whose recorded version
// is above SchemaVersion (written by a newer release) is refused with an
// error and left unchanged.
//
// A nil pool is refused with jobstate.ErrInvalidArgument. A server that
// cannot be reached gives a *jobstate.UnavailableError, as the store's
// methods do: with MayHaveApplied set when the connection was lost after
// the COMMIT was sent (Migrate may then simply be called again).
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts Options) ([]int, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: Migrate: nil pool", jobstate.ErrInvalidArgument)
	}
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	schema := opts.schema()
	what := fmt.Sprintf("migrate: schema %q", schema)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, wrapErr(ctx, what, err, inTransaction)
	}
	defer rollback(tx)
	applied, err := migrateTx(ctx, tx, schema, all)
	if err != nil {
		return nil, wrapErr(ctx, what, err, inTransaction)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, wrapErr(ctx, what+": commit", err, atCommit)
	}
	return applied, nil
}

func migrateTx(ctx context.Context, tx pgx.Tx, schema string, all []migration) ([]int, error) {
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('jobstate.migrate:' || $1, 0))`, schema); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	setup := `CREATE SCHEMA IF NOT EXISTS ` + ident + `;
SET LOCAL search_path TO ` + ident + `;
CREATE TABLE IF NOT EXISTS jobstate_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	if _, err := tx.Exec(ctx, setup); err != nil {
		return nil, err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM jobstate_migrations`).Scan(&current); err != nil {
		return nil, fmt.Errorf("reading the applied versions: %w", err)
	}
	if current > len(all) {
		return nil, fmt.Errorf("the schema is at version %d, newer than this release knows (%d)", current, len(all))
	}
	var applied []int
	for _, m := range all[current:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("version %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO jobstate_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("recording version %d: %w", m.Version, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}
