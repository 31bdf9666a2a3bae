package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// queueSpec is the machine of version1File's jobs, with a limit of one
// live execution per concurrency key.
func queueSpec() jobstate.Spec {
	from := func(s ...jobstate.State) []jobstate.State { return s }
	return jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: from("QUEUED"), Event: jobstate.EventClaim, To: "RUNNING"},
			{From: from("RUNNING"), Event: jobstate.EventSucceed, To: "DONE"},
			{From: from("RUNNING"), Event: jobstate.EventRetry, To: "QUEUED"},
			{From: from("RUNNING"), Event: jobstate.EventFail, To: "FAILED"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:  30 * time.Second,
			MaxPerKey: 1,
			Retry:     jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
		},
	}
}

// version1File returns the path of a new database at schema version 1
// (migration 1 alone) holding three jobs of queueSpec's machine, created
// one second apart from start: one done (with result "ok"), one running
// (its lease held), one queued, each with an idempotency key and owner
// named for its state, priority i and payload {"n":i}. The store writes
// the jobs in a database of the current version, and its rows are copied
// into the version-1 database in the columns that version's tables have,
// as the store of version 1 wrote them.
func version1File(t *testing.T, start time.Time) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "current.db")
	s, err := sqlitestore.Open(ctx, src, sqlitestore.Options{})
	require.NoError(t, err)
	def, err := jobstate.NewDefinition(queueSpec())
	require.NoError(t, err)
	clock := jobstate.NewManualClock(start)
	eng, err := jobstate.New(s, jobstate.WithMachines(def), jobstate.WithClock(clock))
	require.NoError(t, err)
	for i, key := range []string{"done", "running", "queued"} {
		clock.Advance(time.Second)
		_, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Key: key, Owner: "owner-" + key, Priority: i, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		require.NoError(t, err)
		if key == "queued" {
			continue
		}
		c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
		require.NoError(t, err)
		if key == "done" {
			_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte(`"ok"`)})
			require.NoError(t, err)
		}
	}
	require.NoError(t, s.Close())

	path := filepath.Join(dir, "jobs.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, sqlitestore.MigrateUpTo(ctx, db, 1))
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "ATTACH DATABASE ? AS src", src)
	require.NoError(t, err)
	for _, table := range []string{"jobs", "executions", "transitions", "effects", "idempotency_keys"} {
		rows, err := conn.QueryContext(ctx, "SELECT name FROM pragma_table_info(?, 'main')", table)
		require.NoError(t, err)
		var cols []string
		for rows.Next() {
			var c string
			require.NoError(t, rows.Scan(&c))
			cols = append(cols, `"`+c+`"`)
		}
		require.NoError(t, rows.Err())
		require.NotEmpty(t, cols, table)
		list := strings.Join(cols, ", ")
		_, err = conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO main.%s (%s) SELECT %s FROM src.%s", table, list, list, table))
		require.NoError(t, err, table)
	}
	_, err = conn.ExecContext(ctx, "DETACH DATABASE src")
	require.NoError(t, err)
	return path
}

// TestMigrateFromVersion1 opens a database written by schema version 1
// holding a done, a running and a queued job: Open applies version 2
// alone, every job reads back as it was written (no concurrency key), the
// file is intact, the running job commits through its lease, the queued
// one is claimed and done, an idempotency key still names its job, and
// new keyed jobs are limited.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := version1File(t, start)
	s := openAt(t, path, sqlitestore.Options{})

	var versions []int
	rows, err := s.DB().QueryContext(ctx, `SELECT version FROM jobstate_migrations ORDER BY version`)
	require.NoError(t, err)
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		versions = append(versions, v)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []int{1, 2}, versions)
	var userVersion int
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA user_version`).Scan(&userVersion))
	assert.Equal(t, sqlitestore.SchemaVersion, userVersion)
	applied, err := sqlitestore.Migrate(ctx, s.DB())
	require.NoError(t, err)
	assert.Empty(t, applied, "the schema is current")

	jobs, err := s.List(ctx, jobstate.ListQuery{Machine: "queue", Limit: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	for i, want := range []struct {
		state    jobstate.State
		key      string
		version  int64
		leases   int
		history  int
		attempts int
	}{
		{"DONE", "done", 3, 0, 3, 1},
		{"RUNNING", "running", 2, 1, 2, 1},
		{"QUEUED", "queued", 1, 0, 1, 0},
	} {
		j := jobs[i]
		assert.Equal(t, want.state, j.State, "job %d", i)
		assert.Equal(t, want.key, j.IdempotencyKey)
		assert.Equal(t, "owner-"+want.key, j.Owner)
		assert.Equal(t, i, j.Priority)
		assert.Equal(t, want.version, j.Version)
		assert.Equal(t, want.leases, j.Leases)
		assert.Equal(t, "", j.ConcurrencyKey, "a job of version 1 has no concurrency key")
		assert.Equal(t, start.Add(time.Duration(i+1)*time.Second), j.CreatedAt)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(j.Payload))
		hist, err := s.History(ctx, j.ID)
		require.NoError(t, err)
		assert.Len(t, hist, want.history)
		execs, err := s.Executions(ctx, j.ID)
		require.NoError(t, err)
		assert.Len(t, execs, want.attempts)
	}
	assert.Equal(t, `"ok"`, string(jobs[0].Result))
	var check string
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check))
	assert.Equal(t, "ok", check)

	def, err := jobstate.NewDefinition(queueSpec())
	require.NoError(t, err)
	clock := jobstate.NewManualClock(start.Add(10 * time.Second))
	eng, err := jobstate.New(s, jobstate.WithMachines(def), jobstate.WithClock(clock))
	require.NoError(t, err)

	// The running job commits through the lease its worker holds.
	running := jobs[1]
	execs, err := s.Executions(ctx, running.ID)
	require.NoError(t, err)
	x := execs[0]
	done, err := eng.Succeed(ctx, jobstate.Lease{JobID: running.ID, ExecID: x.ID, Token: x.Attempt, Owner: x.Owner,
		ExpiresAt: x.LeaseExpiresAt, TTL: 30 * time.Second}, jobstate.CommitInput{})
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("DONE"), done.State)

	// The queued job is claimed and done.
	c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	require.NoError(t, err)
	assert.Equal(t, jobs[2].ID, c.Job.ID)
	_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	_, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)

	// The idempotency key still names its job.
	again, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Key: "queued", Owner: "owner-queued", Priority: 2, Payload: []byte(`{"n":2}`)})
	require.NoError(t, err)
	assert.True(t, again.Existing)
	assert.Equal(t, jobs[2].ID, again.Job.ID)

	// New jobs carry their key, and the limit holds.
	k1, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", ConcurrencyKey: "k"})
	require.NoError(t, err)
	clock.Advance(time.Second)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: "queue", ConcurrencyKey: "k"})
	require.NoError(t, err)
	c, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	require.NoError(t, err)
	assert.Equal(t, k1.Job.ID, c.Job.ID)
	assert.Equal(t, "k", c.Job.ConcurrencyKey)
	_, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	assert.True(t, errors.Is(err, jobstate.ErrNoJob), "the key's second job waits: %v", err)
}
