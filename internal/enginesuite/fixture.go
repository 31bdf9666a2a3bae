package enginesuite

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/require"
)

// Fixture is an engine over a fresh store with a manual clock starting at
// Epoch, and a random source fixed at 0.5 (jitter is deterministic). Its
// helpers fail the test on any error.
type Fixture struct {
	T     *testing.T
	Ctx   context.Context
	Clock *jobstate.ManualClock
	Store jobstate.Store
	Eng   *jobstate.Engine
}

// NewFixture makes a store with newStore and an engine over it that runs
// the machines of specs, with opts after the fixture's own options (so
// they may replace them). A machine bearing the name of one of the five
// lifecycles must be that lifecycle's literal definition (CheckSpecs); a
// test that changes its rules gives it a generic name.
func NewFixture(t *testing.T, newStore NewStore, opts []jobstate.Option, specs ...jobstate.Spec) *Fixture {
	t.Helper()
	f := &Fixture{T: t, Ctx: context.Background(), Clock: jobstate.NewManualClock(Epoch()), Store: newStore(t)}
	require.NoError(t, CheckSpecs(specs...))
	defs := make([]*jobstate.Definition, 0, len(specs))
	for _, s := range specs {
		d, err := jobstate.NewDefinition(s)
		require.NoError(t, err)
		defs = append(defs, d)
	}
	all := append([]jobstate.Option{jobstate.WithClock(f.Clock), jobstate.WithMachines(defs...), jobstate.WithRandom(func() float64 { return 0.5 })}, opts...)
	eng, err := jobstate.New(f.Store, all...)
	require.NoError(t, err)
	f.Eng = eng
	return f
}

// CheckSpecs returns an error when a spec bears the name of one of the five
// lifecycles without being that lifecycle's literal definition.
func CheckSpecs(specs ...jobstate.Spec) error {
	for _, s := range specs {
		if err := m.Check(s); err != nil {
			return err
		}
	}
	return nil
}

// Create creates a job of machine from nj and returns it; the job must be
// new, not one an idempotency key found.
func (f *Fixture) Create(machine string, nj jobstate.NewJob) jobstate.Job {
	f.T.Helper()
	nj.Machine = machine
	c, err := f.Eng.Create(f.Ctx, nj)
	require.NoError(f.T, err)
	require.False(f.T, c.Existing)
	return c.Job
}

// Fire fires ev on the job id as actor and returns the job it leaves.
func (f *Fixture) Fire(id uuid.UUID, ev jobstate.Event, actor string) jobstate.Job {
	f.T.Helper()
	j, err := f.Eng.Fire(f.Ctx, id, ev, jobstate.Call{Actor: actor})
	require.NoError(f.T, err)
	return j
}

// Claim claims a job of machine for worker.
func (f *Fixture) Claim(machine, worker string) jobstate.Claimed {
	f.T.Helper()
	c, err := f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: machine, Worker: worker})
	require.NoError(f.T, err)
	return c
}

// Get returns the job id as the store holds it, without the engine's lazy
// expiry.
func (f *Fixture) Get(id uuid.UUID) jobstate.Job {
	f.T.Helper()
	j, err := f.Store.Get(f.Ctx, id)
	require.NoError(f.T, err)
	return j
}

// Sweep runs one sweep at the clock's time and returns its report.
func (f *Fixture) Sweep() jobstate.SweepReport {
	f.T.Helper()
	r, err := f.Eng.Sweep(f.Ctx)
	require.NoError(f.T, err)
	return r
}

// Snapshot loads everything stored about the job id.
func (f *Fixture) Snapshot(id uuid.UUID) State {
	f.T.Helper()
	return Load(f.T, f.Store, id)
}

// State is everything a store holds about one job.
type State struct {
	Job     jobstate.Job
	Execs   []jobstate.Execution
	History []jobstate.Transition
	Effects []jobstate.EffectRecord
}

// Load reads everything s holds about the job id, failing t on any error.
func Load(t require.TestingT, s jobstate.Store, id uuid.UUID) State {
	t.Helper()
	ctx := context.Background()
	var st State
	var err error
	st.Job, err = s.Get(ctx, id)
	require.NoError(t, err)
	st.Execs, err = s.Executions(ctx, id)
	require.NoError(t, err)
	st.History, err = s.History(ctx, id)
	require.NoError(t, err)
	st.Effects, err = s.Effects(ctx, id)
	require.NoError(t, err)
	return st
}

// path lists the states a history went through, the initial one first.
func path(h []jobstate.Transition) []jobstate.State {
	var out []jobstate.State
	for _, t := range h {
		out = append(out, t.To)
	}
	return out
}

// Counter counts the runs of its Effect; the zero value is ready to use
// and safe for concurrent use.
type Counter struct{ n atomic.Int64 }

// Effect counts one run and returns nil.
func (c *Counter) Effect(context.Context, jobstate.Job) error { c.n.Add(1); return nil }

// Get returns the number of runs so far.
func (c *Counter) Get() int64 { return c.n.Load() }
