package jobstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
)

// TestZeroEngineRefuses: every method of an engine not made by New returns
// ErrInvalidArgument instead of panicking.
func TestZeroEngineRefuses(t *testing.T) {
	ctx := context.Background()
	id := uuid.New()
	for name, e := range map[string]*jobstate.Engine{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			calls := map[string]func() error{
				"Create":        func() error { _, err := e.Create(ctx, jobstate.NewJob{Machine: "queue"}); return err },
				"Get":           func() error { _, err := e.Get(ctx, id); return err },
				"History":       func() error { _, err := e.History(ctx, id); return err },
				"Executions":    func() error { _, err := e.Executions(ctx, id); return err },
				"Effects":       func() error { _, err := e.Effects(ctx, id); return err },
				"Fire":          func() error { _, err := e.Fire(ctx, id, "submit", jobstate.Call{}); return err },
				"Cancel":        func() error { _, err := e.Cancel(ctx, id, jobstate.Call{}); return err },
				"Apply":         func() error { _, err := e.Apply(ctx, id, "x", jobstate.Call{}); return err },
				"Redrive":       func() error { _, err := e.Redrive(ctx, id, jobstate.Call{}); return err },
				"Claim":         func() error { _, err := e.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"}); return err },
				"ClaimJob":      func() error { _, err := e.ClaimJob(ctx, id, jobstate.ClaimRequest{Worker: "w"}); return err },
				"Heartbeat":     func() error { _, err := e.Heartbeat(ctx, jobstate.Lease{JobID: id}); return err },
				"Start":         func() error { _, err := e.Start(ctx, jobstate.Lease{JobID: id}); return err },
				"Commit":        func() error { _, err := e.Commit(ctx, jobstate.Lease{JobID: id}, jobstate.CommitInput{}); return err },
				"Finish":        func() error { _, err := e.Finish(ctx, jobstate.Lease{JobID: id}); return err },
				"Succeed":       func() error { _, err := e.Succeed(ctx, jobstate.Lease{JobID: id}, jobstate.CommitInput{}); return err },
				"Fail":          func() error { _, err := e.Fail(ctx, jobstate.Lease{JobID: id}, errors.New("x")); return err },
				"Snooze":        func() error { _, err := e.Snooze(ctx, jobstate.Lease{JobID: id}, time.Second); return err },
				"Advance":       func() error { _, err := e.Advance(ctx, jobstate.Lease{JobID: id}, "step", jobstate.Call{}); return err },
				"Sweep":         func() error { _, err := e.Sweep(ctx); return err },
				"RecoverWorker": func() error { _, err := e.RecoverWorker(ctx, "w"); return err },
				"Stuck":         func() error { _, err := e.Stuck(ctx, "", time.Second, 0); return err },
				"Prune":         func() error { _, err := e.Prune(ctx, time.Second, 0); return err },
				"Counts":        func() error { _, err := e.Counts(ctx, "queue"); return err },
			}
			for op, call := range calls {
				assert.ErrorIs(t, call(), jobstate.ErrInvalidArgument, op)
			}
			_, ok := e.Machine("queue")
			assert.False(t, ok)
			assert.Nil(t, e.Store())
			assert.False(t, e.Now().IsZero())
		})
	}
}

// TestNewRefusesNils: nil options, typed-nil stores and clocks, and zero
// definitions are refused at construction.
func TestNewRefusesNils(t *testing.T) {
	var nilStore *memstore.Store
	var nilClock *jobstate.ManualClock
	cases := map[string]func() (*jobstate.Engine, error){
		"nil store":       func() (*jobstate.Engine, error) { return jobstate.New(nil) },
		"typed nil store": func() (*jobstate.Engine, error) { return jobstate.New(nilStore) },
		"nil option":      func() (*jobstate.Engine, error) { return jobstate.New(memstore.New(), nil) },
		"typed nil clock": func() (*jobstate.Engine, error) { return jobstate.New(memstore.New(), jobstate.WithClock(nilClock)) },
		"zero definition": func() (*jobstate.Engine, error) {
			return jobstate.New(memstore.New(), jobstate.WithMachines(&jobstate.Definition{}))
		},
		"nil definition": func() (*jobstate.Engine, error) { return jobstate.New(memstore.New(), jobstate.WithMachines(nil)) },
	}
	for name, mk := range cases {
		e, err := mk()
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
		assert.Nil(t, e, name)
	}
}

