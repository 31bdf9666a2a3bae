package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jobstate/jobstate/pgstore"
)

// migrate runs "migrate up" (pgstore.Migrate) or "migrate status" (the
// schema's version against the one this command's store needs; exit 1
// when they differ).
func (a *app) migrate(ctx context.Context, args []string) error {
	fs := a.newFlags("migrate", "up|status [--database-url URL] [--schema NAME]")
	var dbf dbFlags
	dbf.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (pos[0] != "up" && pos[0] != "status") {
		return usagef("migrate: say `migrate up` or `migrate status`")
	}
	db, err := a.checkDB(dbf)
	if err != nil {
		return err
	}
	pool, err := db.connect(ctx, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if pos[0] == "up" {
		applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: db.schema})
		if err != nil {
			return dbError(fmt.Sprintf("migrate up: schema %q", db.schema), err)
		}
		if len(applied) == 0 {
			fmt.Fprintf(a.stdout, "schema %q is at version %d: nothing to do\n", db.schema, pgstore.SchemaVersion)
			return nil
		}
		fmt.Fprintf(a.stdout, "schema %q migrated to version %d (applied %v)\n", db.schema, pgstore.SchemaVersion, applied)
		return nil
	}
	st, err := readSchema(ctx, pool, db.schema)
	if err != nil {
		return err
	}
	for _, m := range st.applied {
		fmt.Fprintf(a.stdout, "applied  %4d  %-24s %s\n", m.version, m.name, m.at.UTC().Format(time.RFC3339))
	}
	switch {
	case st.version == pgstore.SchemaVersion:
		fmt.Fprintf(a.stdout, "schema %q is at version %d: current\n", db.schema, st.version)
		return nil
	case st.version > pgstore.SchemaVersion:
		fmt.Fprintf(a.stdout, "schema %q is at version %d, newer than this command knows (%d)\n", db.schema, st.version, pgstore.SchemaVersion)
		return refusedf("migrate status: schema %q is newer (%d) than this command (%d)", db.schema, st.version, pgstore.SchemaVersion)
	default:
		pending := pgstore.SchemaVersion - st.version
		fmt.Fprintf(a.stdout, "schema %q is at version %d of %d: %d migration(s) pending\n", db.schema, st.version, pgstore.SchemaVersion, pending)
		return refusedf("migrate status: schema %q has %d migration(s) pending: run `jobstate migrate up`", db.schema, pending)
	}
}
