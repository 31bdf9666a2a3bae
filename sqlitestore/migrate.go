package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

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
	return storemigrate.Load(migrationFiles, "migrations", "sqlitestore")
}

// SchemaVersion is the schema version this package's migrations lead to.
const SchemaVersion = 2

// Migrate brings the schema of the database db is open on to
// SchemaVersion and returns the versions it applied (none when the
// schema was current). Open calls it; a program that opens the file with
// database/sql itself (driver "sqlite", modernc.org/sqlite) may call it
// too.
//
// It writes the schema's version into the file's header (user_version)
// every time, so that a file that cannot be written is refused here. It
// is idempotent and safe when several processes call it at once: the
// whole migration is one IMMEDIATE transaction, which holds the file's
// write lock, so concurrent callers wait for one another and find the
// work done. Applied versions are recorded in the table
// jobstate_migrations. A database whose recorded version is above
// SchemaVersion (written by a newer release) is refused with
// ErrSchemaTooNew and left unchanged.
//
// A nil db is refused with jobstate.ErrInvalidArgument; a file that
// cannot be written gives a *jobstate.UnavailableError.
func Migrate(ctx context.Context, db *sql.DB) ([]int, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlitestore: Migrate: nil db", jobstate.ErrInvalidArgument)
	}
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, unavailable("migrate", err, false)
	}
	defer conn.Close()
	// BEGIN IMMEDIATE whatever the handle's default transaction mode.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, unavailable("migrate", err, false)
	}
	applied, err := migrateTx(ctx, conn, all)
	if err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return nil, err
	}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return nil, unavailable("migrate: commit", err, false)
	}
	return applied, nil
}

func migrateTx(ctx context.Context, conn *sql.Conn, all []migration) ([]int, error) {
	const setup = `CREATE TABLE IF NOT EXISTS jobstate_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)`
	if _, err := conn.ExecContext(ctx, setup); err != nil {
		return nil, unavailable("migrate", err, false)
	}
	var current int
	if err := conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM jobstate_migrations`).Scan(&current); err != nil {
		return nil, unavailable("migrate: reading the applied versions", err, false)
	}
	if current > len(all) {
		return nil, fmt.Errorf("%w: the schema is at version %d, this release knows %d", ErrSchemaTooNew, current, len(all))
	}
	var applied []int
	for _, m := range all[current:] {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return nil, unavailable(fmt.Sprintf("migrate: version %d (%s)", m.Version, m.Name), err, false)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO jobstate_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return nil, unavailable(fmt.Sprintf("migrate: recording version %d", m.Version), err, false)
		}
		applied = append(applied, m.Version)
	}
	// A write every time, so that a file that cannot be written is found
	// here rather than at the first job: the header's user_version is the
	// schema's version.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(all))); err != nil {
		return nil, unavailable("migrate", err, false)
	}
	return applied, nil
}
