package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/doccheck"
)

// fixture is one World under test, on its manual clock, with users alice
// (ACTIVE) and mallory (BLOCKED) and a few files.
type fixture struct {
	t   *testing.T
	ctx context.Context
	*World
}

// newFixture returns a fresh World for t.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	w, err := NewWorld()
	require.NoError(t, err)
	w.Users.Set("alice", UserActive)
	w.Users.Set("mallory", UserBlocked)
	w.Disk.Put("doc.pdf", File{Name: "doc.pdf", Size: 1 << 20, Transfer: 5 * time.Second})
	w.Disk.Put("film.mkv", File{Name: "film.mkv", Size: 1 << 30, Transfer: 2 * time.Minute})
	w.Disk.Put("huge.iso", File{Name: "huge.iso", Size: MaxFileSize + 1, Transfer: time.Minute})
	w.Disk.Put("edge.bin", File{Name: "edge.bin", Size: MaxFileSize, Transfer: time.Second})
	return &fixture{t: t, ctx: context.Background(), World: w}
}

// Snapshot is everything stored about one job.
type Snapshot struct {
	Job        jobstate.Job
	Executions []jobstate.Execution
	History    []jobstate.Transition
}

// snap loads a job with its executions and history, and checks that the
// history replays to the job's state.
func (f *fixture) snap(id uuid.UUID) Snapshot {
	f.t.Helper()
	var s Snapshot
	var err error
	s.Job, err = f.Engine.Store().Get(f.ctx, id)
	require.NoError(f.t, err)
	s.Executions, err = f.Engine.Executions(f.ctx, id)
	require.NoError(f.t, err)
	s.History, err = f.Engine.History(f.ctx, id)
	require.NoError(f.t, err)
	st, err := f.Def.Replay(s.History)
	require.NoError(f.t, err)
	require.Equal(f.t, s.Job.State, st, "the history replays to the job's state")
	return s
}

// queue creates a job through the bot's callback and checks it is new.
func (f *fixture) queue(user, file, nonce string) jobstate.Job {
	f.t.Helper()
	c, err := f.Download(f.ctx, user, file, nonce)
	require.NoError(f.t, err)
	require.False(f.t, c.Existing)
	require.Equal(f.t, Queued, c.Job.State)
	return c.Job
}

// claim claims one named job for worker.
func (f *fixture) claim(id uuid.UUID, worker string) jobstate.Claimed {
	f.t.Helper()
	c, err := f.Engine.ClaimJob(f.ctx, id, jobstate.ClaimRequest{Worker: worker})
	require.NoError(f.t, err)
	require.Equal(f.t, Claimed, c.Job.State)
	return c
}

// advance fires a user event through the lease and checks the new state.
func (f *fixture) advance(l jobstate.Lease, ev jobstate.Event, want jobstate.State) {
	f.t.Helper()
	j, err := f.Engine.Advance(f.ctx, l, ev, jobstate.Call{Args: DownloadArgs{User: UserActive}})
	require.NoError(f.t, err)
	require.Equal(f.t, want, j.State)
}

// process claims the job for worker and runs it, returning the job as the
// worker left it.
func (f *fixture) process(id uuid.UUID, worker string) jobstate.Job {
	f.t.Helper()
	j, err := f.Worker(worker).Process(f.ctx, f.claim(id, worker))
	require.NoError(f.t, err)
	return j
}

// due lets time pass until the job's not-before.
func (f *fixture) due(id uuid.UUID) {
	f.t.Helper()
	_, err := wait(f.ctx, f.World, id)
	require.NoError(f.t, err)
}

// sweep runs the engine's sweep at the clock's current reading.
func (f *fixture) sweep() jobstate.SweepReport {
	f.t.Helper()
	r, err := f.Engine.Sweep(f.ctx)
	require.NoError(f.t, err)
	return r
}

