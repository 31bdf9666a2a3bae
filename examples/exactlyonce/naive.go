package main

import (
	"context"
	"encoding/json"

	"github.com/jobstate/jobstate"
)

// NaiveWorker is the worker FM_001 warns about: it takes leases from the
// engine and runs the job under at-least-once delivery like Worker, but it
// applies the effect itself, straight to the ledger, before it reports, and
// so bypasses the commit boundary. It exists to reproduce the failure mode
// (TestDuplicateRetryAppliesOnceThroughTheCommit): when its lease expires mid-job and another execution runs
// the same job, both apply the effect. Do not write workers like it.
type NaiveWorker struct {
	Name  string
	world *World
}

// NaiveWorker returns a naive worker of this world with the given name.
func (w *World) NaiveWorker(name string) *NaiveWorker { return &NaiveWorker{Name: name, world: w} }

// Lease claims the next due PENDING job, as Worker.Lease does.
func (wk *NaiveWorker) Lease(ctx context.Context) (jobstate.Claimed, error) {
	return wk.world.Engine.Claim(ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: wk.Name})
}

// Start moves the execution from LEASED to IN_PROGRESS, as Worker.Start
// does.
func (wk *NaiveWorker) Start(ctx context.Context, lease jobstate.Lease) error {
	_, err := wk.world.Engine.Start(ctx, lease)
	return err
}

// Apply writes the credit to the ledger at once, whatever became of the
// lease, and only then reports success to the engine (Engine.Succeed with
// no effect). The report of a worker whose lease was lost is refused, but
// the credit is already written: the refusal comes too late.
func (wk *NaiveWorker) Apply(ctx context.Context, lease jobstate.Lease, r Receipt) error {
	wk.world.Ledger.Credit(Entry{JobID: lease.JobID, ExecID: lease.ExecID, Worker: wk.Name, Receipt: r, At: wk.world.Clock.Now()})
	result, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = wk.world.Engine.Succeed(ctx, lease, jobstate.CommitInput{Result: result})
	return err
}
