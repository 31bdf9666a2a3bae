package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// gauge counts handlers running and keeps the highest count seen.
type gauge struct{ now, peak atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// TestConcurrencyLimits: never more handlers of a machine than its limit,
// nor in all than the overall limit; and the overall limit is used to the
// full.
func TestConcurrencyLimits(t *testing.T) {
	e := jobstatetest.New(t, jobstate.WithMachines(taskMachine(t, "a"), taskMachine(t, "b")))
	const perMachine = 30
	for i := 0; i < perMachine; i++ {
		e.Create(jobstate.NewJob{Machine: "a"})
		e.Create(jobstate.NewJob{Machine: "b"})
	}
	var all, ga, gb gauge
	release := make(chan struct{})
	started := make(chan struct{}, 2*perMachine)
	handler := func(g *gauge) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
			all.enter()
			g.enter()
			started <- struct{}{}
			<-release
			g.leave()
			all.leave()
			return ok()
		})
	}
	w := e.Worker(worker.Handle("a", handler(&ga), 3), worker.Handle("b", handler(&gb), 2), worker.WithConcurrency(4))
	drained := make(chan int, 1)
	go func() { n, err := w.Drain(context.Background(), 0); assert.NoError(t, err); drained <- n }()
	for i := 0; i < 4; i++ {
		recv(t, started)
	}
	assert.EqualValues(t, 4, all.now.Load(), "the overall limit is filled")
	close(release) // the rest run as fast as they can
	require.Equal(t, 2*perMachine, recv(t, drained))
	assert.EqualValues(t, 4, all.peak.Load(), "overall limit")
	assert.LessOrEqual(t, ga.peak.Load(), int64(3), "machine a's limit")
	assert.LessOrEqual(t, gb.peak.Load(), int64(2), "machine b's limit")
	assert.GreaterOrEqual(t, ga.peak.Load()+gb.peak.Load(), int64(4))
}

// TestConcurrencyLimitsUnderRun: the same under Run, with many quick
// jobs, counted with atomics inside the handlers.
func TestConcurrencyLimitsUnderRun(t *testing.T) {
	obs, finished := finishedJobs()
	e := newEnv(t, obs)
	const jobs = 200
	for i := 0; i < jobs; i++ {
		e.Create(jobstate.NewJob{Machine: "task"})
	}
	var g gauge
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		g.enter()
		defer g.leave()
		return ok()
	}), 5))
	ctx, cancel := context.WithCancel(context.Background())
	errc := runWorker(ctx, w)
	for i := 0; i < jobs; i++ {
		recv(t, finished)
	}
	cancel()
	require.NoError(t, recv(t, errc))
	assert.LessOrEqual(t, g.peak.Load(), int64(5))
	assert.Positive(t, g.peak.Load())
}
