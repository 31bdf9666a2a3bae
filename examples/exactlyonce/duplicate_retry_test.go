package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// applier is how one worker of the FM_001 schedule applies its effect
// once it has prepared: through the commit boundary, or around it.
type applier struct {
	lease func(ctx context.Context) (jobstate.Claimed, error)
	start func(ctx context.Context, l jobstate.Lease) error
	apply func(ctx context.Context, l jobstate.Lease, r Receipt) error
}

// naive is a NaiveWorker: it writes the credit itself, then reports.
func naive(w *World, name string) applier {
	wk := w.NaiveWorker(name)
	return applier{lease: wk.Lease, start: wk.Start, apply: wk.Apply}
}

// bounded is a Worker: the credit is the commit's effect, applied by the
// engine only at the commit boundary; then it finishes.
func bounded(w *World, name string) applier {
	wk := w.Worker(name)
	return applier{lease: wk.Lease, start: wk.Start, apply: func(ctx context.Context, l jobstate.Lease, r Receipt) error {
		if err := wk.Commit(ctx, l, r); err != nil {
			return err
		}
		_, err := wk.Finish(ctx, l)
		return err
	}}
}

// fm001Schedule runs the schedule of FM_001 with workers A and B made by mk, and
// returns the job and what each worker's apply returned. Worker A leases
// A1 and starts work; its lease expires (timeout) and the sweep aborts A1;
// worker B leases B1 and runs the same job. A wakes after B has applied
// its effect (aWakesFirst false) or before (true).
func fm001Schedule(t *testing.T, mk func(*World, string) applier, aWakesFirst bool) (*fixture, jobstate.Job, error, error) {
	t.Helper()
	f := newFixture(t)
	job := f.submit()
	a, b := mk(f.World, "A"), mk(f.World, "B")

	ca, err := a.lease(f.ctx)
	require.NoError(t, err)
	require.NoError(t, a.start(f.ctx, ca.Lease))
	ra, err := Prepare(ca.Job)
	require.NoError(t, err)

	f.Clock.Advance(LeaseTTL + time.Second) // A stalls past its lease
	r, err := f.Engine.Sweep(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, r.Aborted, "A1 is aborted")
	require.Equal(t, Pending, f.snap(job.ID).Job.State)

	cb, err := b.lease(f.ctx)
	require.NoError(t, err)
	require.Equal(t, job.ID, cb.Job.ID, "B runs the same job")
	require.NoError(t, b.start(f.ctx, cb.Lease))
	rb, err := Prepare(cb.Job)
	require.NoError(t, err)

	var errA, errB error
	if aWakesFirst {
		errA = a.apply(f.ctx, ca.Lease, ra)
		errB = b.apply(f.ctx, cb.Lease, rb)
	} else {
		errB = b.apply(f.ctx, cb.Lease, rb)
		errA = a.apply(f.ctx, ca.Lease, ra)
	}
	return f, job, errA, errB
}

// TestDuplicateRetryAppliesOnceThroughTheCommit reproduces the double
// effect of a duplicate retry (FM_001) with a naive at-least-once worker
// that applies its effect outside the commit boundary; then runs the same
// schedule through the engine's commit boundary, which applies the effect
// once.
func TestDuplicateRetryAppliesOnceThroughTheCommit(t *testing.T) {
	for _, order := range []struct {
		name        string
		aWakesFirst bool
	}{{"A wakes after B applied", false}, {"A wakes before B applies", true}} {
		t.Run("FM_001 reproduced: a naive worker bypassing the commit boundary applies the effect twice: "+order.name, func(t *testing.T) {
			f, job, errA, errB := fm001Schedule(t, naive, order.aWakesFirst)
			assert.Equal(t, 2, f.Ledger.Applied(job.ID), "both executions applied the effect: the double effect of FM_001")
			assert.Equal(t, int64(200), f.Ledger.Balance("acct-1"), "the account is credited twice")
			assert.NoError(t, errB, "B's report is accepted")
			require.Error(t, errA, "A's report is refused, but its credit is already written")
			if order.aWakesFirst {
				assert.ErrorIs(t, errA, jobstate.ErrLeaseLost)
			} else {
				assert.ErrorIs(t, errA, jobstate.ErrAlreadyCommitted)
			}
			s := f.snap(job.ID)
			assert.Equal(t, Succeeded, s.Job.State)
		})
		t.Run("FM_001 prevented: the same schedule through the commit boundary applies the effect once: "+order.name, func(t *testing.T) {
			f, job, errA, errB := fm001Schedule(t, bounded, order.aWakesFirst)
			assert.Equal(t, 1, f.Ledger.Applied(job.ID), "one credit")
			assert.Equal(t, int64(100), f.Ledger.Balance("acct-1"))
			assert.NoError(t, errB, "B commits and finishes")
			require.Error(t, errA, "A's commit is refused and applies nothing")
			if order.aWakesFirst {
				assert.ErrorIs(t, errA, jobstate.ErrLeaseLost, "A's execution was aborted, nothing has committed yet")
			} else {
				assert.ErrorIs(t, errA, jobstate.ErrAlreadyCommitted, "A detects B's committed record and no-ops")
			}
			s := f.snap(job.ID)
			assert.Equal(t, Succeeded, s.Job.State)
			entries := f.Ledger.Entries()
			require.Len(t, entries, 1)
			assert.Equal(t, "B", entries[0].Worker)
			assert.Equal(t, s.Job.Committed, entries[0].ExecID, "the credit is the committed execution's")
		})
	}
}
