package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// periodicSpec is a machine whose jobs a periodic schedule creates: keys
// held for the job's life.
func periodicSpec(name string, pol jobstate.IdempotencyPolicy) jobstate.Spec {
	s := taskSpec(name)
	s.Policy.Idempotency = pol
	return s
}

// periodicWorkers starts n runtimes on one store, each with its own engine
// on the shared manual clock, running the schedule "tick" of machine
// "tick" every minute. They handle no job: the test counts creations. It
// returns the engines and a function that stops the runtimes.
func periodicWorkers(t *testing.T, store jobstate.Store, clk *jobstatetest.Clock, n int, catchUp worker.CatchUp) ([]*jobstate.Engine, func()) {
	t.Helper()
	def, err := jobstate.NewDefinition(periodicSpec("tick", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var engs []*jobstate.Engine
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clk))
		require.NoError(t, err)
		w, err := worker.New(eng, worker.WithClock(clk), worker.WithJitter(0),
			worker.WithPollInterval(time.Hour), worker.WithSweepInterval(time.Hour),
			worker.Periodic("tick", "tick", worker.Every(time.Minute),
				worker.PeriodicPayloadFunc(func(start time.Time) ([]byte, error) { return []byte(start.Format(time.RFC3339)), nil }),
				worker.PeriodicCatchUp(catchUp)))
		require.NoError(t, err)
		engs = append(engs, eng)
		go func() { done <- w.Run(ctx) }()
	}
	return engs, func() {
		cancel()
		for i := 0; i < n; i++ {
			require.NoError(t, <-done)
		}
	}
}

// settle waits until every runtime waits on its timers: a poll, a sweep
// and a schedule timer each.
func settle(t *testing.T, clk *jobstatetest.Clock, runtimes int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, clk.WaitPending(ctx, 3*runtimes))
}

// periodJobs returns the jobs of the schedule "tick", by period start.
func periodJobs(t *testing.T, eng *jobstate.Engine) map[time.Time][]jobstate.Job {
	t.Helper()
	return periodJobsOf(t, eng, "tick")
}

// Three runtimes running one schedule create one job per period, at its
// start, with the period's key and payload; after downtime CatchUpLast
// creates the last missed period's job once, and CatchUpNone none.
func TestPeriodicJobOncePerPeriodAcrossRuntimes(t *testing.T) {
	store := memstore.New()
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	engs, stop := periodicWorkers(t, store, clk, 3, worker.CatchUpNone)
	settle(t, clk, 3)
	assert.Empty(t, periodJobs(t, engs[0]), "no job before the first period starts")

	var starts []time.Time
	for p := 0; p < 5; p++ {
		next := worker.Every(time.Minute).Next(clk.Now())
		clk.Set(next)
		settle(t, clk, 3)
		starts = append(starts, next)
	}
	jobs := periodJobs(t, engs[0])
	require.Len(t, jobs, 5)
	for _, start := range starts {
		require.Len(t, jobs[start], 1, "period %v", start)
		j := jobs[start][0]
		assert.Equal(t, worker.PeriodKey("tick", start), j.IdempotencyKey)
		assert.Equal(t, start.Format(time.RFC3339), string(j.Payload))
	}
	stop()

	// Down for three and a half periods; CatchUpNone creates nothing at
	// start.
	clk.Advance(3*time.Minute + 30*time.Second)
	engs, stop = periodicWorkers(t, store, clk, 3, worker.CatchUpNone)
	settle(t, clk, 3)
	assert.Len(t, periodJobs(t, engs[0]), 5, "no catch-up")
	stop()

	// CatchUpLast: the last missed period's job, once, whichever runtimes
	// start; a restart within the period creates nothing more.
	engs, stop = periodicWorkers(t, store, clk, 3, worker.CatchUpLast)
	settle(t, clk, 3)
	stop()
	_, stop = periodicWorkers(t, store, clk, 2, worker.CatchUpLast)
	settle(t, clk, 2)
	stop()
	jobs = periodJobs(t, engs[0])
	assert.Len(t, jobs, 6)
	last := worker.Every(time.Minute).Next(clk.Now().Add(-time.Minute))
	assert.Len(t, jobs[last], 1, "the last missed period, once")
}

