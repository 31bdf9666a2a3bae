package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestFailure replays transition D (running → failed) and its actions.
func TestFailure(t *testing.T) {
	t.Run("Trigger: API timeout / 500 error", func(t *testing.T) {
		for _, cause := range []error{ErrAPITimeout, ErrAPI500} {
			t.Run(cause.Error(), func(t *testing.T) {
				h := newHarness(t)
				h.API.Script("a fox", cause)
				j := h.create(request("alice", "a fox"))
				got, err := h.Work(h.ctx, "w")
				require.NoError(t, err)
				assert.Equal(t, Failed, got.State)
				assert.Equal(t, cause.Error(), got.LastError)
				assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
				hist := h.history(j.ID)
				last := hist[len(hist)-1]
				assert.Equal(t, []any{Running, jobstate.EventRetry, Failed, cause.Error()}, []any{last.From, last.Event, last.To, last.Reason})
			})
		}
	})

	// failUntilDead fails one job every attempt, returning the job after
	// each failure and the time of each failure.
	failUntilDead := func(t *testing.T) (*harness, []jobstate.Job, []time.Time) {
		h := newHarness(t)
		h.API.Script("a fox", ErrAPI500)
		h.create(request("alice", "a fox"))
		var jobs []jobstate.Job
		var at []time.Time
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(t, err)
			jobs, at = append(jobs, got), append(at, h.Clock.Now())
			if got.Terminal() {
				return h, jobs, at
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
	}
	t.Run("Action: increment retryCount", func(t *testing.T) {
		h, jobs, _ := failUntilDead(t)
		id := jobs[0].ID
		hist := h.history(id)
		var counts []int
		for i := range hist {
			if hist[i].From == Running && hist[i].To == Failed {
				counts = append(counts, RetryCount(hist[:i+1]))
			}
		}
		assert.Equal(t, []int{1, 2, 3}, counts, "every failure increments retryCount, the last one too")
		n, err := h.RetryCount(h.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, MaxRetries, n, "retryCount 3 at dead_letter")
	})
	t.Run("Action: calculate backoff (exponential)", func(t *testing.T) {
		want := []time.Duration{2 * time.Second, 4 * time.Second}
		_, jobs, at := failUntilDead(t)
		require.Len(t, jobs, len(want)+1, "two re-queues, then dead_letter")
		for i, d := range want {
			t.Run(fmt.Sprintf("retry %d waits %s", i+1, d), func(t *testing.T) {
				assert.Equal(t, d, jobs[i].NotBefore.Sub(at[i]))
				assert.Equal(t, d, Backoff.Delay(i+1, 0))
			})
		}
		t.Run("the schedule doubles up to its one-minute cap", func(t *testing.T) {
			var got []time.Duration
			for n := 1; n <= 7; n++ {
				got = append(got, Backoff.Delay(n, 0))
			}
			assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}, got)
		})
	})
	t.Run("Action: if retryCount < MAX_RETRIES, schedule re-queue", func(t *testing.T) {
		t.Run("re-queued at retryCount 1 and 2, dead-lettered at 3", func(t *testing.T) {
			h, jobs, _ := failUntilDead(t)
			var states []jobstate.State
			var counts []int
			for _, j := range jobs {
				states = append(states, j.State)
				n, err := h.RetryCount(h.ctx, j.ID)
				require.NoError(t, err)
				counts = append(counts, n)
			}
			assert.Equal(t, []jobstate.State{Failed, Failed, DeadLetter}, states)
			assert.Equal(t, MaxRetries, counts[len(counts)-1])
			assert.Equal(t, EngineMaxRetries, h.Def.Policy().Retry.MaxRetries)
		})
		h := newHarness(t)
		h.API.Script("a fox", ErrAPI500, nil)
		j := h.create(request("alice", "a fox"))
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		require.Equal(t, Failed, got.State)
		due := got.NotBefore
		h.Clock.Set(due.Add(-time.Nanosecond))
		h.sweep()
		assert.Equal(t, Failed, h.get(j.ID).State, "not before the backoff has passed")
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
		h.Clock.Set(due)
		assert.Equal(t, 1, h.sweep().Requeued)
		assert.Equal(t, Queued, h.get(j.ID).State)
		got, err = h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, Completed, got.State, "the retry can succeed")
		assert.Equal(t, 2, got.Attempt)
		assert.Equal(t, []jobstate.State{Queued, Running, Failed, Queued, Running, Completed}, path(h.history(j.ID)))
		assert.Len(t, h.DB.Reservations(), 1, "a retry is not charged again")
	})
	t.Run("Action: else, transition to dead_letter", func(t *testing.T) {
		h, jobs, at := failUntilDead(t)
		last := jobs[len(jobs)-1]
		assert.Len(t, jobs, MaxRetries, "three attempts in all")
		assert.Equal(t, DeadLetter, last.State)
		assert.Equal(t, jobstate.OutcomeDeadLettered, last.Outcome)
		assert.Equal(t, MaxRetries, last.Attempt)
		assert.Equal(t, MaxRetries, RetryCount(h.history(last.ID)), "retryCount 3 at dead_letter")
		assert.Equal(t, EngineMaxRetries, last.RetryCount, "the engine's count of retried failures")
		assert.Equal(t, ErrAPI500.Error(), last.LastError)
		assert.True(t, last.CompletedAt.Equal(at[len(at)-1]))
		hist := h.history(last.ID)
		end := hist[len(hist)-2:]
		assert.Equal(t, []jobstate.State{Running, Failed}, []jobstate.State{end[0].From, end[0].To})
		assert.Equal(t, jobstate.EventFail, end[0].Event)
		assert.Equal(t, []jobstate.State{Failed, DeadLetter}, []jobstate.State{end[1].From, end[1].To})
		assert.Equal(t, jobstate.EventExhaust, end[1].Event)
		assert.Equal(t, end[0].Version+1, end[1].Version, "running → failed → dead_letter in one write")
		assert.True(t, end[0].At.Equal(end[1].At))
		h.Clock.Advance(time.Hour)
		h.sweep()
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "no further attempt")
		assert.Equal(t, MaxRetries, h.API.Calls("a fox"))
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"), "one reservation for all attempts")
	})
}

