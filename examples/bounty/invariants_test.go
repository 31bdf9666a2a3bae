package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestInvariants replays the lifecycle's invariants and business rules 1-14.
func TestInvariants(t *testing.T) {
	t.Run("1_only_buyer_can_fund_cancel_refund", func(t *testing.T) {
		w := newWorld(t)
		open, funded, expired, cancelled := w.post(terms(), time.Time{}), w.funded(), w.expired(), w.cancelled(true)
		ops := []struct {
			name string
			id   uuid.UUID
			do   func(actor string) error
		}{
			{"fund", open.ID, func(a string) error { _, err := w.m.Fund(w.ctx, open.ID, a, w.deposit()); return err }},
			{"cancel open", open.ID, func(a string) error { _, err := w.m.Cancel(w.ctx, open.ID, a); return err }},
			{"cancel funded", funded.ID, func(a string) error { _, err := w.m.Cancel(w.ctx, funded.ID, a); return err }},
			{"refund expired", expired.ID, func(a string) error { _, err := w.m.Refund(w.ctx, expired.ID, a); return err }},
			{"refund cancelled", cancelled.ID, func(a string) error { _, err := w.m.Refund(w.ctx, cancelled.ID, a); return err }},
		}
		for _, op := range ops {
			for _, actor := range []string{"mallory", "alice", ""} {
				before := w.snap(op.id)
				w.refused(before, op.do(actor), jobstate.ErrGuardRefused, ErrNotBuyer)
			}
		}
		for _, op := range ops[1:] { // the cancel of open and the fund of open exclude each other
			assert.NoError(t, op.do(buyerName), op.name)
		}
	})
	t.Run("2_worker_must_register_before_claiming", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		before := w.snap(b.ID)
		_, err := w.m.Join(w.ctx, b.ID, "zoe")
		w.refused(before, err, jobstate.ErrGuardRefused, ErrNotRegistered)
		w.m.Register("zoe")
		w.join(b.ID, "zoe")
		assert.Equal(t, []string{"zoe"}, w.db.Participants(b.ID))
	})
	t.Run("claiming_and_submitting_are_separate_steps", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "alice", pass)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrNotParticipant)
		w.join(b.ID, "alice")
		s := w.snap(b.ID)
		assert.Equal(t, []string{"alice"}, w.db.Participants(b.ID), "claimed: alice is in participants[]")
		assert.Empty(t, s.Execs, "a claim is no submission")
		assert.Equal(t, []any{Funded, Join, Funded, "alice"}, []any{w.last(b.ID).From, w.last(b.ID).Event, w.last(b.ID).To, w.last(b.ID).Actor})
		before = w.snap(b.ID)
		_, err = w.m.Join(w.ctx, b.ID, "alice")
		w.refused(before, err, jobstate.ErrGuardRefused, ErrAlreadyJoined)
		sub, err := w.m.Submit(w.ctx, b.ID, "alice", pass)
		require.NoError(t, err, "a participant submits")
		assert.Equal(t, []string{"alice judging"}, w.statuses(b.ID))
		assert.Equal(t, jobstate.EventClaim, w.last(b.ID).Event, "the submission is an execution of the bounty")
		w.judge(sub)
	})
	t.Run("3_worker_cannot_self_deal", func(t *testing.T) {
		w := newWorld(t)
		w.m.Register(buyerName)
		b := w.funded()
		before := w.snap(b.ID)
		_, err := w.m.Join(w.ctx, b.ID, buyerName)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrSelfDealing)
		_, err = w.m.Submit(w.ctx, b.ID, buyerName, pass)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrNotParticipant)
	})
	t.Run("4_multiple_workers_can_claim_the_same_funded_job", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		for _, name := range []string{"alice", "bob", "carol"} {
			w.join(b.ID, name)
		}
		assert.Equal(t, []string{"alice", "bob", "carol"}, w.db.Participants(b.ID))
		for _, name := range []string{"alice", "bob", "carol"} {
			w.submit(b.ID, name, pass)
		}
		s := w.snap(b.ID)
		assert.Equal(t, Funded, s.Job.State, "the bounty stays funded while judged")
		assert.Equal(t, 3, s.Job.Leases)
		assert.Equal(t, []string{"alice judging", "bob judging", "carol judging"}, w.statuses(b.ID))
		joins, submissions := 0, 0
		for _, rec := range s.History {
			switch rec.Event {
			case Join:
				joins++
			case jobstate.EventClaim:
				submissions++
			default:
				continue
			}
			assert.Equal(t, []jobstate.State{Funded, Funded}, []jobstate.State{rec.From, rec.To})
		}
		assert.Equal(t, []int{3, 3}, []int{joins, submissions})
	})
	t.Run("5_first_passer_wins_atomically", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		workers := []string{"alice", "bob", "carol", "dave"}
		for i := 0; i < 8; i++ {
			name := fmt.Sprintf("w%d", i)
			w.m.Register(name)
			workers = append(workers, name)
		}
		for _, name := range workers {
			w.join(b.ID, name)
		}
		var wins atomic.Int64
		var wg sync.WaitGroup
		for _, name := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := w.m.Submit(w.ctx, b.ID, name, pass)
				if err != nil {
					assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "submitted after the win")
					return
				}
				v, err := w.m.Judge(w.ctx, s)
				assert.True(t, v.Passed)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, jobstate.ErrAlreadyCommitted):
				default:
					t.Errorf("%s: %v", name, err)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int64(1), wins.Load(), "exactly one winner")
		job := w.get(b.ID)
		assert.Equal(t, Resolved, job.State)
		res, err := ResolutionOf(job)
		require.NoError(t, err)
		passed := 0
		for _, s := range w.submissions(b.ID) {
			if s.Status == Passed {
				passed++
				assert.Equal(t, res.Winner, s.Worker)
			} else {
				assert.Equal(t, Failed, s.Status, "the others are discarded")
			}
		}
		assert.Equal(t, 1, passed)
		payouts, _ := w.db.Runs()
		assert.Equal(t, 1, payouts, "paid once")
		assert.Equal(t, int64(8000), w.db.Balance(res.Winner))
		assert.Equal(t, int64(2000), w.db.Balance(FeeWallet))
	})
	t.Run("6_max_submissions_per_task_default_20", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		var accepted atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 30; i++ {
			name := fmt.Sprintf("w%02d", i)
			w.m.Register(name)
			w.join(b.ID, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := w.m.Submit(w.ctx, b.ID, name, fail); err == nil {
					accepted.Add(1)
				} else {
					assert.ErrorIs(t, err, ErrMaxSubmissions)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int64(DefaultMaxSubmissions), accepted.Load())
		w.join(b.ID, "alice")
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "alice", pass)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrMaxSubmissions)
	})
	t.Run("6_max_submissions_counts_failed_ones", func(t *testing.T) {
		w := newWorld(t)
		tm := terms()
		tm.MaxSubmissions = 2
		b := w.fundedWith(tm, time.Time{})
		w.judge(w.submit(b.ID, "alice", fail))
		w.judge(w.submit(b.ID, "bob", fail))
		w.join(b.ID, "carol")
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "carol", pass)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrMaxSubmissions)
	})
	t.Run("7_max_retries_per_worker_default_3", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		w.join(b.ID, "alice")
		var accepted atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := w.m.Submit(w.ctx, b.ID, "alice", fail)
				if err != nil {
					assert.ErrorIs(t, err, ErrMaxRetries)
					return
				}
				accepted.Add(1)
				_, err = w.m.Judge(w.ctx, s)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		assert.Equal(t, int64(1+DefaultMaxRetries), accepted.Load(), "a first submission and 3 retries")
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "alice", pass)
		w.refused(before, err, jobstate.ErrGuardRefused, ErrMaxRetries)
		w.submit(b.ID, "bob", pass) // another worker's count is its own
	})
	t.Run("7_max_retries_counts_retries_not_submissions", func(t *testing.T) {
		w := newWorld(t)
		tm := terms()
		tm.MaxRetries = 1
		b := w.fundedWith(tm, time.Time{})
		w.judge(w.submit(b.ID, "alice", fail)) // the first submission: no retry
		w.judge(w.submit(b.ID, "alice", fail)) // retry 1 of 1
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "alice", pass) // retry 2
		w.refused(before, err, jobstate.ErrGuardRefused, ErrMaxRetries)
	})
	t.Run("8_content_size_limit_50KB", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		w.submit(b.ID, "alice", strings.Repeat("a", MaxContentBytes))
		w.join(b.ID, "bob")
		before := w.snap(b.ID)
		_, err := w.m.Submit(w.ctx, b.ID, "bob", strings.Repeat("a", MaxContentBytes+1))
		w.refused(before, err, jobstate.ErrGuardRefused, ErrTooLarge)
	})
	t.Run("9_cancel_blocks_on_judging", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		alice, bob := w.submit(b.ID, "alice", fail), w.submit(b.ID, "bob", fail)
		for _, s := range []Submission{alice, bob} {
			before := w.snap(b.ID)
			_, err := w.m.Cancel(w.ctx, b.ID, buyerName)
			w.refused(before, err, jobstate.ErrGuardRefused, ErrJudging)
			w.judge(s)
		}
		job, err := w.m.Cancel(w.ctx, b.ID, buyerName)
		require.NoError(t, err)
		assert.Equal(t, Cancelled, job.State)
	})
	t.Run("10_lazy_expiry_on_read_not_proactive", func(t *testing.T) {
		w := newWorld(t)
		b := w.fundedWith(terms(), epoch.Add(time.Hour))
		other := w.funded()
		w.clock.Advance(2 * time.Hour)
		w.get(other.ID)
		assert.Equal(t, Funded, w.snap(b.ID).Job.State, "no scheduler: nothing expires it until it is read")
		assert.Equal(t, Expired, w.get(b.ID).State)
	})
	t.Run("10_verdict_after_the_deadline_finds_the_bounty_expired", func(t *testing.T) {
		// Expiry is lazy, and the engine applies it before every
		// operation: a pass that arrives after the deadline, even before
		// any read, finds the bounty expired, and pays nothing.
		w := newWorld(t)
		b := w.fundedWith(terms(), epoch.Add(time.Minute))
		s := w.submit(b.ID, "alice", pass)
		w.clock.Advance(time.Minute + time.Second)
		_, err := w.m.Judge(w.ctx, s)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		assert.Equal(t, Expired, w.get(b.ID).State)
		assert.Equal(t, int64(0), w.m.db.Balance("alice"), "no payout")
	})
	t.Run("11_refund_is_not_a_state", func(t *testing.T) {
		w := newWorld(t)
		b := w.expired()
		before := w.snap(b.ID)
		job, err := w.m.Refund(w.ctx, b.ID, buyerName)
		require.NoError(t, err)
		after := w.snap(b.ID)
		assert.Equal(t, Expired, job.State)
		assert.Equal(t, before.History, after.History, "no transition is recorded")
		assert.Len(t, after.Effects, 1, "the refund is recorded as an effect")
		for _, s := range w.m.Definition().States() {
			assert.NotContains(t, strings.ToLower(string(s.Name)), "refund")
		}
	})
	t.Run("12_crash_recovery_stuck_judging_failed_at_startup", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		alice, _ := w.submit(b.ID, "alice", pass), w.submit(b.ID, "bob", pass)
		w.clock.Advance(JudgingLease)
		rep := w.restart()
		assert.Equal(t, 2, rep.Aborted)
		s := w.snap(b.ID)
		assert.Equal(t, Funded, s.Job.State, "the bounty stays funded")
		assert.Zero(t, s.Job.Leases)
		assert.Equal(t, []string{"alice failed", "bob failed"}, w.statuses(b.ID))
		_, err := w.m.Judge(w.ctx, alice)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "the old server's verdict is fenced out")
		w.judge(w.submit(b.ID, "carol", pass))
		assert.Equal(t, Resolved, w.get(b.ID).State)
	})
	t.Run("12_restart_within_the_lease_fails_judging_at_startup", func(t *testing.T) {
		// Start-up does not wait for the judging leases to lapse: a
		// server back at once finds nothing judging, on any bounty.
		w := newWorld(t)
		b, other := w.funded(), w.funded()
		alice, bob := w.submit(b.ID, "alice", pass), w.submit(other.ID, "bob", pass)
		w.clock.Advance(JudgingLease / 2)
		carol := w.submit(b.ID, "carol", pass) // at the very instant of the crash
		for _, s := range []Submission{alice, bob, carol} {
			require.True(t, w.clock.Now().Before(s.Lease.ExpiresAt), "the lease is still live")
		}
		rep := w.restart()
		assert.Equal(t, 3, rep.Aborted)
		assert.Equal(t, 2, rep.Jobs, "two bounties held judging submissions")
		assert.Equal(t, []string{"alice failed", "carol failed"}, w.statuses(b.ID))
		assert.Equal(t, []string{"bob failed"}, w.statuses(other.ID))
		for _, id := range []uuid.UUID{b.ID, other.ID} {
			s := w.snap(id)
			assert.Equal(t, Funded, s.Job.State, "the bounty stays funded")
			assert.Zero(t, s.Job.Leases)
		}
		for _, s := range []Submission{alice, bob, carol} {
			before := w.snap(s.Lease.JobID)
			_, err := w.m.Judge(w.ctx, s)
			w.refused(before, err, jobstate.ErrLeaseLost)
		}
		assert.Zero(t, w.restart().Aborted, "nothing left judging")
		assert.True(t, w.judge(w.submit(b.ID, "alice", pass)).Passed, "alice submits again and wins")
		assert.Equal(t, Resolved, w.get(b.ID).State)
		a, _ := w.db.Agent("alice")
		assert.Equal(t, Agent{Name: "alice", Claims: 1, Passed: 1}, a, "one claim of the bounty, two submissions")
	})
	t.Run("13_reputation_completion_rate", func(t *testing.T) {
		w := newWorld(t)
		won, failed, discarded, unused := w.funded(), w.funded(), w.funded(), w.funded()
		w.judge(w.submit(won.ID, "alice", fail)) // a failed submission, then a retry that wins
		w.judge(w.submit(won.ID, "alice", pass))
		w.judge(w.submit(failed.ID, "alice", fail))
		late := w.submit(discarded.ID, "alice", pass)
		w.join(unused.ID, "alice") // claimed, never submitted
		a, _ := w.db.Agent("alice")
		assert.Equal(t, Agent{Name: "alice", Claims: 4, Passed: 1}, a, "total_claims counts the bounties claimed, not the submissions")
		w.judge(w.submit(discarded.ID, "bob", pass))
		_, err := w.m.Judge(w.ctx, late)
		assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
		a, _ = w.db.Agent("alice")
		assert.InDelta(t, 1.0/4, a.CompletionRate(), 1e-9, "passed_submissions / total_claims")
		b, _ := w.db.Agent("bob")
		assert.InDelta(t, 1.0, b.CompletionRate(), 1e-9)
		before := w.db.State()
		_, err = w.m.Join(w.ctx, won.ID, "carol")
		assert.Error(t, err)
		assert.Equal(t, before, w.db.State(), "a refused claim is no claim")
	})
	t.Run("14_min_reputation_gate", func(t *testing.T) {
		w := newWorld(t)
		w.judge(w.submit(w.funded().ID, "alice", pass)) // alice: 1/1
		tm := terms()
		tm.MinReputation = 0.5
		gated := w.fundedWith(tm, time.Time{})
		before := w.snap(gated.ID)
		_, err := w.m.Join(w.ctx, gated.ID, "dave") // dave: 0/0
		w.refused(before, err, jobstate.ErrGuardRefused, ErrReputation)
		w.join(gated.ID, "alice")
	})
}
