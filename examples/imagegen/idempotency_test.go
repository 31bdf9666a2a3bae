package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
)

// TestIdempotency replays section 3: the key, the logic and the goal.
func TestIdempotency(t *testing.T) {
	t.Run("Key: Hash(userId + prompt + params + timestamp_minute)", func(t *testing.T) {
		r := request("alice", "a fox")
		k := IdempotencyKey(epoch, r)
		assert.Equal(t, k, IdempotencyKey(epoch.Add(54*time.Second), r), "the rest of the minute")
		assert.NotEqual(t, k, IdempotencyKey(epoch.Add(55*time.Second), r), "the next minute")
		assert.NotEqual(t, k, IdempotencyKey(epoch, request("bob", "a fox")), "another user")
		assert.NotEqual(t, k, IdempotencyKey(epoch, request("alice", "a dog")), "another prompt")
		other := r
		other.Params.Size = "1024x1024"
		assert.NotEqual(t, k, IdempotencyKey(epoch, other), "other params")
	})
	t.Run("Logic: same key and not failed: the existing job is returned", func(t *testing.T) {
		for _, s := range []jobstate.State{Queued, Running, Completed, Rejected, DeadLetter} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				r, err := decodeRequest(j.Payload)
				require.NoError(t, err)
				balance := h.DB.Balance("alice")
				h.Clock.Set(epoch.Add(54 * time.Second)) // still the first minute
				c, err := h.CreateJob(h.ctx, r)
				require.NoError(t, err)
				assert.True(t, c.Existing)
				assert.Equal(t, j.ID, c.Job.ID)
				assert.Equal(t, s, c.Job.State)
				assert.Equal(t, balance, h.DB.Balance("alice"), "no second deduction")
				assert.Equal(t, 1, h.mem.Len())
			})
		}
	})
	t.Run("Logic: a failed job frees the key", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.NotEqual(t, j.ID, c.Job.ID)
		assert.Equal(t, Queued, c.Job.State)
		assert.Len(t, h.DB.Reservations(), 2, "the new job pays for itself")
		assert.Equal(t, Failed, h.get(j.ID).State, "the failed job is still retried on its own")
		again, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.True(t, again.Existing, "the new job holds the key now")
		assert.Equal(t, c.Job.ID, again.Job.ID)
	})
	t.Run("Conflict with the goal: a resend while the job waits in failed is charged again", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		h.Clock.Advance(time.Second) // the UI's network retry, within the backoff
		require.Equal(t, Failed, h.get(j.ID).State)
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing, "the literal rule: a failed job does not hold the key")
		assert.Equal(t, 100-2*CreditsPerImage, h.DB.Balance("alice"), "a second deduction for one click: the goal is not met")
	})
	t.Run("The goal served instead: with the one-line change, failed keeps the key", func(t *testing.T) {
		db := NewAppDB(map[string]int{"alice": 100})
		spec := NewSpec(db)
		spec.Policy.Idempotency.ReleaseIn = nil // the one-line change of docs/examples/imagegen.md
		spec.Name = "keep-failed-key"           // other rules, so not image generation's name
		def, err := jobstate.NewDefinition(spec)
		require.NoError(t, err)
		clock := jobstatetest.NewClock(epoch)
		eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
		require.NoError(t, err)
		api := NewFakeAPI(clock, 0)
		app := &App{Def: def, Eng: eng, Clock: clock, DB: db, API: api}
		r := request("alice", "a fox")
		api.Script(r.Prompt, ErrAPI500)
		first, err := app.CreateJob(context.Background(), r)
		require.NoError(t, err)
		got, err := app.Work(context.Background(), "w")
		require.NoError(t, err)
		require.Equal(t, Failed, got.State)
		clock.Advance(time.Second)
		c, err := app.CreateJob(context.Background(), r)
		require.NoError(t, err)
		assert.True(t, c.Existing)
		assert.Equal(t, first.Job.ID, c.Job.ID)
		assert.Equal(t, 100-CreditsPerImage, db.Balance("alice"), "one deduction")
	})
	t.Run("dead_letter keeps the key: the existing job is returned", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(DeadLetter)
		require.True(t, h.Clock.Now().Before(epoch.Add(55*time.Second)), "still the same minute")
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		balance := h.DB.Balance("alice")
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.True(t, c.Existing)
		assert.Equal(t, j.ID, c.Job.ID)
		assert.Equal(t, DeadLetter, c.Job.State)
		assert.Equal(t, balance, h.DB.Balance("alice"))
	})
	t.Run("a new minute creates a new job", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		h.Clock.Set(epoch.Add(55 * time.Second)) // 09:01:00
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.NotEqual(t, first.ID, c.Job.ID)
		assert.Equal(t, 100-2*CreditsPerImage, h.DB.Balance("alice"))
	})
	t.Run("the same key with a different payload is a conflict", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		before := h.snapshot(first.ID)
		other := request("alice", "a dog")
		_, err := h.Eng.Create(h.ctx, jobstate.NewJob{Machine: Machine, Payload: other.encode(), Owner: "alice", Actor: "alice", Key: IdempotencyKey(h.Clock.Now(), r)})
		require.ErrorIs(t, err, jobstate.ErrKeyConflict)
		var kc *jobstate.KeyConflictError
		require.ErrorAs(t, err, &kc)
		assert.Equal(t, first.ID, kc.Holder)
		assert.Equal(t, 1, h.mem.Len(), "nothing created")
		assert.Len(t, h.DB.Reservations(), 1, "no credits taken")
		assert.Equal(t, before, h.snapshot(first.ID))
	})
	t.Run("Goal: prevent accidental double-deduction on UI network retry", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := h.CreateJob(h.ctx, r)
				if err != nil || !c.Existing || c.Job.ID != first.ID {
					t.Errorf("resend: %v, %+v", err, c)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
	})
}

