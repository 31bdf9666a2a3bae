package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/doccheck"
)

// fixture is one World under test, on its manual clock.
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
	return &fixture{t: t, ctx: context.Background(), World: w}
}

// submit creates a valid payout job and checks it starts PENDING.
func (f *fixture) submit() jobstate.Job {
	f.t.Helper()
	j, err := f.Submit(f.ctx, Payout{Account: "acct-1", Amount: 100})
	require.NoError(f.t, err)
	require.Equal(f.t, Pending, j.State)
	f.snap(j.ID)
	return j
}

// snap loads everything stored about the job and checks the invariants
// that must hold after every step: the job's state is the projection of
// its executions, and its history replays to its state.
func (f *fixture) snap(id uuid.UUID) Snapshot {
	f.t.Helper()
	s, err := f.Snapshot(f.ctx, id)
	require.NoError(f.t, err, "the job state must be the projection of its executions")
	st, err := f.Def.Replay(s.History)
	require.NoError(f.t, err)
	require.Equal(f.t, s.Job.State, st, "the history replays to the job's state")
	return s
}

// lease claims the next job for worker name and checks the job is RUNNING.
func (f *fixture) lease(name string) jobstate.Claimed {
	f.t.Helper()
	c, err := f.Worker(name).Lease(f.ctx)
	require.NoError(f.t, err)
	require.Equal(f.t, Running, c.Job.State)
	f.snap(c.Job.ID)
	return c
}

// start moves an execution to IN_PROGRESS.
func (f *fixture) start(c jobstate.Claimed) {
	f.t.Helper()
	require.NoError(f.t, f.Worker(c.Lease.Owner).Start(f.ctx, c.Lease))
	f.snap(c.Job.ID)
}

// commit commits an execution with the receipt of the prepare phase.
func (f *fixture) commit(c jobstate.Claimed) {
	f.t.Helper()
	r, err := Prepare(c.Job)
	require.NoError(f.t, err)
	require.NoError(f.t, f.Worker(c.Lease.Owner).Commit(f.ctx, c.Lease, r))
	f.snap(c.Job.ID)
}

// finish finishes a committed execution and checks the job SUCCEEDED.
func (f *fixture) finish(c jobstate.Claimed) {
	f.t.Helper()
	j, err := f.Worker(c.Lease.Owner).Finish(f.ctx, c.Lease)
	require.NoError(f.t, err)
	require.Equal(f.t, Succeeded, j.State)
	f.snap(c.Job.ID)
}

// sweep runs the engine's sweep at the clock's current reading.
func (f *fixture) sweep() jobstate.SweepReport {
	f.t.Helper()
	r, err := f.Engine.Sweep(f.ctx)
	require.NoError(f.t, err)
	return r
}

// unchanged checks that err is a refusal matching want and that the job,
// its executions and its history are exactly as in before.
func (f *fixture) unchanged(before Snapshot, err, want error) {
	f.t.Helper()
	require.Error(f.t, err)
	require.ErrorIs(f.t, err, want)
	assert.Equal(f.t, before, f.snap(before.Job.ID), "a refused operation changes nothing")
}

// statuses lists the executions' statuses in claim order.
func statuses(s Snapshot) []jobstate.ExecStatus {
	out := make([]jobstate.ExecStatus, len(s.Executions))
	for i, x := range s.Executions {
		out[i] = x.Status
	}
	return out
}

// path lists the states a history went through.
func path(h []jobstate.Transition) []jobstate.State {
	out := make([]jobstate.State, len(h))
	for i, t := range h {
		out[i] = t.To
	}
	return out
}

