package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestTransitionRules checks the lifecycle's transition rules, with their guards and
// side effects, one by one.
func TestTransitionRules(t *testing.T) {
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
		t.Run("a job at attempt 3 is claimed, refused at start_download, and FAILED: nothing is left in QUEUED", func(t *testing.T) {
			f := newFixture(t)
			for i := 0; i < MaxAttempts; i++ {
				f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusServiceUnavailable})
			}
			j := f.queue("alice", "doc.pdf", "n1")
			for i := 0; i < MaxAttempts; i++ {
				f.due(j.ID)
				require.Equal(t, Queued, f.process(j.ID, "w1").State)
			}
			s := f.snap(j.ID)
			require.Equal(t, MaxAttempts, Attempt(s.Job), "three retryable errors: attempt 3, back in QUEUED")
			f.due(j.ID)
			c, err := f.Engine.Claim(f.ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: "w1"})
			require.NoError(t, err, "a QUEUED job at attempt 3 is claimable")
			require.Equal(t, j.ID, c.Job.ID)
			before := f.snap(j.ID)
			_, err = f.Engine.Advance(f.ctx, c.Lease, StartDownload, jobstate.Call{Args: DownloadArgs{User: UserActive}})
			f.unchanged(before, err, jobstate.ErrGuardRefused, ErrAttemptsSpent)
			got, err := f.Worker("w1").Process(f.ctx, c)
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
			assert.Equal(t, "attempt limit reached: attempt 3, limit 3", got.LastError)
			h := f.snap(j.ID).History
			assert.Equal(t, []jobstate.State{Claimed, Failed}, []jobstate.State{last(h).From, last(h).To})
			assert.Equal(t, 3, f.Disk.calls["doc.pdf"], "three downloads in all")
		})
		t.Run("attempt 3 is refused, even when a job's retry policy would allow more", func(t *testing.T) {
			f := newFixture(t)
			payload, err := json.Marshal(Request{UserID: "alice", FileID: "doc.pdf", Nonce: "n1"})
			require.NoError(t, err)
			more := jobstate.RetryOverride{MaxRetries: jobstate.Retries(MaxAttempts + 2)}
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
			require.Equal(t, Queued, s.Job.State)
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

		// attempt >= 3: a retryable error at attempt 2 still re-queues
		// (2 < 3), at attempt 3; the next claim fails the job.
		k := f.queue("alice", "film.mkv", "n2")
		for i := 0; i < MaxAttempts; i++ {
			f.Disk.Fail("film.mkv", &HTTPError{Service: "yandex disk", Status: http.StatusBadGateway})
		}
		for i := 0; i < MaxAttempts; i++ {
			f.due(k.ID)
			got = f.process(k.ID, "w1")
			assert.Equal(t, Queued, got.State, "retryable at attempt %d < 3: QUEUED", i)
			assert.Equal(t, i+1, Attempt(got), "attempt++")
		}
		f.due(k.ID)
		got = f.process(k.ID, "w1")
		assert.Equal(t, Failed, got.State, "attempt 3: FAILED")
		assert.Equal(t, MaxAttempts, Attempt(got))

		// attempt >= 3 on a heartbeat timeout: CLAIMED at attempt 3 fails.
		m := f.queue("alice", "doc.pdf", "n3")
		for i := 0; i < MaxAttempts; i++ {
			f.claim(m.ID, "w1")
			f.Clock.Advance(LeaseTTL)
			f.sweep()
		}
		require.Equal(t, MaxAttempts, Attempt(f.snap(m.ID).Job))
		require.Equal(t, Queued, f.snap(m.ID).Job.State)
		f.claim(m.ID, "w1")
		f.Clock.Advance(LeaseTTL)
		r := f.sweep()
		assert.Equal(t, 1, r.Failed)
		s := f.snap(m.ID)
		assert.Equal(t, Failed, s.Job.State)
		assert.Equal(t, jobstate.EventFail, last(s.History).Event)
		assert.Equal(t, Claimed, last(s.History).From)
	})

	t.Run("Attempt limit 3: start_download runs at attempts 0, 1 and 2; at attempt 3 the job fails", func(t *testing.T) {
		f := newFixture(t)
		assert.Equal(t, MaxAttempts, f.Def.Policy().Retry.MaxRetries, "re-queued while attempt < 3")
		for i := 0; i < 10; i++ {
			f.Disk.Fail("doc.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusInternalServerError})
		}
		j := f.queue("alice", "doc.pdf", "n1")
		var attempts, downloads []int
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
			for _, rec := range f.snap(j.ID).History {
				if rec.Event == StartDownload && rec.ExecID == c.Lease.ExecID {
					downloads = append(downloads, Attempt(c.Job))
				}
			}
		}
		assert.Equal(t, []int{0, 1, 2, 3}, attempts, "claimed at attempts 0 to 3")
		assert.Equal(t, []int{0, 1, 2}, downloads, "start_download ran at attempts 0, 1 and 2")
		s := f.snap(j.ID)
		assert.Equal(t, Failed, s.Job.State)
		assert.Equal(t, 4, s.Job.Attempt, "four executions")
		assert.Equal(t, []jobstate.State{
			Queued, Claimed, Downloading, Queued, Claimed, Downloading, Queued, Claimed, Downloading, Queued, Claimed, Failed,
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
			assert.True(t, l.ExpiresAt.Equal(f.Clock.Now().Add(LeaseTTL)), "the lease is renewed for T (and a nanosecond)")
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
}

// TestIdempotency checks the idempotency key and the deduplication of callbacks.
func TestIdempotency(t *testing.T) {
	t.Run(`Idempotency key: sha256(user_id + ":" + file_id + ":" + request_nonce)`, func(t *testing.T) {
		f := newFixture(t)
		j := f.queue("alice", "doc.pdf", "n1")
		// sha256("alice:doc.pdf:n1"), in lowercase hex, computed outside Go.
		const want = "be6167f3ffc97689ff688d2c538c208144780d139a7ccfb3ec663f1ba3c79388"
		assert.Equal(t, want, j.IdempotencyKey)
		assert.Equal(t, want, IdempotencyKey("alice", "doc.pdf", "n1"))
		assert.NotEqual(t, jobstate.Key("alice", "doc.pdf", "n1"), j.IdempotencyKey, "not the library's length-prefixed key")
		assert.NotEqual(t, want, IdempotencyKey("bob", "doc.pdf", "n1"))
		assert.NotEqual(t, want, IdempotencyKey("alice", "film.mkv", "n1"))
		assert.NotEqual(t, want, IdempotencyKey("alice", "doc.pdf", "n2"))
		// The literal key joins the parts with ':', so ids that contain ':'
		// can run into each other; the page says so.
		assert.Equal(t, IdempotencyKey("alice", "a:b", "n1"), IdempotencyKey("alice:a", "b", "n1"))
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
}