// unchanged checks that err is a refusal matching every sentinel of want
// and that the job, its executions and its history are as in before.
func (f *fixture) unchanged(before Snapshot, err error, want ...error) {
	f.t.Helper()
	require.Error(f.t, err)
	for _, w := range want {
		require.ErrorIs(f.t, err, w)
	}
	assert.Equal(f.t, before, f.snap(before.Job.ID), "a refused operation changes nothing")
}

// last returns the last record of a history.
func last(h []jobstate.Transition) jobstate.Transition { return h[len(h)-1] }

// path lists the states a history went through.
func path(h []jobstate.Transition) []jobstate.State {
	out := make([]jobstate.State, len(h))
	for i, t := range h {
		out[i] = t.To
	}
	return out
}

// TestSeed004 replays, item by item and named after the seed's wording,
// every arrow of seed 004's diagram, its transition rules with their
// guards and side effects, its idempotency rule, its error taxonomy, its
// recovery and the moves it does not allow.
func TestSeed004(t *testing.T) {
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
		_, err = f.Worker("w1").RunOnce(f.ctx)
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

	t.Run("QUEUED -> CLAIMED: atomically (transaction) + write heartbeat_at", func(t *testing.T) {
		f := newFixture(t)
		const jobs, workers = 20, 8
		for i := 0; i < jobs; i++ {
			f.queue("alice", "doc.pdf", "n"+string(rune('a'+i)))
		}
		f.Clock.Advance(3 * time.Second)
		var mu sync.Mutex
		claimedBy := make(map[uuid.UUID][]string)
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				for {
					c, err := f.Engine.Claim(f.ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: name})
					if errors.Is(err, jobstate.ErrNoJob) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					claimedBy[c.Job.ID] = append(claimedBy[c.Job.ID], name)
					mu.Unlock()
				}
			}("w" + string(rune('0'+i)))
		}
		wg.Wait()
		require.Len(t, claimedBy, jobs, "every job claimed")
		for id, by := range claimedBy {
			assert.Len(t, by, 1, "job %s claimed once", ShortID(id))
			s := f.snap(id)
			assert.Equal(t, Claimed, s.Job.State)
			assert.Equal(t, 1, s.Job.Leases)
			assert.True(t, s.Job.HeartbeatAt.Equal(Start.Add(3*time.Second)), "heartbeat_at written with the claim")
			assert.True(t, s.Executions[0].HeartbeatAt.Equal(Start.Add(3*time.Second)))
		}
	})

	t.Run("CLAIMED -> DOWNLOADING: only if attempt < 3 and user ACTIVE", func(t *testing.T) {
		t.Run("the guard", func(t *testing.T) {
			for _, tc := range []struct {
				attempt int
				args    any
				want    error
			}{
				{0, DownloadArgs{User: UserActive}, nil},
				{1, DownloadArgs{User: UserActive}, nil},
				{2, DownloadArgs{User: UserActive}, nil},
				{3, DownloadArgs{User: UserActive}, ErrAttemptsSpent},
				{4, DownloadArgs{User: UserActive}, ErrAttemptsSpent},
				{0, DownloadArgs{User: UserBlocked}, ErrUserBlocked},
				{0, DownloadArgs{User: ""}, ErrUserBlocked},
				{0, nil, ErrUserBlocked},
			} {
				err := CanStartDownload(context.Background(), jobstate.GuardInput{Job: jobstate.Job{RetryCount: tc.attempt}, Args: tc.args})
				if tc.want == nil {
					assert.NoError(t, err, "attempt %d, %v", tc.attempt, tc.args)
				} else {
					assert.ErrorIs(t, err, tc.want, "attempt %d, %v", tc.attempt, tc.args)
				}
			}
		})
		t.Run("a user who is not ACTIVE is refused", func(t *testing.T) {
			f := newFixture(t)
			j := f.queue("mallory", "doc.pdf", "n1")
			c := f.claim(j.ID, "w1")
			before := f.snap(j.ID)
			_, err := f.Engine.Advance(f.ctx, c.Lease, StartDownload, jobstate.Call{Args: DownloadArgs{User: f.Users.Status("mallory")}})
			f.unchanged(before, err, jobstate.ErrGuardRefused, ErrUserBlocked)
			var te *jobstate.TransitionError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, Claimed, te.From)
			// The worker reports the refusal; the classifier makes it permanent.
			got, err := f.Engine.Fail(f.ctx, c.Lease, err)
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
			assert.Zero(t, f.Deliveries.Count(j.ID))
		})
		t.Run("a user blocked between the click and the download is refused", func(t *testing.T) {
			f := newFixture(t)
			j := f.queue("alice", "doc.pdf", "n1")
			f.Users.Set("alice", UserBlocked)
			got := f.process(j.ID, "w1")
			assert.Equal(t, Failed, got.State)
			assert.Contains(t, got.LastError, "user is not ACTIVE")
		})
		t.Run("attempt 3 is refused, even when a job's retry policy would allow more", func(t *testing.T) {
			f := newFixture(t)
			payload, err := json.Marshal(Request{UserID: "alice", FileID: "doc.pdf", Nonce: "n1"})
			require.NoError(t, err)
			more := jobstate.RetryPolicy{MaxRetries: 5}
			c, err := f.Engine.Create(f.ctx, jobstate.NewJob{Machine: MachineName, Payload: payload, Owner: "alice", Retry: &more})
			require.NoError(t, err)
			for i := 0; i < MaxAttempts; i++ {
				cl := f.claim(c.Job.ID, "w1")
				f.advance(cl.Lease, StartDownload, Downloading)
				_, err := f.Engine.Fail(f.ctx, cl.Lease, &HTTPError{Service: "yandex disk", Status: http.StatusServiceUnavailable})
				require.NoError(t, err)
				f.due(c.Job.ID)
			}
			s := f.snap(c.Job.ID)
			require.Equal(t, Queued, s.Job.State, "the override allowed a 4th claim")
			require.Equal(t, 3, Attempt(s.Job))
			cl := f.claim(c.Job.ID, "w1")
			before := f.snap(c.Job.ID)
			_, err = f.Engine.Advance(f.ctx, cl.Lease, StartDownload, jobstate.Call{Args: DownloadArgs{User: UserActive}})
			f.unchanged(before, err, jobstate.ErrGuardRefused, ErrAttemptsSpent)
			got, err := f.Worker("w1").Process(f.ctx, jobstate.Claimed{Lease: cl.Lease, Job: before.Job})
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
			assert.Contains(t, got.LastError, "attempt limit reached")
		})
	})

	t.Run("DOWNLOADING or STREAMING -> QUEUED: only retryable errors, attempt++, write last_error", func(t *testing.T) {
		f := newFixture(t)
		f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusServiceUnavailable})
		f.Telegram.Fail("doc.pdf", &TimeoutError{Op: "telegram: sendDocument"})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Queued, got.State)
		assert.Equal(t, 1, Attempt(got))
		assert.Equal(t, "yandex disk: HTTP 503 Service Unavailable", got.LastError)
		assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
		assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(5*time.Second)), "backoff 5 s")
		_, err := f.Engine.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "w1"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "not before the backoff")
		f.due(j.ID)
		got = f.process(j.ID, "w1")
		assert.Equal(t, Queued, got.State)
		assert.Equal(t, 2, Attempt(got))
		assert.Equal(t, "telegram: sendDocument: i/o timeout", got.LastError)
		assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(10*time.Second)), "backoff doubles")
		f.due(j.ID)
		got = f.process(j.ID, "w1")
		assert.Equal(t, Delivered, got.State)
		assert.Empty(t, got.LastError, "cleared on delivery")
		assert.Equal(t, 2, Attempt(got))
	})

	t.Run("... -> FAILED: if attempt >= 3 or a non-retryable error", func(t *testing.T) {
		f := newFixture(t)
		f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusNotFound})
		j := f.queue("alice", "doc.pdf", "n1")
		got := f.process(j.ID, "w1")
		assert.Equal(t, Failed, got.State, "non-retryable: FAILED at attempt 0")
		assert.Zero(t, Attempt(got))

		k := f.queue("alice", "film.mkv", "n2")
		for i := 0; i < MaxAttempts; i++ {
			f.Disk.Fail("film.mkv", &HTTPError{Service: "yandex disk", Status: http.StatusBadGateway})
		}
		for i := 0; i < MaxAttempts; i++ {
			f.due(k.ID)
			got = f.process(k.ID, "w1")
		}
		assert.Equal(t, Failed, got.State, "retryable, attempts spent: FAILED")
		assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
	})

	t.Run("Attempt limit 3: MaxRetries 2 gives three attempts", func(t *testing.T) {
		f := newFixture(t)
		assert.Equal(t, MaxAttempts-1, f.Def.Policy().Retry.MaxRetries)
		for i := 0; i < 10; i++ {
			f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusInternalServerError})
		}
		j := f.queue("alice", "doc.pdf", "n1")
		var attempts []int
		for {
			f.due(j.ID)
			c, err := f.Engine.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "w1"})
			if err != nil {
				require.ErrorIs(t, err, jobstate.ErrNotClaimable)
				break
			}
			attempts = append(attempts, Attempt(c.Job))
			_, err = f.Worker("w1").Process(f.ctx, c)
			require.NoError(t, err)
		}
		assert.Equal(t, []int{0, 1, 2}, attempts, "start_download ran at attempts 0, 1 and 2")
		s := f.snap(j.ID)
		assert.Equal(t, Failed, s.Job.State)
		assert.Equal(t, 3, s.Job.Attempt, "three executions")
		assert.Len(t, s.Executions, 3)
		assert.Equal(t, []jobstate.State{
			Queued, Claimed, Downloading, Queued, Claimed, Downloading, Queued, Claimed, Downloading, Failed,
		}, path(s.History))
	})

	t.Run("Heartbeat: the worker updates heartbeat_at every N seconds; status shows stuck if the heartbeat is older than T", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "film.mkv", "n1")
		k := f.queue("alice", "doc.pdf", "n2")
		c := f.claim(j.ID, "w1")
		d := f.claim(k.ID, "w2")
		for i := 0; i < 12; i++ { // two minutes of heartbeats every N seconds
			f.Clock.Advance(HeartbeatEvery)
			l, err := f.Engine.Heartbeat(f.ctx, c.Lease)
			require.NoError(t, err)
			assert.True(t, l.ExpiresAt.Equal(f.Clock.Now().Add(HeartbeatTimeout)), "the lease is renewed for T")
			c.Lease = l
			assert.True(t, f.snap(j.ID).Job.HeartbeatAt.Equal(f.Clock.Now()), "heartbeat_at is now")
			if i < 2 { // w2 heartbeats at 10 s and 20 s, then goes silent
				_, err := f.Engine.Heartbeat(f.ctx, d.Lease)
				require.NoError(t, err)
			}
			stuck, err := f.Stuck(f.ctx)
			require.NoError(t, err)
			var ids []uuid.UUID
			for _, s := range stuck {
				ids = append(ids, s.ID)
			}
			assert.NotContains(t, ids, j.ID, "a heartbeating job is never stuck")
			switch now := f.Clock.Now().Sub(Start); {
			case now <= 2*HeartbeatEvery+HeartbeatTimeout:
				assert.Empty(t, ids, "at %s w2's heartbeat (20 s) is not older than T", now)
			default:
				assert.Equal(t, []uuid.UUID{k.ID}, ids, "at %s w2's heartbeat (20 s) is older than T", now)
				assert.True(t, stuck[0].HeartbeatAt.Equal(Start.Add(2*HeartbeatEvery)))
			}
		}
		r := f.sweep()
		assert.Equal(t, 1, r.Aborted, "only the silent job lost its lease")
		assert.Equal(t, Claimed, f.snap(j.ID).Job.State, "the heartbeats kept the lease")
		assert.Equal(t, Queued, f.snap(k.ID).Job.State)
		stuck, err := f.Stuck(f.ctx)
		require.NoError(t, err)
		assert.Empty(t, stuck, "recovered jobs are no longer stuck")
	})

	t.Run("Idempotency key: sha256(user_id:file_id:request_nonce)", func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		assert.Equal(t, jobstate.Key("alice", "doc.pdf", "n1"), j.IdempotencyKey)
		assert.Len(t, j.IdempotencyKey, 64, "hex SHA-256")
		assert.NotEqual(t, jobstate.Key("alice", "doc.pdf", "n1"), jobstate.Key("alice:doc.pdf", "n1"), "parts cannot run into each other")
		assert.NotEqual(t, jobstate.Key("alice", "doc.pdf", "n1"), jobstate.Key("bob", "doc.pdf", "n1"))
		assert.NotEqual(t, jobstate.Key("alice", "doc.pdf", "n1"), jobstate.Key("alice", "film.mkv", "n1"))
	})

	t.Run("Repeated callbacks with the same nonce return the existing job (no new enqueue)", func(t *testing.T) {
		f := newFixture(t)
		var wg sync.WaitGroup
		ids := make([]uuid.UUID, 10)
		existing := make([]bool, 10)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, err := f.Download(f.ctx, "alice", "doc.pdf", "n1")
				if err != nil {
					t.Error(err)
					return
				}
				ids[i], existing[i] = c.Job.ID, c.Existing
			}(i)
		}
		wg.Wait()
		fresh := 0
		for i, id := range ids {
			assert.Equal(t, ids[0], id)
			if !existing[i] {
				fresh++
			}
		}
		assert.Equal(t, 1, fresh, "one callback enqueued, the others got the existing job")
		counts, err := f.Engine.Counts(f.ctx, MachineName)
		require.NoError(t, err)
		assert.Equal(t, 1, counts[Queued])
		require.Equal(t, Delivered, f.process(ids[0], "w1").State)
		c, err := f.Download(f.ctx, "alice", "doc.pdf", "n1")
		require.NoError(t, err)
		assert.True(t, c.Existing)
		assert.Equal(t, Delivered, c.Job.State, "a late repeat after delivery still gets the job")
		assert.Equal(t, 1, f.Deliveries.Count(ids[0]))
	})

	t.Run("The bot generates a nonce for each Download click: a new click is a new job", func(t *testing.T) {
		f := newFixture(t)
		a := f.queue("alice", "doc.pdf", "n1")
		b := f.queue("alice", "doc.pdf", "n2")
		assert.NotEqual(t, a.ID, b.ID)
	})

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
		// w1 crashes. A new worker starting before T finds nothing to recover.
		f.Clock.Advance(HeartbeatTimeout - time.Second)
		r, err := f.Worker("w2").Recover(f.ctx)
		require.NoError(t, err)
		assert.Zero(t, r.Aborted)
		f.Clock.Advance(time.Second)
		r, err = f.Worker("w2").Recover(f.ctx)
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
		}
		stuck, err := f.Stuck(f.ctx)
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

	t.Run("Recovery after crash: otherwise (attempt >= 3) FAILED", func(t *testing.T) {
		f := newFixture(t)
		var ids []uuid.UUID
		for _, nonce := range []string{"n1", "n2", "n3"} {
			j := f.queue("alice", "doc.pdf", nonce)
			ids = append(ids, j.ID)
			for i := 0; i < 2; i++ { // two heartbeat timeouts in CLAIMED
				f.claim(j.ID, "w1")
				f.Clock.Advance(HeartbeatTimeout)
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
		f.Clock.Advance(HeartbeatTimeout)
		r, err := f.Worker("w2").Recover(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, r.Failed)
		for i, id := range ids {
			s := f.snap(id)
			assert.Equal(t, Failed, s.Job.State)
			assert.Equal(t, 3, s.Job.Attempt, "three executions")
			assert.Equal(t, []jobstate.State{Claimed, Downloading, Streaming}[i], last(s.History).From)
			assert.Equal(t, jobstate.EventFail, last(s.History).Event)
		}
	})

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

// TestTableIsTheSeedsDiagram checks the table against seed 004's diagram,
// arrow for arrow, its labels mapped to the engine's events, plus the one
// arrow the seed's rules add (CLAIMED → FAILED).
func TestTableIsTheSeedsDiagram(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	type arrow struct {
		from  jobstate.State
		event jobstate.Event
		to    jobstate.State
	}
	var got []arrow
	for _, r := range def.Rules() {
		for _, from := range r.From {
			got = append(got, arrow{from, r.Event, r.To})
		}
	}
	assert.Equal(t, []arrow{
		{Queued, jobstate.EventClaim, Claimed},        // worker_claim(job_id)
		{Claimed, StartDownload, Downloading},         // start_download
		{Downloading, StreamToLocalAPI, Streaming},    // stream_to_local_api
		{Streaming, jobstate.EventSucceed, Delivered}, // telegram_ack
		{Downloading, jobstate.EventFail, Failed},     // non_retryable_error
		{Streaming, jobstate.EventFail, Failed},       // non_retryable_error
		{Downloading, jobstate.EventRetry, Queued},    // retryable_error (attempt+1)
		{Streaming, jobstate.EventRetry, Queued},      // retryable_error (attempt+1)
		{Claimed, jobstate.EventAbandon, Queued},      // heartbeat_timeout (attempt+1)
		{Queued, jobstate.EventCancel, Cancelled},     // user_cancel (optional)
		{Queued, jobstate.EventExpire, Expired},       // ttl_expired (optional)
		{Claimed, jobstate.EventFail, Failed},         // "... -> FAILED", and recovery
	}, got)
	var states []jobstate.State
	for _, s := range def.States() {
		states = append(states, s.Name)
	}
	assert.Equal(t, []jobstate.State{Queued, Claimed, Downloading, Streaming, Delivered, Failed, Cancelled, Expired}, states)
	assert.Equal(t, Queued, def.Initial())
}

// TestRunPrintsTheDemonstration runs the program and checks its key lines.
func TestRunPrintsTheDemonstration(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		"job #1 queued; the same callback again: job #1 (existing: true)",
		"job #1: report.pdf for alice: DELIVERED, attempt 0, 1 execution(s)",
		"job #3: video.mp4 for bob: DELIVERED, attempt 2, 3 execution(s)",
		"STREAMING   --retry              --> QUEUED      by worker-1: telegram: HTTP 429 Too Many Requests (Retry-After: 20)",
		"09:01:50  QUEUED      --claim",
		"movie.mkv for carol: FAILED, attempt 0",
		"CLAIMED     --fail               --> FAILED      by worker-1",
		"QUEUED      --cancel             --> CANCELLED   by alice: user_cancel",
		"cancel the delivered job #1: refused (terminal)",
		"QUEUED      --expire             --> EXPIRED     by jobstate: deadline passed",
		"/status: 0 stuck",
		"/status: 3 stuck",
		"recovery sweep: 3 lease(s) lost, 2 back to QUEUED, 1 FAILED",
		"STREAMING   --fail               --> FAILED      by jobstate: lease expired",
		"photo.jpg for frank: DELIVERED, attempt 1, 2 execution(s)",
		"stateDiagram-v2",
	} {
		assert.Contains(t, s, want)
	}
}

// update makes TestDiagramIsCurrent rewrite the documented diagram.
var update = flag.Bool("update", false, "rewrite the mermaid block of "+docPath+" from the definition")

// docPath is the example's documentation page, relative to this package.
const docPath = "../../docs/examples/delivery.md"

// TestDiagramIsCurrent checks that the ```mermaid block of the example's
// page is the definition's diagram; -update rewrites it.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	doccheck.Diagram(t, docPath, def, *update)
}
