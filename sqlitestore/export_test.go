package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// MigrateUpTo applies the migrations up to version v only, in one
// IMMEDIATE transaction, as an older release's Migrate would have: the
// database is left at schema version v.
func MigrateUpTo(ctx context.Context, db *sql.DB, v int) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	if v < 1 || v > len(all) {
		return fmt.Errorf("sqlitestore: MigrateUpTo: version %d outside 1..%d", v, len(all))
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if _, err := migrateTx(ctx, conn, all[:v]); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