// TestRejection replays transition E (running → rejected) and its actions.
func TestRejection(t *testing.T) {
	// reject runs one job whose API call is blocked by the safety filter,
	// through a worker named worker-1, and returns the lease it ran under.
	reject := func(t *testing.T) (*harness, jobstate.Lease, jobstate.Job) {
		h := newHarness(t)
		h.API.Script("a gory battle scene", ErrSafetyBlock)
		j := h.create(request("carol", "a gory battle scene"))
		lease, got := h.workLease("worker-1")
		require.Equal(t, j.ID, got.ID)
		return h, lease, got
	}
	t.Run("Trigger: API safety filter triggers (NSFW detected)", func(t *testing.T) {
		h, c, j := reject(t)
		assert.Equal(t, Rejected, j.State)
		assert.Equal(t, jobstate.OutcomeRejected, j.Outcome)
		assert.Zero(t, j.Leases)
		hist := h.history(j.ID)
		last := hist[len(hist)-1]
		assert.Equal(t, []any{Running, EventReject, Rejected, "worker-1", ErrSafetyBlock.Error(), c.ExecID},
			[]any{last.From, last.Event, last.To, last.Actor, last.Reason, last.ExecID})
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		assert.Equal(t, jobstate.ExecAborted, execs[0].Status, "the execution ends without a commit")
		assert.Equal(t, uuid.Nil, j.Committed)
		assert.Empty(t, h.DB.Assets(), "nothing stored")
		assert.Empty(t, j.Result)
	})
	t.Run("Action: Refund: NO (policy violation penalty)", func(t *testing.T) {
		h, _, j := reject(t)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("carol"))
		assert.Equal(t, []Reservation{{JobID: j.ID, User: "carol", Credits: CreditsPerImage, At: epoch}}, h.DB.Reservations())
	})
	t.Run("Action: Log: audit log SAFE_BLOCK", func(t *testing.T) {
		h, c, j := reject(t)
		want := []AuditRecord{{Action: AuditSafeBlock, JobID: j.ID, User: "carol", Actor: "worker-1", Reason: ErrSafetyBlock.Error(), At: j.CompletedAt}}
		assert.Equal(t, want, h.DB.Audit(), "who rejected the job and why")
		hist := h.history(j.ID)
		last := hist[len(hist)-1]
		assert.Equal(t, []any{last.Actor, last.Reason, last.At}, []any{want[0].Actor, want[0].Reason, want[0].At}, "as the history records the rejection")
		// The same rejection reported again is refused and logs nothing.
		before := h.snapshot(j.ID)
		_, err := h.Eng.Advance(h.ctx, c, EventReject, jobstate.Call{Reason: ErrSafetyBlock.Error()})
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		_, err = h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrTerminal)
		assert.Equal(t, before, h.snapshot(j.ID))
		assert.Equal(t, want, h.DB.Audit(), "exactly one SAFE_BLOCK record")
	})
	t.Run("the audit record is written only for a rejection being made", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("carol", "a gory battle scene"))
		assert.ErrorIs(t, h.DB.AuditSafeBlock(h.ctx, j), ErrNoFiring, "outside a firing there is no rejection to record")
		assert.Empty(t, h.DB.Audit())
	})
	t.Run("queued → rejected (moderation before execution)", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("carol", "a gory battle scene"))
		got, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator", Reason: "prompt flagged"})
		require.NoError(t, err)
		assert.Equal(t, Rejected, got.State)
		assert.Equal(t, []AuditRecord{{Action: AuditSafeBlock, JobID: j.ID, User: "carol", Actor: "moderator", Reason: "prompt flagged", At: got.CompletedAt}}, h.DB.Audit())
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("carol"), "no refund")
		assert.Equal(t, []jobstate.State{Queued, Rejected}, path(h.history(j.ID)))
	})
}