// TestSeed002 replays, item by item and named after the seed's wording,
// every transition, rule, failure branch and example of seed 002.
func TestSeed002(t *testing.T) {
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

	t.Run("At most one execution may reach COMMITTED", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		var leases []jobstate.Claimed
		for _, name := range []string{"A", "B", "C"} {
			c := f.lease(name)
			f.start(c)
			leases = append(leases, c)
			if name != "C" {
				f.Clock.Advance(LeaseTTL)
				f.sweep()
			}
		}
		// All three commit at once: two hold dead leases, one a live one.
		var wg sync.WaitGroup
		errs := make([]error, len(leases))
		for i, c := range leases {
			wg.Add(1)
			go func(i int, c jobstate.Claimed) {
				defer wg.Done()
				r, err := Prepare(c.Job)
				if err == nil {
					err = f.Worker(c.Lease.Owner).Commit(f.ctx, c.Lease, r)
				}
				errs[i] = err
			}(i, c)
		}
		wg.Wait()
		for _, err := range errs[:2] {
			// Refused either way: the lease is dead, and C may have won already.
			assert.True(t, errors.Is(err, jobstate.ErrLeaseLost) || errors.Is(err, jobstate.ErrAlreadyCommitted), "stale commit got %v", err)
		}
		assert.NoError(t, errs[2], "only the live lease commits")
		s := f.snap(j.ID)
		committed := 0
		for _, x := range s.Executions {
			if x.Status == jobstate.ExecCommitted || x.Status == jobstate.ExecDone {
				committed++
			}
		}
		assert.Equal(t, 1, committed)
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Any later execution attempt must detect the committed record and no-op", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		a := f.lease("A")
		f.Clock.Advance(LeaseTTL)
		f.sweep()
		b := f.lease("B")
		f.start(b)
		f.commit(b)
		before := f.snap(j.ID)
		r, err := Prepare(a.Job)
		require.NoError(t, err)
		err = f.Worker("A").Commit(f.ctx, a.Lease, r)
		var ce *jobstate.CommitError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, b.Lease.ExecID, ce.Winner, "the refusal names the winner")
		assert.Equal(t, a.Lease.ExecID, ce.ExecID)
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Duplicate executions must short-circuit if a COMMITTED record already exists", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		f.start(c)
		f.commit(c)
		before := f.snap(j.ID)
		r, err := Prepare(c.Job)
		require.NoError(t, err)
		// The same commit delivered again (say, retried after a lost reply).
		err = f.Worker("A").Commit(f.ctx, c.Lease, r)
		var ce *jobstate.CommitError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, c.Lease.ExecID, ce.Winner)
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		_, err = f.Engine.Succeed(f.ctx, c.Lease, jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error {
			t.Error("a duplicate ran its effect")
			return nil
		}})
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		_, err = f.Worker("A").Fail(f.ctx, c.Lease, errors.New("late failure"))
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Duplicate lease while a COMMITTED exists must short-circuit (no effect)", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		f.start(c)
		f.commit(c)
		before := f.snap(j.ID)
		_, err := f.Worker("B").LeaseJob(f.ctx, j.ID) // the job's message delivered again
		f.unchanged(before, err, jobstate.ErrNotClaimable)
		_, err = f.Worker("B").Run(f.ctx)
		f.unchanged(before, err, jobstate.ErrNoJob)
		f.Clock.Advance(LeaseTTL) // the committed execution's lease lapses
		_, err = f.Worker("B").LeaseJob(f.ctx, j.ID)
		f.unchanged(before, err, jobstate.ErrNotClaimable)
		assert.Equal(t, 1, f.sweep().Finalized)
		_, err = f.Worker("B").LeaseJob(f.ctx, j.ID)
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		assert.Equal(t, Succeeded, f.snap(j.ID).Job.State)
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("Prepare phase (safe to repeat): compute results, validate preconditions, stage output", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		r1, err := Prepare(c.Job)
		require.NoError(t, err)
		r2, err := Prepare(c.Job)
		require.NoError(t, err)
		assert.Equal(t, r1, r2)
		assert.Zero(t, f.Ledger.Applied(j.ID), "preparing touches nothing outside")
		_, err = Prepare(jobstate.Job{Payload: []byte(`{"account":"","amount":1}`)})
		assert.ErrorIs(t, err, ErrInvalidPayout)
		class, _ := jobstate.ClassOf(err, nil)
		assert.Equal(t, jobstate.ClassPermanent, class)
	})

	t.Run("Commit phase: atomically mark COMMITTED and apply logical effect exactly once", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		f.start(c)
		before := f.snap(j.ID)
		down := errors.New("ledger unavailable")
		_, err := f.Engine.Commit(f.ctx, c.Lease, jobstate.CommitInput{Result: []byte("x"), Effect: func(context.Context, jobstate.Job) error { return down }})
		f.unchanged(before, err, down)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecInProgress}, statuses(f.snap(j.ID)), "no COMMITTED without its effect")
		f.commit(c) // the execution may try again
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
		assert.Equal(t, c.Lease.ExecID, f.Ledger.Entries()[0].ExecID)
	})

	t.Run("If crash happens before COMMITTED: system may retry safely", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		wctx, kill := context.WithCancel(f.ctx)
		started := make(chan jobstate.Lease, 1)
		last := make(chan error, 1)
		go func() { // the worker: leases, starts, is killed while preparing
			a := f.Worker("A")
			c, err := a.Lease(wctx)
			if err != nil {
				close(started)
				last <- err
				return
			}
			if err := a.Start(wctx, c.Lease); err != nil {
				close(started)
				last <- err
				return
			}
			started <- c.Lease
			<-wctx.Done()
			r, _ := Prepare(c.Job)
			last <- a.Commit(wctx, c.Lease, r) // a dying write
		}()
		lease, ok := <-started
		require.True(t, ok, "the worker leased the job")
		kill() // the goroutine is abandoned: recovery does not wait for it
		f.Clock.Advance(LeaseTTL)
		r := f.sweep()
		assert.Equal(t, 1, r.Aborted)
		s := f.snap(j.ID)
		assert.Equal(t, Pending, s.Job.State)
		assert.Equal(t, jobstate.ExecAborted, s.Executions[0].Status)
		assert.Equal(t, lease.ExecID, s.Executions[0].ID)
		got, err := f.Worker("B").Run(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, Succeeded, got.State)
		assert.Equal(t, 2, got.Attempt)
		assert.ErrorIs(t, <-last, context.Canceled, "the killed worker's last write is refused")
		s = f.snap(j.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted, jobstate.ExecDone}, statuses(s))
		assert.Equal(t, 1, f.Ledger.Applied(j.ID))
	})

	t.Run("If crash happens after COMMITTED but before DONE: recovery must finalize to DONE without duplicating effects", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		c := f.lease("A")
		f.start(c)
		f.commit(c) // then the worker dies
		f.Clock.Advance(LeaseTTL - time.Nanosecond)
		assert.Zero(t, f.sweep().Finalized, "nothing to do while the lease lives")
		f.Clock.Advance(time.Nanosecond)
		r := f.sweep()
		assert.Equal(t, 1, r.Finalized)
		assert.Zero(t, r.Aborted)
		s := f.snap(j.ID)
		assert.Equal(t, Succeeded, s.Job.State)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecDone}, statuses(s))
		assert.Equal(t, c.Lease.ExecID, s.Job.Committed)
		last := s.History[len(s.History)-1]
		assert.Equal(t, jobstate.EventSucceed, last.Event)
		assert.Equal(t, jobstate.SweepActor, last.Actor)
		assert.Equal(t, 1, f.Ledger.Applied(j.ID), "recovery does not re-apply the effect")
		_, err := f.Worker("A").Finish(f.ctx, c.Lease)
		f.unchanged(s, err, jobstate.ErrLeaseLost)
		assert.Zero(t, f.sweep().Jobs, "nothing left for the sweep")
	})

	t.Run("FM_001: Worker A leases A1 and starts work, lease expires, Worker B leases B1 and runs the same job", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		a := f.lease("A")
		f.start(a)
		ra, err := Prepare(a.Job)
		require.NoError(t, err)
		f.Clock.Advance(LeaseTTL + time.Second) // A stalls past its lease
		r := f.sweep()
		assert.Equal(t, 1, r.Aborted)
		assert.Equal(t, Pending, f.snap(j.ID).Job.State, "lease expired, nothing COMMITTED: back to PENDING")
		b := f.lease("B")
		assert.Equal(t, 2, b.Lease.Token, "a new execution with a new fencing token")
		f.start(b)
		f.commit(b)

		// A wakes: its late commit and finish are refused and change nothing.
		before := f.snap(j.ID)
		err = f.Worker("A").Commit(f.ctx, a.Lease, ra)
		var ce *jobstate.CommitError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, b.Lease.ExecID, ce.Winner, "the refusal names the winner")
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		_, err = f.Worker("A").Finish(f.ctx, a.Lease)
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, b.Lease.ExecID, ce.Winner)
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		_, err = f.Engine.Heartbeat(f.ctx, a.Lease)
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)
		_, err = f.Worker("A").Fail(f.ctx, a.Lease, errors.New("giving up"))
		f.unchanged(before, err, jobstate.ErrAlreadyCommitted)

		f.finish(b)
		s := f.snap(j.ID)
		assert.Equal(t, []jobstate.ExecStatus{jobstate.ExecAborted, jobstate.ExecDone}, statuses(s))
		assert.Equal(t, []jobstate.State{Pending, Running, Pending, Running, Succeeded}, path(s.History))
		assert.Equal(t, 1, f.Ledger.Applied(j.ID), "the effect is applied exactly once")
		assert.Equal(t, int64(100), f.Ledger.Balance("acct-1"))
		err = f.Worker("A").Commit(f.ctx, a.Lease, ra)
		f.unchanged(s, err, jobstate.ErrAlreadyCommitted)
	})

	t.Run("FM_001 variants: A wakes before B commits, or before any sweep", func(t *testing.T) {
		f := newFixture(t)
		j := f.submit()
		a := f.lease("A")
		f.start(a)
		f.Clock.Advance(LeaseTTL)
		before := f.snap(j.ID)
		r, err := Prepare(a.Job)
		require.NoError(t, err)
		err = f.Worker("A").Commit(f.ctx, a.Lease, r) // no sweep has run yet
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		f.sweep()
		b := f.lease("B")
		before = f.snap(j.ID)
		err = f.Worker("A").Commit(f.ctx, a.Lease, r) // B holds the lease, no commit yet
		f.unchanged(before, err, jobstate.ErrLeaseLost)
		f.start(b)
		f.commit(b)
		f.finish(b)
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

// TestTableIsTheSeedsJobMachine checks the table, rule for rule, against
// the seed's job-level transitions (PENDING ↔ RUNNING → SUCCEEDED/FAILED).
func TestTableIsTheSeedsJobMachine(t *testing.T) {
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
	assert.ElementsMatch(t, []arrow{
		{Pending, jobstate.EventClaim, Running},
		{Running, jobstate.EventSucceed, Succeeded},
		{Running, jobstate.EventAbandon, Pending},
		{Running, jobstate.EventRetry, Pending},
		{Running, jobstate.EventFail, Failed},
	}, got)
	assert.True(t, def.Policy().DerivedState)
	assert.True(t, def.Policy().RequireStart, "executions commit only from IN_PROGRESS")
	assert.Equal(t, 1, def.Policy().MaxExecutions)
}

// TestRunPrintsTheScenarios runs the program and checks its key lines.
func TestRunPrintsTheScenarios(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		"A commits: the credit is written at the boundary",
		"A wakes and commits: refused",
		"CommitError (already_committed): execution #3 already committed",
		"two workers reached their commit phase; the ledger holds 1 credit for the job",
		"A's last attempt, with its dead context, was refused: worker killed: context canceled",
		"sweep: COMMITTED under an expired lease (finalized 1)",
		"LeaseError (lease_lost): execution already finished",
		"RUNNING --succeed--> SUCCEEDED by jobstate (execution #2): lease expired after commit: finalized",
		"stateDiagram-v2",
	} {
		assert.Contains(t, s, want)
	}
}

// update makes TestDiagramIsCurrent rewrite the documented diagram.
var update = flag.Bool("update", false, "rewrite the mermaid block of "+docPath+" from the definition")

// docPath is the example's documentation page, relative to this package.
const docPath = "../../docs/examples/exactlyonce.md"

// TestDiagramIsCurrent checks that the ```mermaid block of the example's
// page is the definition's diagram; -update rewrites it.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	doccheck.Diagram(t, docPath, def, *update)
}
