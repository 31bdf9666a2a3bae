package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestDiagramArrows replays every arrow of the lifecycle's diagram, named after its
// label, and the arrow its rules add (CLAIMED → FAILED).
func TestDiagramArrows(t *testing.T) {
	t.Run("[*] --> QUEUED", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.State{Queued}, path(s.History))
		assert.Equal(t, jobstate.EventCreate, s.History[0].Event)
		assert.Equal(t, "alice", s.Job.Owner)
		assert.True(t, s.Job.Deadline.Equal(Start.Add(QueueTTL)), "the TTL sets the deadline")
	})

	t.Run("QUEUED --> CLAIMED: worker_claim(job_id)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		c, err := f.Engine.Claim(f.ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: "w1"})
		require.NoError(t, err)
		assert.Equal(t, j.ID, c.Job.ID)
		s := f.snap(j.ID)
		assert.Equal(t, Claimed, s.Job.State)
		assert.Equal(t, jobstate.EventClaim, last(s.History).Event)
		assert.Equal(t, "w1", last(s.History).Actor)
		assert.Equal(t, 1, s.Job.Leases)
		require.Len(t, s.Executions, 1)
		assert.Equal(t, jobstate.ExecLeased, s.Executions[0].Status)
	})

	t.Run("CLAIMED --> DOWNLOADING: start_download", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		c := f.claim(j.ID, "w1")
		f.advance(c.Lease, StartDownload, Downloading)
		s := f.snap(j.ID)
		assert.Equal(t, StartDownload, last(s.History).Event)
		assert.Equal(t, c.Lease.ExecID, last(s.History).ExecID, "fired through the worker's lease")
		assert.Equal(t, 1, s.Job.Leases, "the same lease holds the job")
	})

	t.Run("DOWNLOADING --> STREAMING: stream_to_local_api", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		c := f.claim(j.ID, "w1")
		f.advance(c.Lease, StartDownload, Downloading)
		f.advance(c.Lease, StreamToLocalAPI, Streaming)
		s := f.snap(j.ID)
		assert.Equal(t, StreamToLocalAPI, last(s.History).Event)
		require.Len(t, s.Executions, 1, "CLAIMED → DOWNLOADING → STREAMING under one lease")
		assert.True(t, s.Executions[0].Status.Live())
	})

	t.Run("STREAMING --> DELIVERED: telegram_ack", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Delivered, got.State)
		assert.Equal(t, jobstate.OutcomeSucceeded, got.Outcome)
		assert.JSONEq(t, `{"message_id":1}`, string(got.Result))
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.State{Queued, Claimed, Downloading, Streaming, Delivered}, path(s.History))
		assert.Equal(t, jobstate.EventSucceed, last(s.History).Event)
		assert.Equal(t, jobstate.ExecDone, s.Executions[0].Status)
		assert.Equal(t, 1, f.Deliveries.Count(j.ID), "the delivery is recorded once, with the ack")
		assert.Zero(t, s.Job.Leases)
	})

	t.Run("DOWNLOADING --> FAILED: non_retryable_error", func(t *testing.T) {
		f := newFixture(t)
		f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusForbidden})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Failed, got.State)
		s := f.snap(j.ID)
		assert.Equal(t, Downloading, last(s.History).From)
		assert.Equal(t, jobstate.EventFail, last(s.History).Event)
		assert.Equal(t, jobstate.ClassPermanent, s.Job.ErrorClass)
		assert.Zero(t, Attempt(s.Job), "a non-retryable error does not count an attempt")
	})

	t.Run("STREAMING --> FAILED: non_retryable_error", func(t *testing.T) {
		f := newFixture(t)
		f.Telegram.Fail("doc.pdf", &HTTPError{Service: "telegram", Status: http.StatusForbidden})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Failed, got.State)
		s := f.snap(j.ID)
		assert.Equal(t, Streaming, last(s.History).From)
		assert.Equal(t, jobstate.EventFail, last(s.History).Event)
		assert.Zero(t, f.Deliveries.Count(j.ID))
	})

	t.Run("DOWNLOADING --> QUEUED: retryable_error (attempt+1)", func(t *testing.T) {
		f := newFixture(t)
		f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusInternalServerError})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Queued, got.State)
		assert.Equal(t, 1, Attempt(got))
		s := f.snap(j.ID)
		assert.Equal(t, Downloading, last(s.History).From)
		assert.Equal(t, jobstate.EventRetry, last(s.History).Event)
		assert.Equal(t, jobstate.ExecAborted, s.Executions[0].Status)
	})

	t.Run("STREAMING --> QUEUED: retryable_error (attempt+1)", func(t *testing.T) {
		f := newFixture(t)
		f.Telegram.Fail("doc.pdf", &HTTPError{Service: "telegram", Status: http.StatusBadGateway})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Queued, got.State)
		assert.Equal(t, 1, Attempt(got))
		s := f.snap(j.ID)
		assert.Equal(t, Streaming, last(s.History).From)
		assert.Equal(t, jobstate.EventRetry, last(s.History).Event)
		f.due(j.ID)
		assert.Equal(t, Delivered, f.process(j.ID, "w1").State, "the next attempt delivers")
		assert.Equal(t, 2, f.snap(j.ID).Job.Attempt, "two executions")
	})

	t.Run("CLAIMED --> QUEUED: heartbeat_timeout (attempt+1)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		c := f.claim(j.ID, "w1") // the worker dies before start_download
		f.Clock.Advance(HeartbeatTimeout)
		r := f.sweep()
		assert.Zero(t, r.Aborted, "at exactly T the heartbeat is not older than T")
		assert.Equal(t, Claimed, f.snap(j.ID).Job.State)
		f.Clock.Advance(time.Nanosecond)
		r = f.sweep()
		assert.Equal(t, 1, r.Retried)
		s := f.snap(j.ID)
		assert.Equal(t, Queued, s.Job.State)
		assert.Equal(t, 1, Attempt(s.Job))
		assert.Equal(t, jobstate.EventAbandon, last(s.History).Event)
		assert.Equal(t, "lease expired", s.Job.LastError)
		assert.True(t, s.Job.Due(f.Clock.Now()), "claimable again at once")
		_, err := f.Engine.Heartbeat(f.ctx, c.Lease)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	})

	t.Run("QUEUED --> CANCELLED: user_cancel (optional)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		got, err := f.Cancel(f.ctx, "alice", j.ID)
		require.NoError(t, err)
		assert.Equal(t, Cancelled, got.State)
		assert.Equal(t, jobstate.OutcomeCancelled, got.Outcome)
		s := f.snap(j.ID)
		assert.Equal(t, "alice", last(s.History).Actor)
		_, err = f.Engine.Claim(f.ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: "w1"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "a cancelled job is never delivered")

		// Also while it waits out a backoff: it is QUEUED.
		f.Disk.Fail("film.mkv", &TimeoutError{Op: "download"})
		k := f.queue("alice", "film.mkv", "n2")
		require.Equal(t, Queued, f.process(k.ID, "w1").State)
		got, err = f.Cancel(f.ctx, "alice", k.ID)
		require.NoError(t, err)
		assert.Equal(t, Cancelled, got.State)
	})

	t.Run("QUEUED --> EXPIRED: ttl_expired (optional)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		f.Clock.Advance(QueueTTL - time.Nanosecond)
		assert.Zero(t, f.sweep().Expired)
		f.Clock.Advance(time.Nanosecond)
		assert.Equal(t, 1, f.sweep().Expired)
		s := f.snap(j.ID)
		assert.Equal(t, Expired, s.Job.State)
		assert.Equal(t, jobstate.OutcomeExpired, s.Job.Outcome)
		assert.Equal(t, jobstate.EventExpire, last(s.History).Event)
		assert.Equal(t, jobstate.SweepActor, last(s.History).Actor)
	})

	t.Run("The TTL expires only a QUEUED job: a held job goes on, and expires if it comes back to QUEUED", func(t *testing.T) {
		f := newFixture(t)
		f.Telegram.Fail("doc.pdf", &HTTPError{Service: "telegram", Status: http.StatusServiceUnavailable})
		j := f.queue("alice", "doc.pdf", "n1")
		c := f.claim(j.ID, "w1")
		for f.Clock.Now().Before(j.Deadline.Add(HeartbeatEvery)) { // the worker holds it past its deadline
			f.Clock.Advance(HeartbeatEvery)
			l, err := f.Engine.Heartbeat(f.ctx, c.Lease)
			require.NoError(t, err)
			c.Lease = l
		}
		assert.Zero(t, f.sweep().Expired)
		assert.Equal(t, Claimed, f.snap(j.ID).Job.State)
		got, err := f.Worker("w1").Process(f.ctx, c)
		require.NoError(t, err)
		assert.Equal(t, Queued, got.State, "the 503 sends it back to QUEUED")
		assert.Equal(t, 1, f.sweep().Expired)
		assert.Equal(t, Expired, f.snap(j.ID).Job.State)
	})

	t.Run("ttl_expired: a QUEUED job past its TTL is never claimed, even before a sweep expires it", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		f.Clock.Advance(QueueTTL)
		before := f.snap(j.ID)
		require.Equal(t, Queued, before.Job.State, "no sweep has run: the store still holds QUEUED")
		_, err := f.Engine.Claim(f.ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: "w1"})
		f.unchanged(before, err, jobstate.ErrNoJob)
		_, err = f.Engine.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "w1"})
		f.unchanged(before, err, jobstate.ErrNotClaimable)
		n, err := drain(f.ctx, f.Worker("w1")) // an idle worker sweeps
		require.NoError(t, err)
		assert.Zero(t, n, "nothing delivered")
		s := f.snap(j.ID)
		assert.Equal(t, Expired, s.Job.State)
		assert.Empty(t, s.Executions, "never claimed")
		assert.Zero(t, f.Deliveries.Count(j.ID))
	})

	t.Run("FAILED, DELIVERED, CANCELLED, EXPIRED --> [*]: nothing leaves a final state", func(t *testing.T) {
		f := newFixture(t)
		delivered := f.queue("alice", "doc.pdf", "n1")
		require.Equal(t, Delivered, f.process(delivered.ID, "w1").State)
		failed := f.queue("alice", "huge.iso", "n2")
		require.Equal(t, Failed, f.process(failed.ID, "w1").State)
		cancelled := f.queue("alice", "doc.pdf", "n3")
		_, err := f.Cancel(f.ctx, "alice", cancelled.ID)
		require.NoError(t, err)
		expired := f.queue("alice", "doc.pdf", "n4")
		f.Clock.Advance(QueueTTL)
		require.Equal(t, 1, f.sweep().Expired)
		for _, id := range []uuid.UUID{delivered.ID, failed.ID, cancelled.ID, expired.ID} {
			before := f.snap(id)
			require.True(t, before.Job.Terminal())
			for _, ev := range []jobstate.Event{StartDownload, StreamToLocalAPI, jobstate.EventCancel, "requeue_by_admin"} {
				_, err := f.Engine.Fire(f.ctx, id, ev, jobstate.Call{Actor: "alice"})
				f.unchanged(before, err, jobstate.ErrTerminal)
			}
			_, err := f.Engine.ClaimJob(f.ctx, id, jobstate.ClaimRequest{Worker: "w2"})
			f.unchanged(before, err, jobstate.ErrNotClaimable)
		}
		assert.Zero(t, f.sweep().Jobs, "the sweep has nothing to do with final jobs")
	})

	t.Run("CLAIMED --> FAILED (in the rules, not in the diagram): start_download refused, or attempts spent", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("mallory", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Failed, got.State)
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.State{Queued, Claimed, Failed}, path(s.History))
		assert.Equal(t, jobstate.EventFail, last(s.History).Event)
	})
}
