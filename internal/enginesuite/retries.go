package enginesuite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
	"github.com/jobstate/jobstate/internal/require"
)

// testExhaustChain: image generation, on its literal machine, parks
// failures in a waiting "failed" state and re-queues them with exponential
// backoff while retryCount, incremented, stays below MAX_RETRIES (3); the
// third failure goes on to dead_letter in the same write: three attempts.
func testExhaustChain(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, imagegen.Spec(imagegen.Plain()))
	j := f.Create(imagegen.Name, jobstate.NewJob{})
	delays := []time.Duration{2 * time.Second, 4 * time.Second}
	for i := 0; i < imagegen.MaxRetries; i++ {
		c := f.Claim(imagegen.Name, "w")
		got, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("API timeout"))
		require.NoError(t, err)
		if i < imagegen.MaxRetries-1 {
			assert.Equal(t, imagegen.Failed, got.State)
			assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(delays[i])), "exponential backoff %d", i)
			f.Clock.Advance(delays[i])
			f.Sweep()
		} else {
			assert.Equal(t, imagegen.DeadLetter, got.State)
			assert.Equal(t, jobstate.OutcomeDeadLettered, got.Outcome)
			assert.Equal(t, imagegen.EngineMaxRetries, got.RetryCount, "the engine counts the retried failures")
			assert.Equal(t, imagegen.MaxRetries, got.Attempt)
		}
	}
	h, err := f.Eng.History(f.Ctx, j.ID)
	require.NoError(t, err)
	last := h[len(h)-2:]
	assert.Equal(t, []jobstate.Event{jobstate.EventFail, jobstate.EventExhaust}, []jobstate.Event{last[0].Event, last[1].Event})
	assert.Equal(t, last[0].Version+1, last[1].Version)
}

// testErrorClasses runs file delivery's literal machine with its error
// taxonomy (delivery.Classify).
func testErrorClasses(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))

	j := f.Create(delivery.Name, jobstate.NewJob{})
	c := f.Claim(delivery.Name, "w")
	_, err := f.Eng.Advance(f.Ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser})
	require.NoError(t, err)
	got, err := f.Eng.Fail(f.Ctx, c.Lease, jobstate.RetryAfter(errors.New("429"), 42*time.Second))
	require.NoError(t, err)
	assert.Equal(t, delivery.Queued, got.State, "retryable: straight back to QUEUED")
	assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(42*time.Second)), "Retry-After wins over the backoff")
	assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)

	f.Clock.Advance(42 * time.Second)
	c = f.Claim(delivery.Name, "w")
	assert.Equal(t, 2, c.Job.Attempt)
	got, err = f.Eng.Fail(f.Ctx, c.Lease, &delivery.HTTPError{Service: "disk", Status: 404})
	require.NoError(t, err)
	assert.Equal(t, delivery.Failed, got.State, "the classifier made 404 permanent")
	assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
	assert.Equal(t, 1, got.RetryCount, "a permanent error never retries")

	k := f.Create(delivery.Name, jobstate.NewJob{})
	c = f.Claim(delivery.Name, "w")
	got, err = f.Eng.Fail(f.Ctx, c.Lease, context.DeadlineExceeded)
	require.NoError(t, err)
	assert.Equal(t, delivery.Queued, got.State, "deadline exceeded is retryable")
	assert.Equal(t, k.ID, got.ID)
	_ = j
}

func testSnooze(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.Create(docproc.Name, jobstate.NewJob{})
	f.Fire(j.ID, docproc.Submit, "u")
	for i := 0; i < 5; i++ {
		c := f.Claim(docproc.Name, "w")
		got, err := f.Eng.Snooze(f.Ctx, c.Lease, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 0, got.RetryCount, "a snooze is no failure")
		assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(time.Minute)))
		f.Clock.Advance(time.Minute)
		f.Sweep()
	}
	c := f.Claim(docproc.Name, "w")
	assert.Equal(t, 6, c.Job.Attempt)
	_, err := f.Eng.Snooze(f.Ctx, c.Lease, -time.Second)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}

