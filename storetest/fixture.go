package storetest

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// fixture is the engine suite's Fixture (an engine over a fresh store with
// a manual clock) under the names the rest of this suite uses.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	clock *jobstate.ManualClock
	store jobstate.Store
	eng   *jobstate.Engine
	suite *enginesuite.Fixture
}

// newFixture runs the machines of specs (enginesuite.NewFixture). A
// machine bearing the name of one of the five lifecycles must be that
// lifecycle's literal definition (machines.Check); a test that changes its
// rules gives it a generic name.
func newFixture(t *testing.T, newStore NewStore, opts []jobstate.Option, specs ...jobstate.Spec) *fixture {
	t.Helper()
	s := enginesuite.NewFixture(t, enginesuite.NewStore(newStore), opts, specs...)
	return &fixture{t: s.T, ctx: s.Ctx, clock: s.Clock, store: s.Store, eng: s.Eng, suite: s}
}

func (f *fixture) create(machine string, nj jobstate.NewJob) jobstate.Job {
	f.t.Helper()
	return f.suite.Create(machine, nj)
}

func (f *fixture) fire(id uuid.UUID, ev jobstate.Event, actor string) jobstate.Job {
	f.t.Helper()
	return f.suite.Fire(id, ev, actor)
}

func (f *fixture) claim(machine, worker string) jobstate.Claimed {
	f.t.Helper()
	return f.suite.Claim(machine, worker)
}

func (f *fixture) get(id uuid.UUID) jobstate.Job {
	f.t.Helper()
	return f.suite.Get(id)
}

func (f *fixture) sweep() jobstate.SweepReport {
	f.t.Helper()
	return f.suite.Sweep()
}

// snapshot loads everything stored about a job.
func (f *fixture) snapshot(id uuid.UUID) state { return load(f.t, f.store, id) }

// counter counts effect runs (enginesuite.Counter).
type counter struct{ enginesuite.Counter }

func (c *counter) effect(ctx context.Context, j jobstate.Job) error { return c.Effect(ctx, j) }
func (c *counter) get() int64                                       { return c.Get() }