// TestTerminalRefusalIsInvalidTransition: a move from a terminal state
// matches ErrInvalidTransition, with ErrTerminal as the specific cause.
func TestTerminalRefusalIsInvalidTransition(t *testing.T) {
	ctx := context.Background()
	e, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	c, err := e.Create(ctx, jobstate.NewJob{Machine: "queue"})
	require.NoError(t, err)
	_, err = e.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
	require.NoError(t, err)
	_, err = e.Cancel(ctx, c.Job.ID, jobstate.Call{})
	require.NoError(t, err)
	_, err = e.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
	assert.ErrorIs(t, err, jobstate.ErrTerminal)
	assert.Equal(t, "terminal", jobstate.Code(err))

	// Value receivers: a job returned by Get answers in one expression.
	get := func() jobstate.Job { j, _ := e.Get(ctx, c.Job.ID); return j }
	assert.True(t, get().Terminal())
	assert.False(t, get().Due(time.Now()))
	assert.False(t, jobstate.Job{}.Terminal())

	effects, err := e.Effects(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Empty(t, effects)
}

// TestRetryOverrideFieldByField: a per-job override replaces only the
// fields it sets.
func TestRetryOverrideFieldByField(t *testing.T) {
	ctx := context.Background()
	e, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	b := jobstate.FixedBackoff(time.Minute)
	for name, tc := range map[string]struct {
		o       *jobstate.RetryOverride
		max     int
		own     bool
		initial time.Duration
	}{
		"none":          {nil, 3, false, 0},
		"empty":         {&jobstate.RetryOverride{}, 3, false, 0},
		"backoff only":  {&jobstate.RetryOverride{Backoff: &b}, 3, true, time.Minute},
		"retries only":  {&jobstate.RetryOverride{MaxRetries: jobstate.Retries(7)}, 7, false, 0},
		"no retries":    {&jobstate.RetryOverride{MaxRetries: jobstate.Retries(0)}, 0, false, 0},
		"both, minimum": {&jobstate.RetryOverride{MaxRetries: jobstate.Retries(jobstate.Unlimited), Backoff: &b}, jobstate.Unlimited, true, time.Minute},
	} {
		c, err := e.Create(ctx, jobstate.NewJob{Machine: "queue", Retry: tc.o})
		require.NoError(t, err, name)
		assert.Equal(t, tc.max, c.Job.MaxRetries, name)
		assert.Equal(t, tc.own, c.Job.OwnBackoff, name)
		assert.Equal(t, tc.initial, c.Job.Backoff.Initial, name)
	}
	_, err = e.Create(ctx, jobstate.NewJob{Machine: "queue", Retry: &jobstate.RetryOverride{MaxRetries: jobstate.Retries(-2)}})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}

// TestDurationsAboveMaximumRefused: definitions, in Go and in JSON, may
// not set durations beyond MaxDuration, and a succeed rule may not be
// guarded.
func TestDurationsAboveMaximumRefused(t *testing.T) {
	spec := m.QueueSpec()
	spec.Policy.LeaseTTL = 2562047 * time.Hour
	_, err := jobstate.NewDefinition(spec)
	assert.ErrorContains(t, err, "LeaseTTL")
	spec = m.QueueSpec()
	spec.Policy.Retry.Backoff = jobstate.ExponentialBackoff(time.Second, 2, jobstate.MaxDuration+1)
	_, err = jobstate.NewDefinition(spec)
	assert.ErrorContains(t, err, "Max")
	_, err = jobstate.ParseDefinition([]byte(`{"name": "x", "states": [{"name": "Q", "kind": "ready"}, {"name": "R", "kind": "active"}, {"name": "S", "kind": "terminal", "outcome": "succeeded"}, {"name": "F", "kind": "terminal", "outcome": "failed"}], "initial": "Q",
		"rules": [{"from": ["Q"], "event": "claim", "to": "R"}, {"from": ["R"], "event": "succeed", "to": "S"}, {"from": ["R"], "event": "fail", "to": "F"}],
		"policy": {"lease_ttl": "2562047h"}}`), jobstate.Registry{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidDefinition)
	assert.ErrorContains(t, err, "LeaseTTL")

	spec = m.QueueSpec()
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventSucceed {
			spec.Rules[i].Guard = func(context.Context, jobstate.GuardInput) error { return nil }
		}
	}
	_, err = jobstate.NewDefinition(spec)
	assert.ErrorContains(t, err, "cannot be guarded")
}