// TestInvalidTransitions checks every move the lifecycle's state table does not
// list: no rule of the table makes it, a forged history containing it does
// not replay, and the engine refuses it with a typed error, changing
// nothing.
func TestInvalidTransitions(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	allowed := map[[2]jobstate.State]bool{
		{Queued, Running}: true, {Queued, Rejected}: true,
		{Running, Completed}: true, {Running, Failed}: true, {Running, Rejected}: true,
		{Failed, Queued}: true, {Failed, DeadLetter}: true,
	}
	states := []jobstate.State{Queued, Running, Completed, Failed, Rejected, DeadLetter}
	for _, from := range states {
		for _, to := range states {
			if allowed[[2]jobstate.State{from, to}] {
				continue
			}
			t.Run(fmt.Sprintf("%s → %s is not allowed", from, to), func(t *testing.T) {
				for _, r := range def.Rules() {
					for _, f := range r.From {
						assert.False(t, f == from && r.To == to, "rule %s --%s--> %s", f, r.Event, r.To)
					}
				}
				// A history that made the move anyway does not replay.
				h := newHarness(t)
				j := h.reach(from)
				hist := h.history(j.ID)
				last := hist[len(hist)-1]
				for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventRequeue, jobstate.EventExhaust, EventReject} {
					forged := append(append([]jobstate.Transition(nil), hist...), jobstate.Transition{JobID: j.ID, Version: last.Version + 1, From: from, Event: ev, To: to})
					_, err := def.Replay(forged)
					assert.Error(t, err, "event %s", ev)
					if isTerminal(def, from) {
						assert.ErrorIs(t, err, jobstate.ErrTerminal)
					} else {
						assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
					}
				}
			})
		}
	}

	t.Run("completed, rejected and dead_letter are final", func(t *testing.T) {
		for _, s := range []jobstate.State{Completed, Rejected, DeadLetter} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				before := h.snapshot(j.ID)
				_, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
				_, err = h.Eng.Cancel(h.ctx, j.ID, jobstate.Call{Actor: "alice"})
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
				_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
				assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
				for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventRequeue, jobstate.EventExhaust} {
					next := before.Job
					_, err := def.Step(h.ctx, &next, jobstate.Input{Event: ev})
					assert.ErrorIs(t, err, jobstate.ErrTerminal, "event %s", ev)
				}
				h.Clock.Advance(time.Hour)
				h.sweep()
				assert.Equal(t, before, h.snapshot(j.ID))
			})
		}
	})
	t.Run("failed → running only through queued", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		before := h.snapshot(j.ID)
		_, err := h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "failed has no claim rule")
		next := before.Job
		_, err = def.Step(h.ctx, &next, jobstate.Input{Event: jobstate.EventClaim})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("failed → rejected: the safety filter judges running jobs only", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		before := h.snapshot(j.ID)
		_, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		assert.Equal(t, before, h.snapshot(j.ID))
		assert.Empty(t, h.DB.Audit())
	})
	t.Run("queued → completed: only a running job can succeed", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Queued)
		next := j
		_, err := def.Step(h.ctx, &next, jobstate.Input{Event: jobstate.EventSucceed})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		_, err = h.Eng.Succeed(h.ctx, jobstate.Lease{JobID: j.ID, ExecID: uuid.New(), Token: 1}, jobstate.CommitInput{})
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "no lease, no success")
	})
	t.Run("lifecycle events cannot be fired by hand", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Running)
		before := h.snapshot(j.ID)
		for _, ev := range []jobstate.Event{jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry, jobstate.EventExhaust} {
			_, err := h.Eng.Fire(h.ctx, j.ID, ev, jobstate.Call{})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "event %s", ev)
		}
		assert.Equal(t, before, h.snapshot(j.ID))
	})
}

// isTerminal reports whether s is a terminal state of def.
func isTerminal(def *jobstate.Definition, s jobstate.State) bool {
	spec, _ := def.State(s)
	return spec.Kind == jobstate.KindTerminal
}
