package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestTransitions replays, named after the lifecycle's wording, every allowed
// transition of executions and of jobs, and the refusal of the others.
func TestTransitions(t *testing.T) {
	t.Run("Submit a Job: Job PENDING, created, not yet leased", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		s := f.snap(j.ID)
		assert.Empty(t, s.Executions)
		assert.Zero(t, j.Attempt)
		assert.Equal(t, []jobstate.State{Pending}, path(s.History))
	})

	t.Run("Job: PENDING -> RUNNING when an execution is LEASED", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		s := f.snap(j.ID)
		assert.Equal(t, Running, s.Job.State)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecLeased}, statuses(s))
		x := s.Executions[0]
		assert.Equal(t, c.Lease.ExecID, x.ID)
		assert.Equal(t, "A", x.Owner)
		assert.Equal(t, 1, x.Attempt)
		assert.True(t, x.LeaseExpiresAt.Equal(Start.Add(LeaseTTL)), "lease_expires_at")
		last := s.History[len(s.History)-1]
		assert.Equal(t, jobstate.EventClaim, last.Event)
		assert.Equal(t, c.Lease.ExecID, last.ExecID, "the move names the execution that made it")
	})

	t.Run("Execution: LEASED -> IN_PROGRESS (start)", func(t *testing.T) {
		f := newFixture(t)
		f.submit()
		c := f.lease("A")
		f.Clock.Advance(time.Second)
		f.start(c)
		s := f.snap(c.Job.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecInProgress}, statuses(s))
		assert.True(t, s.Executions[0].StartedAt.Equal(Start.Add(time.Second)), "started_at")
		assert.Equal(t, Running, s.Job.State, "the job does not move: it is already RUNNING")
	})

	t.Run("Execution: IN_PROGRESS -> COMMITTED (commit boundary, apply effect once)", func(t *testing.T) {
		f := newFixture(t)
		f.submit()
		c := f.lease("A")
		f.start(c)
		assert.Zero(t, f.Ledger.Applied(c.Job.ID), "no effect before the boundary")
		f.commit(c)
		s := f.snap(c.Job.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecCommitted}, statuses(s))
		assert.Equal(t, c.Lease.ExecID, s.Job.Committed, "the committed marker names the execution")
		assert.Equal(t, Running, s.Job.State, "COMMITTED is not DONE: the job is still RUNNING")
		assert.Equal(t, 1, f.Ledger.Applied(c.Job.ID))
		assert.Contains(t, string(s.Job.Result), `"reference":"payout-#1"`, "the staged output is stored at the commit")
		assert.True(t, f.Ledger.Entries()[0].At.Equal(s.Job.UpdatedAt), "the credit is dated by the commit's write")
	})

	t.Run("Execution: only IN_PROGRESS -> COMMITTED: a never-started (LEASED) execution cannot commit", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		r, err := Prepare(c.Job)
		require.NoError(t, err)
		before := f.snap(j.ID)
		require.Equal(t, []jobstate.ExecStatus{jobstate.ExecLeased}, statuses(before))
		err = f.Worker("A").Commit(f.ctx, c.Lease, r)
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // LEASED -> COMMITTED
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error {
			t.Error("a never-started execution ran its effect")
			return nil
		}})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // LEASED -> COMMITTED -> DONE in one write
		assert.Zero(t, f.Ledger.Applied(j.ID), "nothing applied")
		f.start(c) // the refusal cost the execution nothing: started, it commits
		f.commit(c)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecCommitted}, statuses(f.snap(j.ID)))
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Execution: COMMITTED -> DONE, Job: RUNNING -> SUCCEEDED when any execution reaches DONE (after COMMITTED)", func(t *testing.T) {
		f := newFixture(t)
		f.submit()
		c := f.lease("A")
		f.start(c)
		f.commit(c)
		f.Clock.Advance(time.Second)
		f.finish(c)
		s := f.snap(c.Job.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecDone}, statuses(s))
		assert.True(t, s.Executions[0].FinishedAt.Equal(Start.Add(time.Second)), "finished_at")
		assert.Equal(t, jobstate.OutcomeSucceeded, s.Job.Outcome)
		assert.Equal(t, 1, f.Ledger.Applied(c.Job.ID), "finishing applies nothing")
	})

	t.Run("Execution: LEASED -> ABORTED (lease expires before start)", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		f.lease("A")
		f.Clock.Advance(LeaseTTL - time.Nanosecond)
		assert.Zero(t, f.sweep().Aborted, "the lease is live until lease_expires_at")
		f.Clock.Advance(time.Nanosecond)
		r := f.sweep()
		assert.Equal(t, 1, r.Aborted)
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted}, statuses(s))
		assert.True(t, s.Executions[0].StartedAt.IsZero(), "it never started")
		assert.Equal(t, "lease expired", s.Executions[0].Error)
		assert.Equal(t, Pending, s.Job.State)
	})

	t.Run("Execution: IN_PROGRESS -> ABORTED (crash or timeout before commit)", func(t *testing.T) {
		t.Run("timeout: the lease expires", func(t *testing.T) {
			f := newFixture(t)
			j := f.submit()
			c := f.lease("A")
			f.start(c)
			f.Clock.Advance(LeaseTTL)
			assert.Equal(t, 1, f.sweep().Aborted)
			s := f.snap(j.ID)
			assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted}, statuses(s))
			assert.False(t, s.Executions[0].StartedAt.IsZero())
			assert.Equal(t, Pending, s.Job.State)
			assert.Zero(t, f.Ledger.Applied(j.ID))
		})
		t.Run("the worker reports a retryable error", func(t *testing.T) {
			f := newFixture(t)
			j := f.submit()
			c := f.lease("A")
			f.start(c)
			got, err := f.Worker("A").Fail(f.ctx, c.Lease, errors.New("upstream timeout"))
			require.NoError(t, err)
			assert.Equal(t, Pending, got.State)
			assert.Equal(t, 1, got.RetryCount)
			s := f.snap(j.ID)
			assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted}, statuses(s))
			assert.Equal(t, "upstream timeout", s.Executions[0].Error)
			assert.Equal(t, jobstate.EventRetry, s.History[len(s.History)-1].Event)
		})
	})

	t.Run("Job: RUNNING -> PENDING when lease expires and no execution is COMMITTED", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		f.start(c)
		f.Clock.Advance(LeaseTTL)
		r := f.sweep()
		assert.Equal(t, 1, r.Retried)
		s := f.snap(j.ID)
		assert.Equal(t, Pending, s.Job.State)
		last := s.History[len(s.History)-1]
		assert.Equal(t, jobstate.EventAbandon, last.Event)
		assert.Equal(t, jobstate.SweepActor, last.Actor)
		assert.Equal(t, c.Lease.ExecID, last.ExecID)
		next := f.lease("B")
		assert.Equal(t, 2, next.Lease.Token, "attempt is monotonically increasing: a new fencing token")
	})

	t.Run("Job: FAILED is a terminal failure", func(t *testing.T) {
		t.Run("a permanent error in the prepare phase", func(t *testing.T) {
			f := newFixture(t)
			j, err := f.Submit(f.ctx, Payout{Account: "acct-1", Amount: -5})
			require.NoError(t, err)
			got, err := f.Worker("A").Run(f.ctx)
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
			assert.Equal(t, 0, got.RetryCount, "a permanent error never retries")
			s := f.snap(j.ID)
			assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted}, statuses(s))
			assert.Zero(t, f.Ledger.Applied(j.ID))
		})
		t.Run("leases lost until retries are spent", func(t *testing.T) {
			f := newFixture(t)
			j := f.submit()
			for i := 0; i <= MaxRetries; i++ {
				c := f.lease("A")
				assert.Equal(t, i+1, c.Lease.Token)
				f.Clock.Advance(LeaseTTL)
				f.sweep()
			}
			s := f.snap(j.ID)
			assert.Equal(t, Failed, s.Job.State)
			assert.Equal(t, MaxRetries+1, s.Job.Attempt, "MaxRetries+1 executions")
			assert.Equal(t, MaxRetries, s.Job.RetryCount)
			assert.Len(t, s.Executions, MaxRetries+1)
			_, err := f.Worker("B").Lease(f.ctx)
			assert.ErrorIs(t, err, jobstate.ErrNoJob, "nothing leaves FAILED")
			_, err = f.Worker("B").LeaseJob(f.ctx, j.ID)
			f.unchanged(s, err, jobstate.ErrNotClaimable)
		})
	})

	t.Run("A worker may only progress an execution it currently leases", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		before := f.snap(j.ID)
		forged := c.Lease
		forged.ExecID = uuid.New()
		err := f.Worker("M").Start(f.ctx, forged)
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		wrongToken := c.Lease
		wrongToken.Token = 7
		err = f.Worker("A").Commit(f.ctx, wrongToken, Receipt{})
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		assert.Zero(t, f.Ledger.Applied(j.ID))

		// An expired lease is dead even before any sweep notices it.
		f.start(c)
		f.Clock.Advance(LeaseTTL)
		before = f.snap(j.ID)
		r, err := Prepare(c.Job)
		require.NoError(t, err)
		err = f.Worker("A").Commit(f.ctx, c.Lease, r)
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		_, err = f.Engine.Heartbeat(f.ctx, c.Lease)
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		assert.Zero(t, f.Ledger.Applied(j.ID))
	})

	t.Run("We never mutate job state directly without an execution event", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		for _, ev := range []jobstate.Event{jobstate.EventCancel, "finish", "mark_failed", jobstate.EventSucceed, jobstate.EventAbandon} {
			before := f.snap(j.ID)
			_, err := f.Engine.Fire(f.ctx, j.ID, ev, jobstate.Call{Actor: "admin"})
			f.unchanged(before, err, jobstate.ErrInvalidArgument)
		}
		c := f.lease("A")
		before := f.snap(j.ID)
		_, err := f.Engine.Fire(f.ctx, j.ID, jobstate.EventCancel, jobstate.Call{Actor: "admin"})
		f.unchanged(before, err, jobstate.ErrInvalidArgument)
		_, err = f.Engine.Advance(f.ctx, c.Lease, "finish", jobstate.Call{})
		f.unchanged(before, err, jobstate.ErrInvalidTransition)

		// The table itself may hold lifecycle rules only.
		spec := Spec()
		spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{Running}, Event: "force_success", To: Succeeded})
		_, err = jobstate.NewDefinition(spec)
		assert.ErrorIs(t, err, jobstate.ErrInvalidDefinition)
		assert.ErrorContains(t, err, "derived state")
	})

	t.Run("Job state is derived from durable execution records: the projection holds after every step", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit() // checks the projection
		ops := []struct {
			name string
			do   func() error
		}{}
		var a, b, c jobstate.Claimed
		var err error
		add := func(name string, do func() error) {
			ops = append(ops, struct {
				name string
				do   func() error
			}{name, do})
		}
		add("A leases", func() error { a, err = f.Worker("A").Lease(f.ctx); return err })
		add("A heartbeats", func() error { _, err := f.Engine.Heartbeat(f.ctx, a.Lease); return err })
		add("A starts", func() error { return f.Worker("A").Start(f.ctx, a.Lease) })
		add("A fails retryably", func() error { _, err := f.Worker("A").Fail(f.ctx, a.Lease, errors.New("flaky")); return err })
		add("B leases", func() error { b, err = f.Worker("B").Lease(f.ctx); return err })
		add("B's lease expires", func() error { f.Clock.Advance(LeaseTTL); return nil })
		add("sweep", func() error { _, err := f.Engine.Sweep(f.ctx); return err })
		add("B commits late (refused)", func() error {
			if f.Worker("B").Commit(f.ctx, b.Lease, Receipt{}) == nil {
				return errors.New("a dead lease committed")
			}
			return nil
		})
		add("C leases", func() error { c, err = f.Worker("C").Lease(f.ctx); return err })
		add("C starts", func() error { return f.Worker("C").Start(f.ctx, c.Lease) })
		add("C commits", func() error { r, _ := Prepare(c.Job); return f.Worker("C").Commit(f.ctx, c.Lease, r) })
		add("C's lease expires", func() error { f.Clock.Advance(LeaseTTL); return nil })
		add("A commits late (refused)", func() error {
			if f.Worker("A").Commit(f.ctx, a.Lease, Receipt{}) == nil {
				return errors.New("a dead lease committed")
			}
			return nil
		})
		add("sweep finalizes C", func() error { _, err := f.Engine.Sweep(f.ctx); return err })
		for _, op := range ops {
			require.NoError(t, op.do(), op.name)
			s := f.snap(j.ID) // fails on a broken projection
			t.Logf("after %-26s job %-9s %v", op.name, s.Job.State, statuses(s))
		}
		s := f.snap(j.ID)
		assert.Equal(t, Succeeded, s.Job.State)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted, jobstate.ExecAborted, jobstate.ExecDone}, statuses(s))
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Happy path: PENDING -> RUNNING -> SUCCEEDED through LEASED, IN_PROGRESS, COMMITTED, DONE", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		got, err := f.Worker("A").Run(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, Succeeded, got.State)
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.State{Pending, Running, Succeeded}, path(s.History))
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecDone}, statuses(s))
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Execution minimum fields: exec_id, job_id, attempt, lease_owner, lease_expires_at, status, started_at, finished_at", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		f.Clock.Advance(time.Second)
		c := f.lease("A")
		f.Clock.Advance(time.Second)
		f.start(c)
		f.commit(c)
		f.Clock.Advance(time.Second)
		f.finish(c)
		s := f.snap(j.ID)
		x := s.Executions[0]
		assert.Equal(t, c.Lease.ExecID, x.ID)
		assert.Equal(t, j.ID, x.JobID)
		assert.Equal(t, 1, x.Attempt)
		assert.Equal(t, "A", x.Owner)
		assert.True(t, x.LeaseExpiresAt.Equal(Start.Add(time.Second+LeaseTTL)))
		assert.Equal(t, jobstate.ExecDone, x.Status)
		assert.True(t, x.StartedAt.Equal(Start.Add(2*time.Second)))
		assert.True(t, x.FinishedAt.Equal(Start.Add(3*time.Second)))
		// Job minimum fields: job_id, payload, state, attempt, created_at, updated_at.
		assert.Equal(t, j.ID, s.Job.ID)
		assert.JSONEq(t, `{"account":"acct-1","amount":100}`, string(s.Job.Payload))
		assert.Equal(t, 1, s.Job.Attempt)
		assert.True(t, s.Job.CreatedAt.Equal(Start))
		assert.True(t, s.Job.UpdatedAt.Equal(Start.Add(3*time.Second)))
	})

	t.Run("Invalid execution transitions are refused", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		before := f.snap(j.ID)
		_, err := f.Worker("A").Finish(f.ctx, c.Lease)
		f.unchanged(before, err, jobstate.ErrInvalidArgument) // LEASED -> DONE
		err = f.Worker("A").Commit(f.ctx, c.Lease, Receipt{})
		f.unchanged(before, err, jobstate.ErrInvalidTransition) // LEASED -> COMMITTED
		f.start(c)
		before = f.snap(j.ID)
		_, err = f.Worker("A").Finish(f.ctx, c.Lease)
		f.unchanged(before, err, jobstate.ErrInvalidArgument) // IN_PROGRESS -> DONE
		f.commit(c)
		before = f.snap(j.ID)
		_, err = f.Worker("A").Fail(f.ctx, c.Lease, errors.New("x"))
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted) // COMMITTED -> ABORTED
		f.finish(c)
		before = f.snap(j.ID)
		for _, op := range []func() error{
			func() error { return f.Worker("A").Start(f.ctx, c.Lease) },                                // DONE -> IN_PROGRESS
			func() error { return f.Worker("A").Commit(f.ctx, c.Lease, Receipt{}) },                    // DONE -> COMMITTED
			func() error { _, err := f.Worker("A").Fail(f.ctx, c.Lease, errors.New("x")); return err }, // DONE -> ABORTED
			func() error { _, err := f.Worker("A").Finish(f.ctx, c.Lease); return err },                // DONE -> DONE
			func() error { _, err := f.Engine.Heartbeat(f.ctx, c.Lease); return err },                  // renew a finished lease
		} {
			f.unchanged(before, op(), jobstate.ErrLeaseLost)
		}

		g := newFixture(t)
		k := g.submit()
		d := g.lease("A")
		g.Clock.Advance(LeaseTTL)
		g.sweep()
		before = g.snap(k.ID)
		for _, op := range []func() error{
			func() error { return g.Worker("A").Start(g.ctx, d.Lease) },
			func() error { return g.Worker("A").Commit(g.ctx, d.Lease, Receipt{}) },
			func() error { _, err := g.Engine.Heartbeat(g.ctx, d.Lease); return err },
		} {
			g.unchanged(before, op(), jobstate.ErrLeaseLost) // ABORTED -> anything
		}
	})
}
