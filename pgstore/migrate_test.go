package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestSchemaVersionIsTheLastMigration: SchemaVersion names the last
// embedded migration.
func TestSchemaVersionIsTheLastMigration(t *testing.T) {
	n, err := pgstore.MigrationCount()
	require.NoError(t, err)
	assert.Equal(t, pgstore.SchemaVersion, n)
}

// TestMigrateFromVersion1: a schema written by version 1, holding jobs,
// is brought to the current version with its jobs intact: the foreign
// keys are gone, the owner and key indexes are partial, and the store
// works on it.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t) + "_v1"
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, pgstore.Options{Schema: schema}, 1))

	foreignKeys := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
 WHERE n.nspname = $1 AND c.contype = 'f'`, schema).Scan(&n))
		return n
	}
	require.Equal(t, 4, foreignKeys(), "version 1 has its foreign keys")

	open := func() *jobstate.Engine {
		store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		def, err := jobstate.NewDefinition(workSpec())
		require.NoError(t, err)
		eng, err := jobstate.New(store, jobstate.WithMachines(def))
		require.NoError(t, err)
		return eng
	}
	eng := open()
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k", Owner: "alice"})
	require.NoError(t, err)
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{})
	require.NoError(t, err)

	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	assert.Equal(t, []int{2}, applied)
	assert.Zero(t, foreignKeys())
	for _, index := range []string{"jobs_owner", "jobs_key"} {
		var def string
		require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, schema, index).Scan(&def))
		assert.Contains(t, def, "WHERE", "%s is partial", index)
	}

	eng = open()
	j, err := eng.Get(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("done"), j.State)
	h, err := eng.History(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Len(t, h, 3, "create, claim, succeed")
	page, err := eng.List(ctx, jobstate.ListQuery{Machine: "work", Owner: "alice"}, "")
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1, "listing by owner on the partial index")
	page, err = eng.List(ctx, jobstate.ListQuery{Machine: "work", Key: "k"}, "")
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1, "listing by key on the partial index")
	var holder string
	require.NoError(t, pool.QueryRow(ctx, "SELECT job_id::text FROM "+schema+".idempotency_keys WHERE machine = 'work' AND key = 'k'").Scan(&holder))
	assert.Equal(t, c.Job.ID.String(), holder, "the key row survived the migration")
}
