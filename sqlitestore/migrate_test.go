package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
)

// queueSpec is the machine of testdata/schema1.sql, here with a limit of
// one live execution per concurrency key.
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

// schema1File writes the version-1 database of testdata/schema1.sql to a
// new file and returns its path.
func schema1File(t *testing.T) string {
	t.Helper()
	dump, err := os.ReadFile(filepath.Join("testdata", "schema1.sql"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "jobs.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(string(dump))
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
	path := schema1File(t)
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
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
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
