package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestCreation replays transition A (null → queued): the trigger, the three
// guards and the action.
func TestCreation(t *testing.T) {
	t.Run("Trigger: user calls createJob", func(t *testing.T) {
		h := newHarness(t)
		c, err := h.CreateJob(h.ctx, request("alice", "a fox"))
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.Equal(t, Queued, c.Job.State)
		assert.Equal(t, "alice", c.Job.Owner)
		hist := h.history(c.Job.ID)
		require.Len(t, hist, 1)
		assert.Equal(t, jobstate.Transition{JobID: c.Job.ID, Version: 1, Event: jobstate.EventCreate, To: Queued, Actor: "alice", At: epoch}, hist[0])
	})

	// refused checks that creating r is refused by the guard with cause,
	// leaving no job and no credits taken.
	refused := func(t *testing.T, h *harness, r Request, cause error) {
		t.Helper()
		before := h.DB.Balance(r.UserID)
		_, err := h.CreateJob(h.ctx, r)
		require.ErrorIs(t, err, jobstate.ErrGuardRefused)
		require.ErrorIs(t, err, cause)
		var te *jobstate.TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, jobstate.EventCreate, te.Event)
		assert.Zero(t, h.mem.Len(), "nothing created")
		assert.Equal(t, before, h.DB.Balance(r.UserID), "no credits taken")
		assert.Empty(t, h.DB.Reservations())
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
	}
	t.Run("Guard: PromptGuard.validate() == True", func(t *testing.T) {
		bad := []struct {
			name string
			req  Request
		}{
			{"empty prompt", request("alice", "")},
			{"blank prompt", request("alice", " \t\n ")},
			{"prompt too long", request("alice", strings.Repeat("é", MaxPromptRunes+1))},
			{"unsupported size", Request{UserID: "alice", Prompt: "a fox", Params: Params{Size: "640x480"}}},
		}
		for _, b := range bad {
			t.Run(b.name, func(t *testing.T) { refused(t, newHarness(t), b.req, ErrInvalidPrompt) })
		}
		t.Run("longest prompt allowed", func(t *testing.T) {
			h := newHarness(t)
			h.create(request("alice", strings.Repeat("é", MaxPromptRunes)))
		})
	})
	t.Run("Guard: Quota.check() == True", func(t *testing.T) {
		h := newHarness(t)
		refused(t, h, request("poor", "a fox"), ErrQuotaExceeded)
		refused(t, h, request("nobody", "a fox"), ErrQuotaExceeded)
	})
	t.Run("Guard: Idempotency.check(promptHash) == True", func(t *testing.T) {
		// A request whose key is held gets the holder back, and neither the
		// guard nor the action runs: alice's duplicate is answered although
		// the first request spent her last credits.
		h := newHarnessWith(t, map[string]int{"alice": CreditsPerImage})
		r := request("alice", "a fox")
		first := h.create(r)
		require.Zero(t, h.DB.Balance("alice"))
		again, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err, "not refused by the quota: the guard did not run")
		assert.True(t, again.Existing)
		assert.Equal(t, first.ID, again.Job.ID)
		assert.Equal(t, 1, h.mem.Len())
	})
	t.Run("Action: Deduct Credits (Reserved)", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
		assert.Equal(t, []Reservation{{JobID: j.ID, User: "alice", Credits: CreditsPerImage, At: epoch}}, h.DB.Reservations())
	})
	t.Run("Action: credits reserved exactly once under concurrent duplicate creates", func(t *testing.T) {
		h := newHarness(t)
		const clicks = 64
		var wg sync.WaitGroup
		ids := make([]uuid.UUID, clicks)
		fresh := make([]bool, clicks)
		for i := 0; i < clicks; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, err := h.CreateJob(h.ctx, request("alice", "a fox"))
				if err != nil {
					t.Error(err)
					return
				}
				ids[i], fresh[i] = c.Job.ID, !c.Existing
			}(i)
		}
		wg.Wait()
		created := 0
		for i := range ids {
			assert.Equal(t, ids[0], ids[i], "every click gets the same job")
			if fresh[i] {
				created++
			}
		}
		assert.Equal(t, 1, created, "one click created it; the others found it")
		assert.Equal(t, 1, h.mem.Len())
		assert.Len(t, h.DB.Reservations(), 1)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
	})
	t.Run("Action: different requests racing past the quota cannot overdraw it", func(t *testing.T) {
		// poor2 can pay for one image; ten different prompts race. The
		// guard may let several through; the reservation, checked as it
		// deducts, lets one.
		h := newHarnessWith(t, map[string]int{"poor2": CreditsPerImage})
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := h.CreateJob(h.ctx, request("poor2", fmt.Sprintf("prompt %d", i)))
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !errors.Is(err, ErrQuotaExceeded) {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		assert.Equal(t, 1, ok)
		assert.Equal(t, 1, h.mem.Len(), "a refused reservation leaves no job")
		assert.Zero(t, h.DB.Balance("poor2"))
		assert.Len(t, h.DB.Reservations(), 1)
	})
}

