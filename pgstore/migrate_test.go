package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/enginesuite"
	"github.com/jobstate/jobstate/internal/require"

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

// TestMigrateFromVersion1: a schema written by version 1, holding jobs
// (written by the store in a current schema and copied into it, column by
// column), is brought to the current version with its jobs intact: the
// foreign keys are gone, the owner and key indexes are partial, and the
// store works on it.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema, src := olderSchema(t, pool, "_v1", 1)

	foreignKeys := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
 WHERE n.nspname = $1 AND c.contype = 'f'`, schema).Scan(&n))
		return n
	}
	require.Equal(t, 4, foreignKeys(), "version 1 has its foreign keys")

	open := func(schema string) *jobstate.Engine {
		store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		def, err := jobstate.NewDefinition(workSpec())
		require.NoError(t, err)
		eng, err := jobstate.New(store, jobstate.WithMachines(def))
		require.NoError(t, err)
		return eng
	}
	eng := open(src)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: "k", Owner: "alice"})
	require.NoError(t, err)
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	copyRows(t, pool, src, schema)

	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	assert.Equal(t, versionsAfter(1), applied)
	assert.Zero(t, foreignKeys())
	for _, index := range []string{"jobs_owner", "jobs_key"} {
		var def string
		require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, schema, index).Scan(&def))
		assert.Contains(t, def, "WHERE", "%s is partial", index)
	}

	eng = open(schema)
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

// TestMigrateFromVersion2: a schema written by version 2 (its rows
// written by the store in a current schema and copied into it), holding
// jobs in every state of their machine (ready, leased, committed, retried, done,
// failed, cancelled while leased), with their history, executions,
// effects and idempotency keys, is brought to the current version; every
// job reads back as it was, lookups by id walk the primary key alone,
// and every job runs to its end on the migrated schema.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema, src := olderSchema(t, pool, "_v2", 2)

	clock := jobstate.NewManualClock(epoch)
	spec := workSpec()
	spec.Effects = []jobstate.EffectSpec{{Name: "receipt", In: []jobstate.State{"running", "done"},
		Run: func(context.Context, jobstate.Job) error { return nil }}}
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{"queued", "running"}, Event: "cancel", To: "failed"})
	open := func(schema string) *jobstate.Engine {
		store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		def, err := jobstate.NewDefinition(spec)
		require.NoError(t, err)
		eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock))
		require.NoError(t, err)
		return eng
	}
	eng := open(src)
	claim := func() jobstate.Claimed {
		t.Helper()
		clock.Advance(time.Millisecond)
		c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
		require.NoError(t, err)
		return c
	}
	create := func(nj jobstate.NewJob) uuid.UUID {
		t.Helper()
		clock.Advance(time.Millisecond)
		c, err := eng.Create(ctx, nj)
		require.NoError(t, err)
		return c.Job.ID
	}
	// Claims take the jobs in creation order: each job is created, then
	// claimed and moved, before the next.
	done := create(jobstate.NewJob{Machine: "work", Key: "done", Owner: "alice", Payload: []byte(`{"n":1}`)})
	c := claim()
	_, err := eng.Apply(ctx, done, "receipt", jobstate.Call{Actor: "w"})
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
	require.NoError(t, err)

	failed := create(jobstate.NewJob{Machine: "work", Key: "failed"})
	c = claim()
	_, err = eng.Fire(ctx, failed, "cancel", jobstate.Call{Actor: "ops", Reason: "stop"})
	require.NoError(t, err)

	committed := create(jobstate.NewJob{Machine: "work", Owner: "bob"})
	c = claim()
	_, err = eng.Commit(ctx, c.Lease, jobstate.CommitInput{Result: []byte("half")})
	require.NoError(t, err)
	committedLease := c.Lease

	leased := create(jobstate.NewJob{Machine: "work"})
	leasedClaim := claim()
	require.Equal(t, leased, leasedClaim.Job.ID)

	retried := create(jobstate.NewJob{Machine: "work"})
	c = claim()
	_, err = eng.Fail(ctx, c.Lease, errors.New("flaky"))
	require.NoError(t, err)

	later := create(jobstate.NewJob{Machine: "work", NotBefore: epoch.Add(time.Hour)})
	ready := create(jobstate.NewJob{Machine: "work", Key: "ready"})

	all := []uuid.UUID{done, failed, retried, committed, leased, later, ready}
	before := readRecords(t, eng.Store(), all)
	states := map[jobstate.State]int{}
	for _, r := range before {
		states[r.Job.State]++
	}
	require.Equal(t, map[jobstate.State]int{"done": 1, "failed": 1, "queued": 3, "running": 2}, states)
	require.Len(t, before[done].Effects, 1)
	require.Len(t, before[retried].Execs, 1)

	copyRows(t, pool, src, schema)
	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	assert.Equal(t, versionsAfter(2), applied)
	for _, index := range []string{"jobs_machine_state", "jobs_created", "jobs_updated"} {
		var def string
		require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, schema, index).Scan(&def))
		assert.NotContains(t, def, " id)", "%s no longer ends in the id", index)
	}

	eng = open(schema)
	assert.Equal(t, before, readRecords(t, eng.Store(), all), "every job reads back as it was")
	for key, id := range map[string]uuid.UUID{"done": done, "failed": failed, "ready": ready} {
		var holder uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, "SELECT job_id FROM "+schema+".idempotency_keys WHERE machine = 'work' AND key = $1", key).Scan(&holder))
		assert.Equal(t, id, holder, "key %q", key)
	}
	page, err := eng.List(ctx, jobstate.ListQuery{Machine: "work", States: []jobstate.State{"queued"}}, "")
	require.NoError(t, err)
	require.Len(t, page.Jobs, 3)
	assert.Equal(t, []uuid.UUID{retried, later, ready}, []uuid.UUID{page.Jobs[0].ID, page.Jobs[1].ID, page.Jobs[2].ID}, "in creation order")

	// Every job runs to its end on the migrated schema.
	_, err = eng.Finish(ctx, committedLease)
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, leasedClaim.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	clock.Set(epoch.Add(2 * time.Hour))
	for {
		c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w2"})
		if errors.Is(err, jobstate.ErrNoJob) {
			break
		}
		require.NoError(t, err)
		_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
		require.NoError(t, err)
	}
	for _, id := range all {
		j, err := eng.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, jobstate.KindTerminal, j.Kind, "job %s ends", id)
	}
	_, err = eng.Apply(ctx, done, "receipt", jobstate.Call{Actor: "w"})
	require.ErrorIs(t, err, jobstate.ErrEffectApplied, "the effect recorded before the migration still counts")
}

// olderSchema returns a fresh schema at version v, and a fresh schema at
// the current version, both dropped when the test ends: the store writes
// jobs in the second, and copyRows puts them in the first.
func olderSchema(t *testing.T, pool *pgxpool.Pool, suffix string, v int) (older, current string) {
	t.Helper()
	ctx := context.Background()
	older = pgtest.Schema(t) + suffix
	current = older + "_src"
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+older+" CASCADE; DROP SCHEMA IF EXISTS "+current+" CASCADE")
	})
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, pgstore.Options{Schema: older}, v))
	_, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: current})
	require.NoError(t, err)
	return older, current
}

// copyRows copies every row of the store's tables from schema from into
// schema to, in the columns to's tables have, identity values included
// (and its sequences moved past them), as the older release that created
// to would have written them (its tables only: key_heads from version 5
// on). Before version 6, a job's executions were rows of their own: they
// are made from the store's reading of them; in version 6, they were one
// JSON list in the job's row (execs), made the same way.
func copyRows(t *testing.T, pool *pgxpool.Pool, from, to string) {
	t.Helper()
	ctx := context.Background()
	for _, table := range []string{"jobs", "transitions", "effects", "idempotency_keys", "key_heads"} {
		var cols []string
		rows, err := pool.Query(ctx, `SELECT quote_ident(column_name) FROM information_schema.columns c
 WHERE table_schema = $1 AND table_name = $2
   AND EXISTS (SELECT 1 FROM information_schema.columns s
                WHERE s.table_schema = $3 AND s.table_name = c.table_name AND s.column_name = c.column_name)
 ORDER BY ordinal_position`, to, table, from)
		require.NoError(t, err)
		cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		if len(cols) == 0 {
			continue // a table the older version did not have
		}
		list := strings.Join(cols, ", ")
		_, err = pool.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM %s",
			pgx.Identifier{to, table}.Sanitize(), list, list, pgx.Identifier{from, table}.Sanitize()))
		require.NoError(t, err, table)
	}
	name := pgx.Identifier{to, "effects"}.Sanitize()
	_, err := pool.Exec(ctx, fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', 'seq'), coalesce(max(seq), 0) + 1, false) FROM %s", name, name))
	require.NoError(t, err)
	var tables, lists int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
 (SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'executions'),
 (SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'jobs' AND column_name = 'execs')`,
		to).Scan(&tables, &lists))
	if tables > 0 {
		copyExecutions(t, pool, from, to)
	}
	if lists > 0 {
		copyExecutionLists(t, pool, from, to)
	}
}