// TestRedrive checks the operator's answer to the lifecycle's "dead_letter: Max
// retries exceeded. Manual review?": after the review, App.Redrive runs the
// dead letter again as a new job (Engine.Redrive, Policy.RedriveFrom).
func TestRedrive(t *testing.T) {
	const reason = "reviewed: API outage over"
	// deadLetter drives a job of alice's into dead_letter and lets the API
	// answer its prompt with an image from then on.
	deadLetter := func(h *harness) jobstate.Job {
		h.t.Helper()
		j := h.reach(DeadLetter)
		r, err := decodeRequest(j.Payload)
		require.NoError(h.t, err)
		h.API.Script(r.Prompt, nil)
		h.Clock.Advance(time.Minute)
		return j
	}

	t.Run("only from dead_letter", func(t *testing.T) {
		def, err := NewDefinition(NewAppDB(nil))
		require.NoError(t, err)
		assert.Equal(t, []jobstate.State{DeadLetter}, def.Policy().RedriveFrom)
		for _, s := range []jobstate.State{Queued, Running, Failed, Completed, Rejected} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				before := h.snapshot(j.ID)
				balance, reservations := h.DB.Balance("alice"), h.DB.Reservations()
				_, err := h.Redrive(h.ctx, j.ID, "ops", reason)
				require.ErrorIs(t, err, jobstate.ErrInvalidTransition)
				var te *jobstate.TransitionError
				require.ErrorAs(t, err, &te)
				assert.Equal(t, []any{j.ID, jobstate.EventRedrive, s}, []any{te.JobID, te.Event, te.From})
				assert.Equal(t, before, h.snapshot(j.ID), "nothing changes")
				assert.Equal(t, 1, h.mem.Len(), "no new job")
				assert.Equal(t, balance, h.DB.Balance("alice"))
				assert.Equal(t, reservations, h.DB.Reservations())
				assert.Empty(t, h.DB.Redrives())
			})
		}
		t.Run("an unknown job", func(t *testing.T) {
			h := newHarness(t)
			_, err := h.Redrive(h.ctx, uuid.New(), "ops", reason)
			assert.ErrorIs(t, err, jobstate.ErrNotFound)
			assert.Zero(t, h.mem.Len())
		})
	})

	t.Run("the dead letter stays final, its history unchanged", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		before := h.snapshot(j.ID)
		_, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		after := h.snapshot(j.ID)
		want := before.Job
		want.Version++ // the write that records the redrive, without a transition
		want.UpdatedAt = h.Clock.Now()
		assert.Equal(t, want, after.Job, "still dead_letter, with its outcome, retries and completion time")
		assert.Equal(t, before.History, after.History, "no record added")
		assert.Equal(t, DeadLetter, h.history(j.ID)[len(after.History)-1].To, "the history still replays to dead_letter")
		assert.Equal(t, before.Execs, after.Execs)
		assert.Equal(t, []jobstate.EffectRecord{{Name: jobstate.RedriveEffect, Actor: "ops", At: h.Clock.Now()}}, after.Effects)
		// Still final: nothing moves it, and the sweep leaves it alone.
		_, err = h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrTerminal)
		_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		h.Clock.Advance(time.Hour)
		h.sweep()
		assert.Equal(t, after, h.snapshot(j.ID))
	})

	t.Run("once only", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		first, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		before := h.snapshot(j.ID)
		for _, op := range []string{"ops", "another-operator"} {
			_, err = h.Redrive(h.ctx, j.ID, op, "again")
			assert.ErrorIs(t, err, jobstate.ErrEffectApplied, "by %s", op)
		}
		assert.Equal(t, before, h.snapshot(j.ID), "nothing changes")
		assert.Equal(t, 2, h.mem.Len(), "the dead letter and its one redrive")
		require.Len(t, h.DB.Redrives(), 1)
		assert.Equal(t, first.ID, h.DB.Redrives()[0].Job)
	})

	t.Run("once only under concurrent redrives", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		const operators = 16
		var wg sync.WaitGroup
		errs := make([]error, operators)
		for i := 0; i < operators; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = h.Redrive(h.ctx, j.ID, fmt.Sprintf("ops-%d", i), reason)
			}(i)
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				assert.ErrorIs(t, err, jobstate.ErrEffectApplied)
			}
		}
		assert.Equal(t, 1, ok, "one operator redrove it; the others were refused")
		assert.Equal(t, 2, h.mem.Len())
		assert.Len(t, h.DB.Redrives(), 1)
		assert.Len(t, h.snapshot(j.ID).Effects, 1)
	})

	t.Run("the new job: the dead letter's request and owner, created by the operator", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		now := h.Clock.Now()
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.NotEqual(t, j.ID, n.ID)
		assert.Equal(t, Queued, n.State)
		assert.Equal(t, j.Payload, n.Payload)
		r, err := decodeRequest(n.Payload)
		require.NoError(t, err)
		assert.Equal(t, request("alice", "a study in dead_letter"), r)
		assert.Equal(t, "alice", n.Owner, "the job stays the user's")
		assert.Equal(t, j.Priority, n.Priority)
		assert.Equal(t, EngineMaxRetries, n.MaxRetries, "a fresh set of retries")
		assert.False(t, n.OwnBackoff, "the machine's backoff, as the redriven job had")
		assert.Zero(t, n.Attempt)
		assert.Zero(t, n.RetryCount)
		assert.Empty(t, n.IdempotencyKey, "the operator's job holds no request key")
		assert.True(t, n.CreatedAt.Equal(now))
		hist := h.history(n.ID)
		assert.Equal(t, []jobstate.Transition{{
			JobID: n.ID, Version: 1, Event: jobstate.EventCreate, To: Queued, Actor: "ops",
			Reason: "redrive of job " + j.ID.String() + ": " + reason, At: now,
		}}, hist, "the creation record names the operator and the dead letter")

		// It completes on its next attempt, for the user.
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, n.ID, got.ID)
		assert.Equal(t, Completed, got.State)
		assert.Equal(t, 1, got.Attempt)
		assert.Equal(t, []jobstate.State{Queued, Running, Completed}, path(h.history(n.ID)))
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, []any{n.ID, "alice", ResultURL(n.ID)}, []any{assets[0].JobID, assets[0].Owner, assets[0].URL})
		assert.Equal(t, DeadLetter, h.get(j.ID).State)
	})

	t.Run("credits: a redrive is not charged, the dead letter's reservation covers it", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		reservations := h.DB.Reservations()
		require.Equal(t, []Reservation{{JobID: j.ID, User: "alice", Credits: CreditsPerImage, At: epoch}}, reservations)
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"), "one deduction for one image")
		assert.Equal(t, reservations, h.DB.Reservations(), "no reservation for the redrive")
		want := []Redrive{{Job: n.ID, Of: j.ID, Owner: "alice", Operator: "ops", At: h.Clock.Now()}}
		assert.Equal(t, want, h.DB.Redrives(), "the registry names the dead letter that pays for it")
		// The registry and the creation record agree.
		rec := h.history(n.ID)[0]
		assert.Equal(t, want[0].Operator, rec.Actor)
		assert.True(t, strings.HasPrefix(rec.Reason, "redrive of job "+want[0].Of.String()))
	})
	t.Run("credits: a redrive needs no quota", func(t *testing.T) {
		// alice pays her last credits for a job that dead-letters; the
		// operator's redrive still runs it, and costs her nothing.
		h := newHarnessWith(t, map[string]int{"alice": CreditsPerImage})
		j := deadLetter(h)
		require.Zero(t, h.DB.Balance("alice"))
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.Zero(t, h.DB.Balance("alice"))
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, []any{n.ID, Completed}, []any{got.ID, got.State})
		// Her own requests are still checked against her balance.
		_, err = h.CreateJob(h.ctx, request("alice", "another fox"))
		assert.ErrorIs(t, err, ErrQuotaExceeded)
	})
	t.Run("credits: a redrive of a redrive is covered by the first reservation", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		h.API.Script(r.Prompt, ErrAPI500) // the outage is not over
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(t, err)
			require.Equal(t, n.ID, got.ID)
			if got.Terminal() {
				require.Equal(t, DeadLetter, got.State)
				break
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
		h.API.Script(r.Prompt, nil)
		m, err := h.Redrive(h.ctx, n.ID, "ops", "reviewed again")
		require.NoError(t, err)
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, []any{m.ID, Completed}, []any{got.ID, got.State})
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
		assert.Len(t, h.DB.Reservations(), 1)
		redrives := h.DB.Redrives()
		require.Len(t, redrives, 2)
		assert.Equal(t, []uuid.UUID{j.ID, n.ID}, []uuid.UUID{redrives[0].Of, redrives[1].Of})
	})
	t.Run("credits: only App.Redrive's creation is free", func(t *testing.T) {
		// The rule follows the mark App.Redrive puts on the creation, not
		// the actor's name: an operator creating a job for alice, or
		// calling Engine.Redrive around App.Redrive, is charged.
		h := newHarness(t)
		j := deadLetter(h)
		_, err := h.Eng.Create(h.ctx, jobstate.NewJob{Machine: Machine, Payload: j.Payload, Owner: "alice", Actor: "ops"})
		require.NoError(t, err)
		assert.Equal(t, 100-2*CreditsPerImage, h.DB.Balance("alice"))
		_, err = h.Eng.Redrive(h.ctx, j.ID, jobstate.Call{Actor: "ops", Reason: reason})
		require.NoError(t, err)
		assert.Equal(t, 100-3*CreditsPerImage, h.DB.Balance("alice"))
		assert.Len(t, h.DB.Reservations(), 3)
		assert.Empty(t, h.DB.Redrives())
	})
}
