package main

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestErrorTaxonomy checks the error taxonomy, one error at a time.
func TestErrorTaxonomy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		disk, tg  error
		want      jobstate.State
		class     jobstate.ErrorClass
		notBefore time.Duration // after the failure; 0 for a permanent one
	}{
		{name: "Retryable: network timeouts", disk: &TimeoutError{Op: "yandex disk: download"}, want: Queued, class: jobstate.ClassRetryable, notBefore: 5 * time.Second},
		{name: "Retryable: network timeouts (deadline exceeded)", tg: context.DeadlineExceeded, want: Queued, class: jobstate.ClassRetryable, notBefore: 5 * time.Second},
		{name: "Retryable: transient 5xx from YD", disk: &HTTPError{Service: "yandex disk", Status: http.StatusBadGateway}, want: Queued, class: jobstate.ClassRetryable, notBefore: 5 * time.Second},
		{name: "Retryable: transient 5xx from Telegram", tg: &HTTPError{Service: "telegram", Status: http.StatusInternalServerError}, want: Queued, class: jobstate.ClassRetryable, notBefore: 5 * time.Second},
		{name: "Retryable: temporary rate limit (429) with backoff (Retry-After)", tg: &HTTPError{Service: "telegram", Status: http.StatusTooManyRequests, RetryAfter: "42"}, want: Queued, class: jobstate.ClassRetryable, notBefore: 42 * time.Second},
		{name: "Retryable: temporary rate limit (429) with backoff (no Retry-After)", disk: &HTTPError{Service: "yandex disk", Status: http.StatusTooManyRequests}, want: Queued, class: jobstate.ClassRetryable, notBefore: 5 * time.Second},
		{name: "Non-retryable: access denied (403)", disk: &HTTPError{Service: "yandex disk", Status: http.StatusForbidden}, want: Failed, class: jobstate.ClassPermanent},
		{name: "Non-retryable: user blocked (403 from Telegram)", tg: &HTTPError{Service: "telegram", Status: http.StatusForbidden}, want: Failed, class: jobstate.ClassPermanent},
		{name: "Non-retryable: file not found (404)", disk: &HTTPError{Service: "yandex disk", Status: http.StatusNotFound}, want: Failed, class: jobstate.ClassPermanent},
		{name: "Non-retryable: invalid token after refresh (requires admin intervention)", disk: ErrTokenInvalid, want: Failed, class: jobstate.ClassPermanent},
	} {
		t.Run("Error taxonomy: "+tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.disk != nil {
				f.Disk.Fail("doc.pdf", tc.disk)
			}
			if tc.tg != nil {
				f.Telegram.Fail("doc.pdf", tc.tg)
			}
			j := f.queue("alice", "doc.pdf", "n1")
			got := f.process(j.ID, "w1")
			assert.Equal(t, tc.want, got.State)
			assert.Equal(t, tc.class, got.ErrorClass)
			if tc.want == Queued {
				assert.Equal(t, 1, Attempt(got))
				assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(tc.notBefore)), "not before %s", got.NotBefore.Sub(f.Clock.Now()))
			} else {
				assert.Zero(t, Attempt(got), "never retried")
			}
			assert.Zero(t, f.Deliveries.Count(j.ID))
		})
	}

	t.Run("Error taxonomy: Non-retryable: file too big (> 2GB)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "huge.iso", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Failed, got.State)
		assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
		assert.Contains(t, got.LastError, "too big")
		k := f.queue("alice", "edge.bin", "n2")
		assert.Equal(t, Delivered, f.process(k.ID, "w1").State, "exactly 2 GB is not too big")
	})

	t.Run("Error taxonomy: the classifier, one error at a time", func(t *testing.T) {
		for _, tc := range []struct {
			err   error
			class jobstate.ErrorClass
			after time.Duration
		}{
			{&TimeoutError{Op: "x"}, jobstate.ClassRetryable, 0},
			{context.DeadlineExceeded, jobstate.ClassRetryable, 0},
			{&HTTPError{Status: 500}, jobstate.ClassRetryable, 0},
			{&HTTPError{Status: 503}, jobstate.ClassRetryable, 0},
			{&HTTPError{Status: 429, RetryAfter: "7"}, jobstate.ClassRetryable, 7 * time.Second},
			{&HTTPError{Status: 429, RetryAfter: "soon"}, jobstate.ClassRetryable, 0},
			{&HTTPError{Status: 429}, jobstate.ClassRetryable, 0},
			{&HTTPError{Status: 403}, jobstate.ClassPermanent, 0},
			{&HTTPError{Status: 404}, jobstate.ClassPermanent, 0},
			{&TooBigError{Size: MaxFileSize + 1}, jobstate.ClassPermanent, 0},
			{ErrTokenInvalid, jobstate.ClassPermanent, 0},
			{ErrUserBlocked, jobstate.ClassPermanent, 0},
			{ErrAttemptsSpent, jobstate.ClassPermanent, 0},
			{&HTTPError{Status: 400}, jobstate.ClassNone, 0},
			{errors.New("something else"), jobstate.ClassNone, 0},
		} {
			class, after := Classify(tc.err)
			assert.Equal(t, tc.class, class, "%v", tc.err)
			assert.Equal(t, tc.after, after, "%v", tc.err)
		}
		class, _ := jobstate.ClassOf(errors.New("something else"), Classify)
		assert.Equal(t, jobstate.ClassRetryable, class, "unclassified errors are retryable")
	})
}

