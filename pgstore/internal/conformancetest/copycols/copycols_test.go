// The columns CreateBatch's COPY writes, as a rapid property: in the test
// module so that rapid never reaches pgstore's users.
package copycols_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// epoch is the instant the drawn jobs' times count from.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drawJob draws a new job whose every field is either its zero value
// (the column's default) or set, so that batches mix columns all
// defaults, some set and all set.
func drawJob(t *rapid.T, i int) jobstate.Write {
	maybe := func(name string) bool { return rapid.Bool().Draw(t, name) }
	at := func(name string) time.Time {
		if !maybe(name) {
			return time.Time{}
		}
		return epoch.Add(time.Duration(rapid.Int64Range(1, 1e15).Draw(t, name+"ns")))
	}
	id := uuid.New()
	j := jobstate.Job{ID: id, Machine: "work", State: "queued", Kind: jobstate.KindReady, Version: 1,
		CreatedAt: epoch.Add(time.Duration(i)), UpdatedAt: epoch.Add(time.Duration(i))}
	if maybe("payload") {
		j.Payload = []byte(rapid.StringN(0, 8, -1).Draw(t, "payloadText"))
	}
	if maybe("owner") {
		j.Owner = "alice"
	}
	if maybe("key") {
		j.IdempotencyKey, j.Fingerprint = "k", "f"
	}
	if maybe("priority") {
		j.Priority = rapid.IntRange(-5, 5).Draw(t, "priorityValue")
	}
	if maybe("retries") {
		j.MaxRetries = 3
		j.Backoff = jobstate.Backoff{Kind: jobstate.BackoffExponential, Initial: time.Second, Factor: 1.5, Max: time.Minute, Jitter: jobstate.JitterFull}
		j.OwnBackoff = true
	}
	j.NotBefore, j.Deadline, j.WakeAt = at("notBefore"), at("deadline"), at("wake")
	return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: id, Version: 1, Event: jobstate.EventCreate, To: "queued",
		Actor: map[bool]string{true: "svc"}[maybe("actor")], At: at("at")}}}
}

// CreateBatch's COPY leaves out the columns every job of the batch leaves
// at their defaults: whatever fields are set, every job reads back as
// CreateBatch returned it, with its history.
func TestCreateBatchColumnsRoundTrip(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "n")
		ws := make([]jobstate.Write, n)
		for i := range ws {
			ws[i] = drawJob(t, i)
		}
		created, err := s.CreateBatch(ctx, make([]jobstate.BatchKey, n), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) { return ws[i], nil })
		require.NoError(t, err)
		for i, c := range created {
			j := c.Job
			got, err := s.Get(ctx, ws[i].Job.ID)
			require.NoError(t, err)
			require.Equal(t, j, got)
			require.Equal(t, ws[i].Job.Payload == nil, got.Payload == nil, "a nil payload stays nil, an empty one empty")
			require.Equal(t, ws[i].Job.WakeAt.IsZero(), got.WakeAt.IsZero())
			h, err := s.History(ctx, j.ID)
			require.NoError(t, err)
			require.Len(t, h, 1)
			require.Equal(t, ws[i].Transitions[0].Actor, h[0].Actor)
			require.True(t, ws[i].Transitions[0].At.Equal(h[0].At))
		}
	})
}
