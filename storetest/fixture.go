package storetest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// fixture is an engine over a fresh store with a manual clock.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	clock *jobstate.ManualClock
	store jobstate.Store
	eng   *jobstate.Engine
}

// newFixture runs the machines of specs. A machine bearing the name of one
// of the five lifecycles must be that lifecycle's literal definition
// (machines.Check); a test that changes its rules gives it a generic name.
func newFixture(t *testing.T, newStore NewStore, opts []jobstate.Option, specs ...jobstate.Spec) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), clock: jobstate.NewManualClock(Epoch), store: newStore(t)}
	var defs []*jobstate.Definition
	require.NoError(t, checkSpecs(specs...))
	for _, s := range specs {
		d, err := jobstate.NewDefinition(s)
		require.NoError(t, err)
		defs = append(defs, d)
	}
	all := append([]jobstate.Option{jobstate.WithClock(f.clock), jobstate.WithMachines(defs...), jobstate.WithRandom(func() float64 { return 0.5 })}, opts...)
	eng, err := jobstate.New(f.store, all...)
	require.NoError(t, err)
	f.eng = eng
	return f
}

// checkSpecs returns an error when a spec bears the name of one of the five
// lifecycles without being that lifecycle's literal definition.
func checkSpecs(specs ...jobstate.Spec) error {
	for _, s := range specs {
		if err := m.Check(s); err != nil {
			return err
		}
	}
	return nil
}

func (f *fixture) create(machine string, nj jobstate.NewJob) jobstate.Job {
	f.t.Helper()
	nj.Machine = machine
	c, err := f.eng.Create(f.ctx, nj)
	require.NoError(f.t, err)
	require.False(f.t, c.Existing)
	return c.Job
}

func (f *fixture) fire(id uuid.UUID, ev jobstate.Event, actor string) jobstate.Job {
	f.t.Helper()
	j, err := f.eng.Fire(f.ctx, id, ev, jobstate.Call{Actor: actor})
	require.NoError(f.t, err)
	return j
}

func (f *fixture) claim(machine, worker string) jobstate.Claimed {
	f.t.Helper()
	c, err := f.eng.Claim(f.ctx, jobstate.ClaimRequest{Machine: machine, Worker: worker})
	require.NoError(f.t, err)
	return c
}

func (f *fixture) get(id uuid.UUID) jobstate.Job {
	f.t.Helper()
	j, err := f.store.Get(f.ctx, id)
	require.NoError(f.t, err)
	return j
}

func (f *fixture) sweep() jobstate.SweepReport {
	f.t.Helper()
	r, err := f.eng.Sweep(f.ctx)
	require.NoError(f.t, err)
	return r
}

// snapshot loads everything stored about a job.
func (f *fixture) snapshot(id uuid.UUID) state { return load(f.t, f.store, id) }

// path lists the states a history went through, the initial one first.
func path(h []jobstate.Transition) []jobstate.State {
	var out []jobstate.State
	for _, t := range h {
		out = append(out, t.To)
	}
	return out
}

// counter counts effect runs.
type counter struct{ n atomic.Int64 }

func (c *counter) effect(context.Context, jobstate.Job) error { c.n.Add(1); return nil }
func (c *counter) get() int64                                 { return c.n.Load() }