// TestRecovery checks the recovery after a crash, at worker start.
func TestRecovery(t *testing.T) {
	t.Run("Recovery after crash: at worker start, jobs in CLAIMED, DOWNLOADING, STREAMING with heartbeat_at < now - T: if attempt < 3 return to QUEUED (attempt++)", func(t *testing.T) {
		f := newFixture(t)
		ids := []uuid.UUID{f.queue("alice", "doc.pdf", "n1").ID, f.queue("alice", "doc.pdf", "n2").ID, f.queue("alice", "doc.pdf", "n3").ID}
		var leases []jobstate.Lease
		for _, id := range ids {
			leases = append(leases, f.claim(id, "w1").Lease)
		}
		f.advance(leases[1], StartDownload, Downloading)
		f.advance(leases[2], StartDownload, Downloading)
		f.advance(leases[2], StreamToLocalAPI, Streaming)
		// w1 crashes. A new worker starting before T, or at exactly T,
		// finds nothing to recover: heartbeat_at < now - T does not hold.
		for _, d := range []time.Duration{HeartbeatTimeout - time.Second, time.Second} {
			f.Clock.Advance(d)
			r, err := f.Worker("w2").Recover(f.ctx)
			require.NoError(t, err)
			assert.Zero(t, r.Aborted)
			stuck, err := f.Stuck(f.ctx)
			require.NoError(t, err)
			assert.Empty(t, stuck)
		}
		f.Clock.Advance(time.Nanosecond)
		stuck, err := f.Stuck(f.ctx)
		require.NoError(t, err)
		assert.Len(t, stuck, 3, "stuck exactly when recovery takes them back")
		r, err := f.Worker("w2").Recover(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, r.Aborted)
		assert.Equal(t, 3, r.Retried)
		for i, id := range ids {
			s := f.snap(id)
			assert.Equal(t, Queued, s.Job.State)
			assert.Equal(t, 1, Attempt(s.Job), "attempt++")
			assert.Zero(t, s.Job.Leases)
			assert.Equal(t, jobstate.ExecAborted, s.Executions[0].Status)
			assert.Equal(t, []jobstate.State{Claimed, Downloading, Streaming}[i], last(s.History).From)
			assert.Equal(t, jobstate.EventAbandon, last(s.History).Event, "recorded as the heartbeat timeout, not as a retryable error")
		}
		stuck, err = f.Stuck(f.ctx)
		require.NoError(t, err)
		assert.Empty(t, stuck)
		n, err := drain(f.ctx, f.Worker("w2"))
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		for _, id := range ids {
			assert.Equal(t, Delivered, f.snap(id).Job.State)
			assert.Equal(t, 1, f.Deliveries.Count(id))
		}
		_, err = f.Engine.Heartbeat(f.ctx, leases[0])
		assert.Error(t, err, "the crashed worker's lease is dead")
	})

	t.Run("Recovery after crash: at attempt 2 a stale job still returns to QUEUED, at attempt 3", func(t *testing.T) {
		f := newFixture(t)
		var ids []uuid.UUID
		for _, nonce := range []string{"n1", "n2", "n3"} {
			j := f.queue("alice", "doc.pdf", nonce)
			ids = append(ids, j.ID)
			for i := 0; i < 2; i++ { // two heartbeat timeouts in CLAIMED
				f.claim(j.ID, "w1")
				f.Clock.Advance(LeaseTTL)
				f.sweep()
			}
			require.Equal(t, 2, Attempt(f.snap(j.ID).Job))
		}
		var leases []jobstate.Lease
		for _, id := range ids {
			leases = append(leases, f.claim(id, "w1").Lease)
		}
		f.advance(leases[1], StartDownload, Downloading)
		f.advance(leases[2], StartDownload, Downloading)
		f.advance(leases[2], StreamToLocalAPI, Streaming)
		f.Clock.Advance(LeaseTTL)
		r, err := f.Worker("w2").Recover(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, r.Retried)
		assert.Zero(t, r.Failed)
		for i, id := range ids {
			s := f.snap(id)
			assert.Equal(t, Queued, s.Job.State, "attempt 2 < 3: back to QUEUED")
			assert.Equal(t, 3, Attempt(s.Job), "attempt++")
			assert.Equal(t, []jobstate.State{Claimed, Downloading, Streaming}[i], last(s.History).From)
			assert.Equal(t, jobstate.EventAbandon, last(s.History).Event)
		}
		// Nothing is left in QUEUED: each is claimed and, at attempt 3,
		// refused at start_download.
		n, err := drain(f.ctx, f.Worker("w2"))
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		for _, id := range ids {
			s := f.snap(id)
			assert.Equal(t, Failed, s.Job.State)
			assert.Equal(t, []jobstate.State{Claimed, Failed}, []jobstate.State{last(s.History).From, last(s.History).To})
			assert.Zero(t, f.Deliveries.Count(id))
		}
	})

	t.Run("Recovery after crash: otherwise (attempt >= 3) FAILED", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		for i := 0; i < MaxAttempts; i++ { // three heartbeat timeouts in CLAIMED
			f.claim(j.ID, "w1")
			f.Clock.Advance(LeaseTTL)
			f.sweep()
		}
		require.Equal(t, MaxAttempts, Attempt(f.snap(j.ID).Job))
		f.claim(j.ID, "w1") // at attempt 3 only CLAIMED can be held: start_download is refused
		f.Clock.Advance(LeaseTTL)
		r, err := f.Worker("w2").Recover(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, r.Failed)
		s := f.snap(j.ID)
		assert.Equal(t, Failed, s.Job.State)
		assert.Equal(t, MaxAttempts, Attempt(s.Job), "no attempt++ on the way to FAILED")
		assert.Equal(t, 4, s.Job.Attempt, "four executions")
		assert.Equal(t, Claimed, last(s.History).From)
		assert.Equal(t, jobstate.EventFail, last(s.History).Event)
		assert.Equal(t, "lease expired", last(s.History).Reason)
	})
}

