package main

import (
	"context"
	"flag"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
	"github.com/jobstate/jobstate/internal/doccheck"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/jobstatetest"
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

// TestTableIsTheLifecycleJobMachine checks the table, rule for rule, against
// the lifecycle's job-level transitions (PENDING ↔ RUNNING → SUCCEEDED/FAILED).
func TestTableIsTheLifecycleJobMachine(t *testing.T) {
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

// TestMachineIsTheLiteralDefinition fails when the machine this program
// registers differs from the exactly-once lifecycle's literal definition
// (internal/machines/exactlyonce).
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	assert.Equal(t, exactlyonce.Name, def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

// TestRunPrintsTheScenarios runs the program and checks its key lines.
func TestRunPrintsTheScenarios(t *testing.T) {
	checkScenarios(t, exstore.Output(t, exstore.Config{Store: exstore.Memory}, run))
}

// TestMainOnPostgreSQL runs the scenarios on PostgreSQL (a throwaway
// cluster, or JOBSTATE_DATABASE_URL's server) and checks that they print
// what they print on the in-memory store.
func TestMainOnPostgreSQL(t *testing.T) {
	mem, pg := exstore.OnBoth(t, run)
	checkScenarios(t, pg)
	assert.Equal(t, mem, pg)
}

// TestMainOnSQLite runs the demonstration on SQLite (a file in a
// temporary directory) and checks that it prints what it prints on the
// in-memory store.
func TestMainOnSQLite(t *testing.T) {
	mem, lite := exstore.OnSQLite(t, run)
	checkScenarios(t, lite)
	assert.Equal(t, mem, lite)
}

// checkScenarios checks the key lines of the scenarios' output.
func checkScenarios(t *testing.T, s string) {
	t.Helper()
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

// TestRuntimeCommitsOnce runs payouts through the worker runtime
// (jobstatetest.Env.Drain): each valid one committed once and credited
// once, an invalid one failed with nothing credited.
func TestRuntimeCommitsOnce(t *testing.T) {
	f := newFixture(t)
	env := &jobstatetest.Env{T: t, Ctx: f.ctx, Clock: f.Clock, Engine: f.Engine}
	var ok []uuid.UUID
	for i := 1; i <= 3; i++ {
		j, err := f.Submit(f.ctx, Payout{Account: "acct-1", Amount: int64(100 * i)})
		require.NoError(t, err)
		ok = append(ok, j.ID)
	}
	bad, err := f.Submit(f.ctx, Payout{Account: "acct-1", Amount: -5})
	require.NoError(t, err)
	rt, err := f.Worker("A").Runtime()
	require.NoError(t, err)
	assert.Equal(t, 4, env.Drain(rt))
	for _, id := range ok {
		env.AssertState(id, Succeeded)
		env.AssertCommittedOnce(id)
		assert.Equal(t, 1, f.Ledger.Applied(id))
	}
	env.AssertState(bad.ID, Failed)
	assert.Zero(t, f.Ledger.Applied(bad.ID))
	assert.Equal(t, int64(600), f.Ledger.Balance("acct-1"))
	assert.Zero(t, env.Drain(rt), "nothing left to run")
}
