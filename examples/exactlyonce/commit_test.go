package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestCommitBoundary replays the idempotency rule (INV_001), the crash consistency
// rule (INV_002) and FM_001, named after the lifecycle's wording.
func TestCommitBoundary(t *testing.T) {
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
}