// TestExecution replays transition B (queued → running).
func TestExecution(t *testing.T) {
	t.Run("Trigger: async worker pickup", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		h.Clock.Advance(time.Second)
		c := h.claim("worker-1")
		assert.Equal(t, j.ID, c.Job.ID)
		assert.Equal(t, Running, c.Job.State)
		assert.Equal(t, 1, c.Lease.Token)
		hist := h.history(j.ID)
		assert.Equal(t, []jobstate.State{Queued, Running}, path(hist))
		assert.Equal(t, "worker-1", hist[1].Actor)
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "worker-2"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "a running job is no one else's")
	})
	t.Run("Action: update timestamp startedAt", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		assert.True(t, j.StartedAt.IsZero())
		h.Clock.Advance(time.Second)
		h.API.Script("a fox", nil)
		got, err := h.Work(h.ctx, "worker-1")
		require.NoError(t, err)
		assert.True(t, got.StartedAt.Equal(epoch.Add(time.Second)), "the job's startedAt")
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		require.Len(t, execs, 1)
		assert.True(t, execs[0].StartedAt.Equal(epoch.Add(time.Second)), "the execution's startedAt, set as the worker starts")
	})
	t.Run("Action: send heartbeat", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		c := h.claim("worker-1")
		assert.True(t, c.Lease.ExpiresAt.Equal(epoch.Add(LeaseTTL)))
		h.Clock.Advance(LeaseTTL - time.Second)
		l, err := h.Eng.Heartbeat(h.ctx, c.Lease)
		require.NoError(t, err)
		assert.True(t, l.ExpiresAt.Equal(h.Clock.Now().Add(LeaseTTL)), "the lease runs on")
		h.Clock.Advance(2 * time.Second) // past the first expiry
		h.sweep()
		assert.Equal(t, Running, h.get(j.ID).State, "a heartbeating worker keeps the job")
	})
	t.Run("a worker that stops heartbeating loses the job to a retry", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		c := h.claim("worker-1")
		h.Clock.Advance(LeaseTTL)
		h.sweep()
		got := h.get(j.ID)
		assert.Equal(t, Failed, got.State)
		assert.Equal(t, 1, got.RetryCount)
		assert.Equal(t, "lease expired", got.LastError)
		_, err := h.Report(h.ctx, c.Lease, Image{URL: "late"}, nil)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		assert.Empty(t, h.DB.Assets())
	})
}

// TestSuccess replays transition C (running → completed) and its three
// actions.
func TestSuccess(t *testing.T) {
	// succeed runs one job whose API call returns an image.
	succeed := func(t *testing.T) (*harness, jobstate.Job) {
		h := newHarness(t)
		h.API.Script("a fox", nil)
		j := h.create(request("alice", "a fox"))
		got, err := h.Work(h.ctx, "worker-1")
		require.NoError(t, err)
		assert.Equal(t, j.ID, got.ID)
		return h, got
	}
	t.Run("Trigger: API returns image URL", func(t *testing.T) {
		h, j := succeed(t)
		assert.Equal(t, Completed, j.State)
		assert.Equal(t, jobstate.OutcomeSucceeded, j.Outcome)
		assert.Equal(t, epoch.Add(3*time.Second), j.CompletedAt, "after the API's 3 s")
		assert.Equal(t, []jobstate.State{Queued, Running, Completed}, path(h.history(j.ID)))
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		assert.Equal(t, jobstate.ExecDone, execs[0].Status)
		assert.Equal(t, execs[0].ID, j.Committed)
	})
	t.Run("Action 1: download image to private buckets (/originals)", func(t *testing.T) {
		h, j := succeed(t)
		obj, ok := h.DB.Object(OriginalPath(j.ID))
		require.True(t, ok)
		assert.True(t, strings.HasPrefix(OriginalPath(j.ID), "/originals/"))
		assert.True(t, bytes.HasPrefix(obj, []byte("\x89PNG")))
	})
	t.Run("Action 2: create asset entry in library", func(t *testing.T) {
		h, j := succeed(t)
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, j.ID, assets[0].JobID)
		assert.Equal(t, "alice", assets[0].Owner)
		assert.Equal(t, OriginalPath(j.ID), assets[0].Path)
		assert.True(t, strings.HasPrefix(assets[0].Source, "https://api.example/"))
		assert.True(t, assets[0].At.Equal(j.CompletedAt))
	})
	t.Run("Action 3: update job resultUrl", func(t *testing.T) {
		h, j := succeed(t)
		assert.Equal(t, ResultURL(j.ID), string(j.Result))
		assert.Equal(t, string(j.Result), h.DB.Assets()[0].URL)
		assert.Empty(t, j.LastError)
	})
	t.Run("the asset is stored once", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		stale := h.claim("worker-1") // stalls past its lease
		h.Clock.Advance(LeaseTTL)
		h.sweep()
		h.Clock.Advance(Backoff.Delay(1, 0))
		h.sweep()
		h.API.Script("a fox", nil)
		winner, got := h.workLease("worker-2")
		require.Equal(t, Completed, got.State)

		before := h.snapshot(j.ID)
		// The stalled worker comes back with its own image.
		_, err := h.Report(h.ctx, stale.Lease, Image{URL: "https://api.example/late.png"}, nil)
		var ce *jobstate.CommitError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, winner.ExecID, ce.Winner)
		// The winner's success is delivered twice.
		_, err = h.Report(h.ctx, winner, Image{URL: "https://api.example/again.png"}, nil)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		assert.Equal(t, before, h.snapshot(j.ID), "refusals change nothing")
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, ResultURL(j.ID), assets[0].URL)
	})
}