// TestInvalidTransitions checks that moves the lifecycle does not allow are refused and
// change nothing, and that only the lease holder moves a held job.
func TestInvalidTransitions(t *testing.T) {
	t.Run("Only the lease holder moves a held job: Engine.Fire cannot move CLAIMED -> DOWNLOADING -> STREAMING", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		c := f.claim(j.ID, "w1")
		active := DownloadArgs{User: UserActive}
		before := f.snap(j.ID)
		next := before.Job
		_, err := f.Def.Step(f.ctx, &next, jobstate.Input{Event: StartDownload, Actor: "w2", Args: active})
		require.NoError(t, err, "the table and its guard allow the move: what refuses it is the lease")
		for _, actor := range []string{"w2", "alice", "w1"} { // another worker, the user, even the holder's name without its lease
			_, err := f.Engine.Fire(f.ctx, j.ID, StartDownload, jobstate.Call{Actor: actor, Args: active})
			f.unchanged(before, err, jobstate.ErrInvalidArgument) // CLAIMED -> DOWNLOADING
		}
		f.advance(c.Lease, StartDownload, Downloading)
		before = f.snap(j.ID)
		for _, actor := range []string{"w2", "alice", "w1"} {
			_, err := f.Engine.Fire(f.ctx, j.ID, StreamToLocalAPI, jobstate.Call{Actor: actor})
			f.unchanged(before, err, jobstate.ErrInvalidArgument) // DOWNLOADING -> STREAMING
		}
		f.advance(c.Lease, StreamToLocalAPI, Streaming)
		s := f.snap(j.ID)
		for _, rec := range s.History[2:] {
			assert.Equal(t, []any{"w1", c.Lease.ExecID}, []any{rec.Actor, rec.ExecID}, "every move of the held job is the holder's, through its lease")
		}
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
		require.NoError(t, err)
		assert.Equal(t, Delivered, f.snap(j.ID).Job.State)
	})

	t.Run("Invalid transitions are refused and change nothing", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		before := f.snap(j.ID)
		_, err := f.Engine.Fire(f.ctx, j.ID, StartDownload, jobstate.Call{Actor: "alice", Args: DownloadArgs{User: UserActive}})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // QUEUED -> DOWNLOADING
		_, err = f.Engine.Fire(f.ctx, j.ID, StreamToLocalAPI, jobstate.Call{Actor: "alice"})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // QUEUED -> STREAMING
		for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventAbandon, jobstate.EventExpire} {
			_, err = f.Engine.Fire(f.ctx, j.ID, ev, jobstate.Call{Actor: "alice"})
			f.unchanged(before, err, jobstate.ErrInvalidArgument) // the engine's own moves
		}

		c := f.claim(j.ID, "w1")
		before = f.snap(j.ID)
		_, err = f.Engine.Advance(f.ctx, c.Lease, StreamToLocalAPI, jobstate.Call{})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // CLAIMED -> STREAMING
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // CLAIMED -> DELIVERED
		_, err = f.Cancel(f.ctx, "alice", j.ID)
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // CLAIMED -> CANCELLED
		f.advance(c.Lease, StartDownload, Downloading)
		before = f.snap(j.ID)
		_, err = f.Engine.Advance(f.ctx, c.Lease, StartDownload, jobstate.Call{Args: DownloadArgs{User: UserActive}})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // DOWNLOADING -> DOWNLOADING
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // DOWNLOADING -> DELIVERED
		_, err = f.Cancel(f.ctx, "alice", j.ID)
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // DOWNLOADING -> CANCELLED
		f.advance(c.Lease, StreamToLocalAPI, Streaming)
		before = f.snap(j.ID)
		_, err = f.Engine.Advance(f.ctx, c.Lease, StartDownload, jobstate.Call{Args: DownloadArgs{User: UserActive}})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // STREAMING -> DOWNLOADING
		_, err = f.Cancel(f.ctx, "alice", j.ID)
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // STREAMING -> CANCELLED

		// Through a lease that is not the job's.
		other := f.queue("alice", "doc.pdf", "n2")
		oc := f.claim(other.ID, "w2")
		forged := oc.Lease
		forged.JobID = j.ID
		_, err = f.Engine.Advance(f.ctx, forged, StreamToLocalAPI, jobstate.Call{})
		f.unchanged(before, err, jobstate.ErrLeaseLost)

		// DELIVERED -> anything.
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
		require.NoError(t, err)
		before = f.snap(j.ID)
		assert.Equal(t, Delivered, before.Job.State)
		for _, ev := range []jobstate.Event{StartDownload, StreamToLocalAPI, jobstate.EventCancel} {
			_, err = f.Engine.Fire(f.ctx, j.ID, ev, jobstate.Call{Actor: "alice"})
			f.unchanged(before, err, jobstate.ErrTerminal)
		}
		_, err = f.Engine.Advance(f.ctx, c.Lease, StreamToLocalAPI, jobstate.Call{})
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		_, err = f.Engine.Fail(f.ctx, c.Lease, errors.New("late"))
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		_, err = f.Engine.Heartbeat(f.ctx, c.Lease)
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		_, err = f.Engine.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "w3"})
		f.unchanged(before, err, jobstate.ErrNotClaimable)
	})
}