func testSeveralActiveStates(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	j := f.Create(delivery.Name, jobstate.NewJob{})
	c := f.Claim(delivery.Name, "w")
	for _, ev := range []jobstate.Event{delivery.StartDownload, delivery.StreamToLocalAPI} {
		f.Clock.Advance(20 * time.Second)
		l, err := f.Eng.Heartbeat(f.Ctx, c.Lease)
		require.NoError(t, err)
		c.Lease = l
		_, err = f.Eng.Advance(f.Ctx, c.Lease, ev, jobstate.Call{Args: activeUser})
		require.NoError(t, err)
	}
	assert.Equal(t, delivery.Streaming, f.Get(j.ID).State)
	assert.Equal(t, 1, f.Get(j.ID).Leases, "one lease across CLAIMED, DOWNLOADING, STREAMING")
	got, err := f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	assert.Equal(t, delivery.Delivered, got.State)

	// A heartbeat exactly T old is not yet stuck; one strictly older takes
	// the abandon rule (file delivery's heartbeat_timeout), with attempt+1
	// at the next claim.
	k := f.Create(delivery.Name, jobstate.NewJob{})
	f.Claim(delivery.Name, "w")
	f.Clock.Advance(delivery.HeartbeatTimeout)
	assert.Zero(t, f.Sweep().Aborted, "a heartbeat exactly T old is not stuck")
	f.Clock.Advance(time.Nanosecond)
	assert.Equal(t, 1, f.Sweep().Aborted)
	h, err := f.Eng.History(f.Ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.EventAbandon, h[len(h)-1].Event)
	assert.Equal(t, delivery.Queued, f.Get(k.ID).State)
	assert.Equal(t, 2, f.Claim(delivery.Name, "w").Job.Attempt)
}

func testClaimGuards(t *testing.T, newStore NewStore) {
	spec := m.QueueSpec()
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventClaim {
			spec.Rules[i].Guard = func(_ context.Context, in jobstate.GuardInput) error {
				if in.Actor == in.Job.Owner {
					return errors.New("no self-dealing")
				}
				return nil
			}
		}
	}
	f := NewFixture(t, newStore, nil, spec)
	mine := f.Create("queue", jobstate.NewJob{Owner: "w"})
	f.Fire(mine.ID, m.Submit, "w")
	f.Clock.Advance(time.Second)
	theirs := f.Create("queue", jobstate.NewJob{Owner: "other"})
	f.Fire(theirs.ID, m.Submit, "other")
	c := f.Claim("queue", "w")
	assert.Equal(t, theirs.ID, c.Job.ID, "the older job is passed over for this worker")
	_, err := f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
	_, err = f.Eng.ClaimJob(f.Ctx, mine.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.Equal(t, mine.ID, f.Claim("queue", "x").Job.ID)
}

// testRetryWithoutRoute: a per-job retry override on a machine without
// retry rules makes a retryable failure fail the job, not stick it.
func testRetryWithoutRoute(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, toggleLikeSpec())
	f.Create("plain", jobstate.NewJob{Retry: &jobstate.RetryOverride{MaxRetries: jobstate.Retries(5)}})
	c := f.Claim("plain", "w")
	got, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("flaky"))
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("failed"), got.State)
	k := f.Create("plain", jobstate.NewJob{Retry: &jobstate.RetryOverride{MaxRetries: jobstate.Retries(5)}})
	f.Claim("plain", "w")
	f.Clock.Advance(time.Hour)
	r := f.Sweep()
	assert.Equal(t, 1, r.Failed, "a lost lease with no retry route fails the job")
	assert.Equal(t, jobstate.State("failed"), f.Get(k.ID).State)
}

// toggleLikeSpec is a machine with no retry route: ready → run → done or
// failed.
func toggleLikeSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "plain",
		States: []jobstate.StateSpec{
			{Name: "ready", Kind: jobstate.KindReady},
			{Name: "run", Kind: jobstate.KindActive},
			{Name: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "ready",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"ready"}, Event: jobstate.EventClaim, To: "run"},
			{From: []jobstate.State{"run"}, Event: jobstate.EventSucceed, To: "done"},
			{From: []jobstate.State{"run"}, Event: jobstate.EventFail, To: "failed"},
		},
	}
}

// activeUser is file delivery's start_download argument for a user who is
// ACTIVE.
var activeUser = delivery.DownloadArgs{User: delivery.UserActive}
