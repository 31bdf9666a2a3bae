package pgstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// The types a COPY of new jobs and their history sends its columns as are
// the tables' (information_schema's udt_name), or the server would read
// the binary data wrongly or refuse it.
func TestCopyTypesMatchTables(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	for table, cols := range pgstore.CopyTypes() {
		rows, err := s.Pool().Query(ctx, `SELECT column_name, udt_name FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = $2`, s.Schema(), table)
		require.NoError(t, err)
		have := map[string]string{}
		for rows.Next() {
			var name, typ string
			require.NoError(t, rows.Scan(&name, &typ))
			have[name] = typ
		}
		require.NoError(t, rows.Err())
		for col, typ := range cols {
			if have[col] != typ {
				t.Errorf("%s.%s is %q in the table, sent as %q", table, col, have[col], typ)
			}
		}
	}
}

// A job created through CreateBatch (COPY) with every field and
// execution set, at the edges of what the store keeps, reads back as
// CreateBatch returned it, with its executions and history; so does a job
// that leaves every column at its default.
func TestCreateBatchRoundTripsEveryField(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	at := jobstate.MaxTime.Add(-time.Nanosecond)
	low := jobstate.MinTime.Add(999)
	x1, x2, x3 := uuid.New(), uuid.New(), uuid.New()
	full := jobstate.Job{
		ID: uuid.New(), Machine: "ünïcode ☃ machine", State: "RUNNING", Kind: jobstate.KindActive,
		Outcome: "partial", Payload: []byte{0, 1, 2, 255}, Result: []byte{}, Version: 3, Attempt: 3,
		RetryCount: 2, MaxRetries: math.MaxInt32,
		Backoff: jobstate.Backoff{Kind: jobstate.BackoffExponential, Initial: -time.Nanosecond, Factor: math.Inf(1),
			Max: math.MaxInt64, Jitter: jobstate.JitterFull},
		OwnBackoff: true, LastError: "line 1\nline \"2\" \\ 🙂", ErrorClass: jobstate.ErrorClass("transient"),
		IdempotencyKey: "key", Fingerprint: "fp", Owner: "owner", Priority: -math.MaxInt32,
		CreatedAt: low, UpdatedAt: at, StartedAt: low.Add(1), CompletedAt: at.Add(-1), NotBefore: at,
		Deadline: at, Leases: 2, LeaseExpiresAt: low.Add(2), HeartbeatAt: low.Add(3), Committed: x2,
		CancelRequested: true, WakeAt: time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("x", -3600)),
		SweepFailures: 7, SweepRetryAt: time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC), ConcurrencyKey: "ck",
	}
	execs := []jobstate.Execution{
		{ID: x1, JobID: full.ID, Attempt: 1, Owner: "w1", Status: jobstate.ExecAborted, ClaimedAt: low, FinishedAt: at, Error: "é"},
		{ID: x2, JobID: full.ID, Attempt: 2, Status: jobstate.ExecCommitted, LeaseExpiresAt: at, HeartbeatAt: low},
		{ID: x3, JobID: full.ID, Attempt: 3, Owner: "w3", Status: jobstate.ExecLeased, ClaimedAt: at, StartedAt: at,
			LeaseExpiresAt: at, HeartbeatAt: at, Error: "x"},
	}
	hist := []jobstate.Transition{
		{JobID: full.ID, Version: 1, To: "CREATED", Event: "create", Actor: "a", At: low},
		{JobID: full.ID, Version: 3, From: "CREATED", To: "RUNNING", Event: "go", Reason: "r", ExecID: x3, At: at},
	}
	bare := jobstate.Job{ID: uuid.New(), Machine: "m", State: "READY", Kind: jobstate.KindReady, Version: 1,
		CreatedAt: low, UpdatedAt: low}
	writes := []jobstate.Write{
		{Job: full, Executions: execs, Transitions: hist},
		{Job: bare, Transitions: []jobstate.Transition{{JobID: bare.ID, Version: 1, To: "READY", Event: "create", At: low}}},
	}
	created, err := s.CreateBatch(ctx, make([]jobstate.BatchKey, len(writes)), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
		return writes[i], nil
	})
	require.NoError(t, err)
	for i, w := range writes {
		got, err := s.Get(ctx, w.Job.ID)
		require.NoError(t, err)
		require.Equal(t, created[i].Job, got, "job %d as read back and as CreateBatch returned it", i)
		require.True(t, got.CreatedAt.Equal(w.Job.CreatedAt) && got.WakeAt.Equal(w.Job.WakeAt) && got.SweepRetryAt.Equal(w.Job.SweepRetryAt))
		require.Equal(t, w.Job.Payload, got.Payload)
		require.Equal(t, w.Job.Backoff, got.Backoff)
		xs, err := s.Executions(ctx, w.Job.ID)
		require.NoError(t, err)
		require.Len(t, xs, len(w.Executions))
		for k := range xs {
			require.Equal(t, w.Executions[k].ID, xs[k].ID)
			require.True(t, xs[k].ClaimedAt.Equal(w.Executions[k].ClaimedAt) && xs[k].FinishedAt.Equal(w.Executions[k].FinishedAt))
			require.Equal(t, w.Executions[k].Status, xs[k].Status)
			require.Equal(t, w.Executions[k].Error, xs[k].Error)
		}
		h, err := s.History(ctx, w.Job.ID)
		require.NoError(t, err)
		require.Len(t, h, len(w.Transitions))
		for k := range h {
			require.True(t, h[k].At.Equal(w.Transitions[k].At))
			h[k].At = w.Transitions[k].At
			require.Equal(t, w.Transitions[k], h[k])
		}
	}
}

// A text the server cannot keep (not UTF-8, or with a NUL) fails the
// batch with ErrInvalidArgument, and nothing of it is created.
func TestCreateBatchRefusesBadText(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	for _, text := range []string{"bad \xff", "nul \x00"} {
		good := jobstate.Job{ID: uuid.New(), Machine: "m", State: "READY", Kind: jobstate.KindReady, Version: 1}
		bad := good
		bad.ID, bad.LastError = uuid.New(), text
		_, err := s.CreateBatch(ctx, make([]jobstate.BatchKey, 2), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
			return jobstate.Write{Job: []jobstate.Job{good, bad}[i]}, nil
		})
		require.True(t, errors.Is(err, jobstate.ErrInvalidArgument), "text %q: %v", text, err)
		_, err = s.Get(ctx, good.ID)
		require.ErrorIs(t, err, jobstate.ErrNotFound)
	}
}