// copyExecutionLists writes the executions of the jobs of schema from as
// version 6 kept them: a JSON list in the column execs of the job's row
// in schema to, each an object with id, attempt and status, owner and
// error when not empty, and the instants when set (RFC 3339 in UTC).
func copyExecutionLists(t *testing.T, pool *pgxpool.Pool, from, to string) {
	t.Helper()
	ctx := context.Background()
	at := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(time.RFC3339Nano) // as version 6 wrote it: trailing zeros left out
		return &s
	}
	type item struct {
		ID             uuid.UUID `json:"id"`
		Attempt        int       `json:"attempt"`
		Owner          string    `json:"owner,omitempty"`
		Status         string    `json:"status"`
		LeaseExpiresAt *string   `json:"lease_expires_at,omitempty"`
		HeartbeatAt    *string   `json:"heartbeat_at,omitempty"`
		ClaimedAt      *string   `json:"claimed_at,omitempty"`
		StartedAt      *string   `json:"started_at,omitempty"`
		FinishedAt     *string   `json:"finished_at,omitempty"`
		Error          string    `json:"error,omitempty"`
	}
	update := "UPDATE " + pgx.Identifier{to, "jobs"}.Sanitize() + " SET execs = $2::jsonb WHERE id = $1"
	eachExecutions(t, pool, from, func(id uuid.UUID, xs []jobstate.Execution) {
		list := make([]item, len(xs))
		for i, x := range xs {
			list[i] = item{ID: x.ID, Attempt: x.Attempt, Owner: x.Owner, Status: string(x.Status),
				LeaseExpiresAt: at(x.LeaseExpiresAt), HeartbeatAt: at(x.HeartbeatAt), ClaimedAt: at(x.ClaimedAt),
				StartedAt: at(x.StartedAt), FinishedAt: at(x.FinishedAt), Error: x.Error}
		}
		data, err := json.Marshal(list)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, update, id, string(data))
		require.NoError(t, err)
	})
}

