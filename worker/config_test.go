package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// TestNewRefusesBadConfiguration: every bad configuration fails at
// construction with a *ConfigError wrapping ErrInvalidArgument that names
// the problem, and never panics.
func TestNewRefusesBadConfiguration(t *testing.T) {
	// A machine with no claim rule: drafts are only ever submitted.
	noClaim, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "drafts",
		States: []jobstate.StateSpec{
			{Name: "DRAFT", Kind: jobstate.KindInitial},
			{Name: "SENT", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
		},
		Rules: []jobstate.Rule{{From: []jobstate.State{"DRAFT"}, Event: "send", To: "SENT"}},
	})
	require.NoError(t, err)
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(taskMachine(t, "task"), noClaim))
	require.NoError(t, err)
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) { return ok() })
	var nilFunc worker.HandlerFunc
	var nilHandler worker.Handler

	cases := []struct {
		name string
		eng  *jobstate.Engine
		opts []worker.Option
		want string
	}{
		{"nil engine", nil, []worker.Option{worker.Handle("task", h, 1)}, "nil engine"},
		{"zero engine", &jobstate.Engine{}, []worker.Option{worker.Handle("task", h, 1)}, "nil engine"},
		{"no handler", eng, nil, "no handler"},
		{"unknown machine", eng, []worker.Option{worker.Handle("nope", h, 1)}, `machine "nope" is not registered`},
		{"no claim rule", eng, []worker.Option{worker.Handle("drafts", h, 1)}, `machine "drafts" has no claim rule`},
		{"zero concurrency", eng, []worker.Option{worker.Handle("task", h, 0)}, "concurrency 0"},
		{"negative concurrency", eng, []worker.Option{worker.Handle("task", h, -3)}, "concurrency -3"},
		{"nil handler func", eng, []worker.Option{worker.Handle("task", nilFunc, 1)}, "nil handler"},
		{"nil handler", eng, []worker.Option{worker.Handle("task", nilHandler, 1)}, "nil handler"},
		{"handled twice", eng, []worker.Option{worker.Handle("task", h, 1), worker.Handle("task", h, 2)}, "handled twice"},
		{"overall concurrency", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithConcurrency(0)}, "overall concurrency 0"},
		{"nil option", eng, []worker.Option{worker.Handle("task", h, 1), nil}, "option #2 is nil"},
		{"nil handler option", eng, []worker.Option{worker.Handle("task", h, 1, nil)}, "handler option #1 is nil"},
		{"empty name", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithName("")}, "empty worker name"},
		{"nil logger", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithLogger(nil)}, "nil logger"},
		{"nil clock", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithClock(nil)}, "nil clock"},
		{"poll interval", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithPollInterval(0)}, "poll interval"},
		{"sweep interval", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithSweepInterval(-time.Second)}, "sweep interval"},
		{"grace period", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithGracePeriod(-1)}, "grace period"},
		{"jitter", eng, []worker.Option{worker.Handle("task", h, 1), worker.WithJitter(1)}, "jitter"},
		{"lease TTL", eng, []worker.Option{worker.Handle("task", h, 1, worker.LeaseTTL(0))}, "lease TTL"},
		{"heartbeat not below TTL", eng, []worker.Option{worker.Handle("task", h, 1, worker.HeartbeatInterval(30*time.Second))}, "heartbeat interval"},
		{"timeout", eng, []worker.Option{worker.Handle("task", h, 1, worker.Timeout(-time.Second))}, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w *worker.Worker
			var err error
			require.NotPanics(t, func() { w, err = worker.New(c.eng, c.opts...) })
			require.Error(t, err)
			assert.Nil(t, w)
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			var ce *worker.ConfigError
			require.True(t, errors.As(err, &ce), "a *ConfigError: %T", err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestNewListsEveryProblem: one error names all the problems.
func TestNewListsEveryProblem(t *testing.T) {
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(taskMachine(t, "task")))
	require.NoError(t, err)
	_, err = worker.New(eng, worker.Handle("nope", nil, 0), worker.WithPollInterval(-1))
	var ce *worker.ConfigError
	require.True(t, errors.As(err, &ce))
	assert.Len(t, ce.Problems, 4, "%v", err) // nil handler, concurrency, unknown machine, poll
}

// TestNewDefaults: a valid configuration, with its name.
func TestNewDefaults(t *testing.T) {
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(taskMachine(t, "task")))
	require.NoError(t, err)
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) { return ok() })
	w, err := worker.New(eng, worker.Handle("task", h, 2))
	require.NoError(t, err)
	assert.NotEmpty(t, w.Name(), "a made-up name")
	w2, err := worker.New(eng, worker.Handle("task", h, 2))
	require.NoError(t, err)
	assert.NotEqual(t, w.Name(), w2.Name(), "made-up names are unique")
	w3, err := worker.New(eng, worker.Handle("task", h, 2), worker.WithName("w-3"))
	require.NoError(t, err)
	assert.Equal(t, "w-3", w3.Name())
}
