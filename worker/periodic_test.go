package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// Every's periods start at the whole multiples of its interval, the
// first strictly after the time given.
func TestEveryStartsAtMultiplesOfItsInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := time.Duration(rapid.Int64Range(1, int64(48*time.Hour)).Draw(t, "d"))
		at := time.Unix(0, rapid.Int64Range(-1<<62, 1<<62).Draw(t, "at"))
		next := worker.Every(d).Next(at)
		if !next.After(at) || next.Sub(at) > d {
			t.Fatalf("Next(%v) = %v with interval %v", at, next, d)
		}
		if next.UnixNano()%int64(d) != 0 {
			t.Fatalf("Next(%v) = %v is not a multiple of %v", at, next, d)
		}
	})
}

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
	page, err := eng.List(context.Background(), jobstate.ListQuery{Machine: "tick", Limit: jobstate.MaxListLimit}, "")
	require.NoError(t, err)
	out := make(map[time.Time][]jobstate.Job)
	for _, j := range page.Jobs {
		out[j.NotBefore.UTC()] = append(out[j.NotBefore.UTC()], j)
	}
	return out
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

// New refuses a schedule that could give a period two jobs or none.
func TestPeriodicRefusals(t *testing.T) {
	released, err := jobstate.NewDefinition(periodicSpec("released", jobstate.IdempotencyPolicy{ReleaseIn: []jobstate.State{failed}}))
	require.NoError(t, err)
	short, err := jobstate.NewDefinition(periodicSpec("short", jobstate.IdempotencyPolicy{Retention: 90 * time.Second}))
	require.NoError(t, err)
	long, err := jobstate.NewDefinition(periodicSpec("long", jobstate.IdempotencyPolicy{Retention: 2 * time.Minute}))
	require.NoError(t, err)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(released, short, long))
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
	} {
		_, err := worker.New(eng, opt)
		var ce *worker.ConfigError
		assert.ErrorAs(t, err, &ce, name)
	}
	_, err = worker.New(eng, worker.Periodic("a", "long", worker.Every(time.Minute)), worker.Periodic("a", "long", worker.Every(time.Hour)))
	assert.Error(t, err, "a name used twice")
	_, err = worker.New(eng, worker.Periodic("a", "long", worker.Every(time.Minute)))
	assert.NoError(t, err, "keys held for two periods")
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
