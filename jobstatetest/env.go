package jobstatetest

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// TB is the part of testing.TB the helpers use; *testing.T and *testing.B
// satisfy it.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Epoch is the time an Env's clock starts at.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DrainLimit bounds the jobs one Drain may run before the test fails: a
// handler that keeps snoozing with no delay would otherwise never let it
// end.
const DrainLimit = 100_000

// WorkerName is the name of the workers an Env makes.
const WorkerName = "test-worker"

// Env is an engine with a manual clock, on a fresh memstore (New) or on a
// store the test gives (NewWithStore), and the helpers to drive it from a
// test. Every helper fails the test (Fatalf) on an unexpected error, so
// tests read as a list of steps.
type Env struct {
	// T receives the failures.
	T TB
	// Ctx is the context of the helpers' engine calls
	// (context.Background()).
	Ctx context.Context
	// Clock is the engine's clock and the workers' timer source.
	Clock *Clock
	// Store is the engine's store when New made the Env: a memstore of
	// its own. It is nil in an Env made by NewWithStore, whose store is
	// Engine.Store().
	Store *memstore.Store
	// Engine is the engine under test.
	Engine *jobstate.Engine
}

// New returns an Env whose engine runs on memstore.New() with the options
// given, after two of its own: the Env's Clock, starting at Epoch, and a
// jitter draw fixed at 0.5 (jobstate.WithRandom), so that backoffs are
// reproducible. A later WithRandom overrides the draw; a later WithClock
// would leave the Env's clock driving the workers only.
func New(t TB, opts ...jobstate.Option) *Env {
	t.Helper()
	store := memstore.New()
	e := NewWithStore(t, store, opts...)
	e.Store = store
	return e
}

// NewWithStore returns an Env whose engine runs on store, set up as New
// sets it up (the Env's Clock from Epoch, the jitter draw fixed at 0.5,
// then opts); its Store field is nil (the store is Engine.Store()). Every helper and assertion works as on
// memstore, through the engine's public operations.
//
// The test owns store: the Env neither empties nor closes it (close it in
// t.Cleanup). It should be empty and used by this Env alone, since a
// drain runs every due job of its worker's machines and the Env's clock
// is unrelated to the time of any other user's jobs. The store must keep
// the instants the engine gives it and read no clock of its own (the
// jobstate.Store contract), so that the Env's clock alone decides what is
// due, lapsed or expired. Package pgstore/pgtest makes such an Env on
// PostgreSQL (pgtest.NewEnv).
func NewWithStore(t TB, store jobstate.Store, opts ...jobstate.Option) *Env {
	t.Helper()
	clk := NewClock(Epoch)
	all := append([]jobstate.Option{jobstate.WithClock(clk), jobstate.WithRandom(func() float64 { return 0.5 })}, opts...)
	eng, err := jobstate.New(store, all...)
	if err != nil {
		t.Fatalf("jobstatetest: engine: %v", err)
	}
	return &Env{T: t, Ctx: context.Background(), Clock: clk, Engine: eng}
}

// Create creates a job and returns it.
func (e *Env) Create(nj jobstate.NewJob) jobstate.Job {
	e.T.Helper()
	c, err := e.Engine.Create(e.Ctx, nj)
	if err != nil {
		e.T.Fatalf("jobstatetest: create a %q job: %v", nj.Machine, err)
	}
	return c.Job
}

// Get returns the job.
func (e *Env) Get(id uuid.UUID) jobstate.Job {
	e.T.Helper()
	j, err := e.Engine.Get(e.Ctx, id)
	if err != nil {
		e.T.Fatalf("jobstatetest: get job %s: %v", id, err)
	}
	return j
}

// Advance moves the clock forward by d (firing the runtime timers due) and
// returns the new time.
func (e *Env) Advance(d time.Duration) time.Time { return e.Clock.Advance(d) }

// Sweep runs Engine.Sweep at the clock's time.
func (e *Env) Sweep() jobstate.SweepReport {
	e.T.Helper()
	rep, err := e.Engine.Sweep(e.Ctx)
	if err != nil {
		e.T.Fatalf("jobstatetest: sweep: %v", err)
	}
	return rep
}

// Worker returns a worker on the Env's engine, named WorkerName, on the
// Env's clock, configured further by opts (a later WithName or WithClock
// wins).
func (e *Env) Worker(opts ...worker.Option) *worker.Worker {
	e.T.Helper()
	all := append([]worker.Option{worker.WithName(WorkerName), worker.WithClock(e.Clock)}, opts...)
	w, err := worker.New(e.Engine, all...)
	if err != nil {
		e.T.Fatalf("jobstatetest: worker: %v", err)
	}
	return w
}

// Drain runs w until no job of its machines is due at the clock's time
// (worker.Worker.Drain: claims run synchronously, with a sweep between
// rounds) and returns the number of jobs it claimed.
func (e *Env) Drain(w *worker.Worker) int {
	e.T.Helper()
	n, err := w.Drain(e.Ctx, DrainLimit)
	switch {
	case errors.Is(err, worker.ErrDrainLimit):
		e.T.Fatalf("jobstatetest: drain: still busy after %d jobs (a handler that snoozes with no delay?)", n)
	case err != nil:
		e.T.Fatalf("jobstatetest: drain: %v", err)
	}
	return n
}

// Run runs h on the due jobs of machine, one at a time, until none is due,
// and returns how many it ran.
func (e *Env) Run(machine string, h worker.Handler) int {
	e.T.Helper()
	return e.Drain(e.Worker(worker.Handle(machine, h, 1)))
}

// RunFor drains w, then advances the clock by step and drains again, until
// d has passed; it returns the number of jobs claimed. Use it to let
// backoffs, snoozes and schedules run their course.
func (e *Env) RunFor(w *worker.Worker, d, step time.Duration) int {
	e.T.Helper()
	if step <= 0 {
		e.T.Fatalf("jobstatetest: RunFor: step %s must be positive", step)
	}
	n := e.Drain(w)
	for passed := time.Duration(0); passed < d; passed += step {
		e.Advance(min(step, d-passed))
		n += e.Drain(w)
	}
	return n
}