// copyExecutions writes the executions of the jobs of schema from (kept
// in their rows) as rows of the table executions of schema to, in order.
func copyExecutions(t *testing.T, pool *pgxpool.Pool, from, to string) {
	t.Helper()
	ctx := context.Background()
	// An instant as the older schema stored it: the microseconds and the
	// nanoseconds below ('-infinity' and 0 for the zero time).
	at := func(t time.Time) (pgtype.Timestamptz, int16) {
		if t.IsZero() {
			return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, 0
		}
		u := t.Truncate(time.Microsecond)
		return pgtype.Timestamptz{Time: u, Valid: true}, int16(t.Sub(u))
	}
	insert := "INSERT INTO " + pgx.Identifier{to, "executions"}.Sanitize() + ` (job_id, id, attempt, owner, status,
 lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns, claimed_at, claimed_ns, started_at, started_ns,
 finished_at, finished_ns, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`
	eachExecutions(t, pool, from, func(id uuid.UUID, xs []jobstate.Execution) {
		for _, x := range xs {
			lease, leaseNs := at(x.LeaseExpiresAt)
			hb, hbNs := at(x.HeartbeatAt)
			claimed, claimedNs := at(x.ClaimedAt)
			started, startedNs := at(x.StartedAt)
			finished, finishedNs := at(x.FinishedAt)
			_, err := pool.Exec(ctx, insert, id, x.ID, x.Attempt, x.Owner, string(x.Status),
				lease, leaseNs, hb, hbNs, claimed, claimedNs, started, startedNs, finished, finishedNs, x.Error)
			require.NoError(t, err)
		}
	})
}

// eachExecutions calls fn with the id and the executions of every job of
// schema from.
func eachExecutions(t *testing.T, pool *pgxpool.Pool, from string, fn func(uuid.UUID, []jobstate.Execution)) {
	t.Helper()
	ctx := context.Background()
	store, err := pgstore.New(pool, pgstore.Options{Schema: from})
	require.NoError(t, err)
	defer store.Close()
	rows, err := pool.Query(ctx, "SELECT id FROM "+pgx.Identifier{from, "jobs"}.Sanitize())
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	for _, id := range ids {
		xs, err := store.Executions(ctx, id)
		require.NoError(t, err)
		fn(id, xs)
	}
}

// readRecords reads everything store holds about each of the jobs ids
// (enginesuite.Load).
func readRecords(t *testing.T, store jobstate.Store, ids []uuid.UUID) map[uuid.UUID]enginesuite.State {
	t.Helper()
	out := map[uuid.UUID]enginesuite.State{}
	for _, id := range ids {
		out[id] = enginesuite.Load(t, store, id)
	}
	return out
}

// keyedOpener returns what opens a store on a schema of pool, with
// keyedEngine on clock; the store is closed when the test ends.
func keyedOpener(t *testing.T, pool *pgxpool.Pool, clock *jobstate.ManualClock) func(schema string) (*pgstore.Store, *jobstate.Engine) {
	return func(schema string) (*pgstore.Store, *jobstate.Engine) {
		store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(store.Close)
		return store, keyedEngine(t, store, clock)
	}
}