// A periodic job's job is handled like any other: created at the
// period's start, claimed and finished by a runtime.
func TestPeriodicJobsRun(t *testing.T) {
	def, err := jobstate.NewDefinition(periodicSpec("tick", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clk))
	require.NoError(t, err)
	ran := make(chan jobstate.Job, 10)
	w, err := worker.New(eng, worker.WithClock(clk), worker.WithJitter(0),
		worker.WithPollInterval(time.Hour), worker.WithSweepInterval(time.Hour),
		worker.Handle("tick", worker.HandlerFunc(func(ctx context.Context, task *worker.Task) (jobstate.CommitInput, error) {
			ran <- task.Job()
			return jobstate.CommitInput{}, nil
		}), 1),
		worker.Periodic("tick", "tick", worker.Every(time.Hour)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for p := 0; p < 3; p++ {
		require.NoError(t, clk.WaitPending(ctx, 3))
		next := worker.Every(time.Hour).Next(clk.Now())
		clk.Set(next)
		select {
		case j := <-ran:
			assert.True(t, j.NotBefore.Equal(next), "ran the job of %v, want %v", j.NotBefore, next)
			// The next period starts only once this job's success is
			// recorded: a clock moved during the commit would expire its
			// lease.
			waitTerminal(t, eng, j.ID)
		case <-time.After(30 * time.Second):
			t.Fatal("the period's job did not run")
		}
	}
	cancel()
	require.NoError(t, <-done)
}

// createGate holds the first Create made after arm until open is closed,
// closing entered when that Create arrives; every other call passes.
type createGate struct {
	jobstate.Store
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (s *createGate) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.open
	}
	return s.Store.Create(ctx, machine, key, fn)
}

// A period that starts while the previous period's job is being created
// gets its job as soon as that creation returns: the runtime does not
// wait for the period after it.
func TestPeriodicPeriodStartedDuringACreationIsNotSkipped(t *testing.T) {
	def, err := jobstate.NewDefinition(periodicSpec("tick", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	inner := memstore.New()
	store := &createGate{Store: inner, entered: make(chan struct{}), open: make(chan struct{})}
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clk))
	require.NoError(t, err)
	// The gate offers only jobstate.Store's methods: the jobs are listed
	// through an engine on the store it wraps.
	reader, err := jobstate.New(inner, jobstate.WithMachines(def), jobstate.WithClock(clk))
	require.NoError(t, err)
	w, err := worker.New(eng, quiet(worker.WithClock(clk), worker.Periodic("tick", "tick", worker.Every(time.Minute)))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	settle(t, clk, 1)

	first := worker.Every(time.Minute).Next(clk.Now())
	store.armed.Store(true)
	clk.Set(first)
	<-store.entered // the first period's job is being created
	second := first.Add(time.Minute)
	clk.Set(second)
	close(store.open)
	waitJobs(t, reader, "tick", 2)
	settle(t, clk, 1)
	jobs := periodJobs(t, reader)
	assert.Len(t, jobs, 2)
	assert.Len(t, jobs[first], 1)
	assert.Len(t, jobs[second], 1)
	cancel()
	require.NoError(t, <-done)
}

// New refuses a schedule that could give a period two jobs or none.
func TestPeriodicRefusals(t *testing.T) {
	released, err := jobstate.NewDefinition(periodicSpec("released", jobstate.IdempotencyPolicy{ReleaseIn: []jobstate.State{failed}}))
	require.NoError(t, err)
	short, err := jobstate.NewDefinition(periodicSpec("short", jobstate.IdempotencyPolicy{Retention: 90 * time.Second}))
	require.NoError(t, err)
	long, err := jobstate.NewDefinition(periodicSpec("long", jobstate.IdempotencyPolicy{Retention: 2 * time.Minute}))
	require.NoError(t, err)
	forever, err := jobstate.NewDefinition(periodicSpec("forever", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(released, short, long, forever))
	require.NoError(t, err)
	for name, opt := range map[string]worker.Option{
		"unknown machine":     worker.Periodic("a", "nope", worker.Every(time.Minute)),
		"keys released":       worker.Periodic("a", "released", worker.Every(time.Minute)),
		"retention too short": worker.Periodic("a", "short", worker.Every(time.Minute)),
		"zero interval":       worker.Periodic("a", "long", worker.Every(0)),
		"nil schedule":        worker.Periodic("a", "long", nil),
		"no name":             worker.Periodic("", "long", worker.Every(time.Minute)),
		"unknown catch-up":    worker.Periodic("a", "long", worker.Every(time.Minute), worker.PeriodicCatchUp(7)),
		"nil option":          worker.Periodic("a", "long", worker.Every(time.Minute), nil),
		"Next stands still":   worker.Periodic("a", "forever", scheduleFunc(func(t time.Time) time.Time { return t })),
		"Next goes back":      worker.Periodic("a", "forever", scheduleFunc(func(t time.Time) time.Time { return t.Add(-time.Minute) })),
		// Advances for three periods after now, then stands still: New
		// samples beyond the first period. The machine "forever" holds
		// keys for the job's life, so only the schedule is at fault.
		"Next stalls later": worker.Periodic("a", "forever", stallAt(eng.Now().Add(3*time.Minute), time.Minute)),
	} {
		_, err := worker.New(eng, opt)
		var ce *worker.ConfigError
		assert.ErrorAs(t, err, &ce, name)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
	}
	_, err = worker.New(eng, worker.Periodic("a", "long", worker.Every(time.Minute)), worker.Periodic("a", "long", worker.Every(time.Hour)))
	assert.Error(t, err, "a name used twice")
	_, err = worker.New(eng, worker.Periodic("a", "long", worker.Every(time.Minute)))
	assert.NoError(t, err, "keys held for two periods")
	_, err = worker.New(eng, worker.Periodic("a", "forever", scheduleFunc(func(time.Time) time.Time { return time.Time{} })))
	assert.NoError(t, err, "a schedule with no period left")
}

// scheduleFunc is a Schedule made of a function.
type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

// stallAt returns the schedule of Every(d) that stands still from limit
// on: Next of a time at or after limit returns that time.
func stallAt(limit time.Time, d time.Duration) scheduleFunc {
	return func(t time.Time) time.Time {
		if t.Before(limit) {
			return worker.Every(d).Next(t)
		}
		return t
	}
}

// A schedule whose Next stops advancing while the runtime runs is
// stopped, with an error logged, instead of spinning: it asks Next
// nothing more and creates no more jobs, while the runtime's other
// schedule goes on.
func TestPeriodicScheduleThatStopsAdvancingIsStopped(t *testing.T) {
	tick, err := jobstate.NewDefinition(periodicSpec("tick", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	tock, err := jobstate.NewDefinition(periodicSpec("tock", jobstate.IdempotencyPolicy{}))
	require.NoError(t, err)
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(tick, tock), jobstate.WithClock(clk))
	require.NoError(t, err)
	// Beyond the periods New samples (an hour and more of minutes).
	limit := jobstatetest.Epoch.Add(2 * time.Hour)
	stalling := stallAt(limit, time.Minute)
	var calls atomic.Int64
	counted := scheduleFunc(func(t time.Time) time.Time { calls.Add(1); return stalling(t) })
	logs := newLogSink()
	w, err := worker.New(eng, quiet(worker.WithClock(clk), worker.WithLogger(slog.New(logs)),
		worker.Periodic("tick", "tick", counted),
		worker.Periodic("tock", "tock", worker.Every(time.Hour)))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.NoError(t, clk.WaitPending(ctx, 4), "poll, sweep and the two schedules' timers")

	clk.Set(limit)
	rec := logs.waitAny(t, "periodic schedule stopped: Next does not advance")
	assert.Equal(t, "tick", rec["periodic"])
	assert.Equal(t, slog.LevelError.String(), rec["level"])
	asked := calls.Load()
	// The period starting at limit was reached before Next stood still:
	// its job exists, once.
	waitJobs(t, eng, "tock", 1)
	assert.Len(t, periodJobsOf(t, eng, "tick")[limit], 1)

	// An hour on, tock creates its next period's job; tick nothing.
	require.NoError(t, clk.WaitPending(ctx, 3), "poll, sweep and tock's timer")
	clk.Advance(time.Hour)
	waitJobs(t, eng, "tock", 2)
	cancel()
	require.NoError(t, <-done)
	assert.Len(t, periodJobsOf(t, eng, "tick"), 1, "no job after the schedule stopped")
	assert.Equal(t, asked, calls.Load(), "Next not called after the schedule stopped")
	assert.Len(t, logs.named("periodic schedule stopped: Next does not advance"), 1)
}

// waitJobs waits, on the wall clock, until machine has n jobs.
func waitJobs(t *testing.T, eng *jobstate.Engine, machine string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(periodJobsOf(t, eng, machine)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("machine %s has %d jobs, want %d", machine, len(periodJobsOf(t, eng, machine)), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// periodJobsOf returns the jobs of machine, by NotBefore.
func periodJobsOf(t *testing.T, eng *jobstate.Engine, machine string) map[time.Time][]jobstate.Job {
	t.Helper()
	page, err := eng.List(context.Background(), jobstate.ListQuery{Machine: machine, Limit: jobstate.MaxListLimit}, "")
	require.NoError(t, err)
	out := make(map[time.Time][]jobstate.Job)
	for _, j := range page.Jobs {
		out[j.NotBefore.UTC()] = append(out[j.NotBefore.UTC()], j)
	}
	return out
}

// waitTerminal waits, on the wall clock, until job id is terminal.
func waitTerminal(t *testing.T, eng *jobstate.Engine, id uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := eng.Get(context.Background(), id)
		require.NoError(t, err)
		if j.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %v not terminal: %s", id, j.State)
		}
		time.Sleep(time.Millisecond)
	}
}
