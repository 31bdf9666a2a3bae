package jobstate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// states converts names to states.
var states = machines.States

// base is a small valid machine that the validation cases break.
var base = machines.SmallSpec

func TestValidDefinition(t *testing.T) {
	d, err := jobstate.NewDefinition(base())
	require.NoError(t, err)
	assert.Equal(t, "base", d.Name())
	assert.Equal(t, jobstate.State("new"), d.Initial())
	assert.True(t, d.Can("ready", jobstate.EventClaim))
	assert.False(t, d.Can("ok", jobstate.EventClaim))
	assert.Equal(t, []jobstate.Event{jobstate.EventSucceed, jobstate.EventFail}, d.Events("run"))
	assert.Equal(t, jobstate.DefaultLeaseTTL, d.Policy().LeaseTTL)
	assert.Equal(t, 1, d.Policy().MaxExecutions)
}

func TestDefinitionIsImmutable(t *testing.T) {
	spec := base()
	d, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	spec.States[1].Name = "changed"
	spec.Rules[1].From[0] = "changed"
	spec.Rules[1].To = "bad"
	assert.True(t, d.Can("ready", jobstate.EventClaim), "changing the spec afterwards changes nothing")
	got := d.Rules()
	got[1].From[0] = "tampered"
	got[1].To = "tampered"
	assert.Equal(t, jobstate.State("ready"), d.Rules()[1].From[0], "returned slices are copies")
	st := d.States()
	st[0].Name = "tampered"
	assert.Equal(t, jobstate.State("new"), d.States()[0].Name)
}

// TestValidationProblems checks that each rule of a valid table is
// enforced with a message naming the state or rule at fault.
func TestValidationProblems(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*jobstate.Spec)
		want   string
	}{
		{"empty name", func(s *jobstate.Spec) { s.Name = " " }, "machine name is empty"},
		{"no states", func(s *jobstate.Spec) { s.States = nil; s.Rules = nil }, "no states declared"},
		{"unknown from state", func(s *jobstate.Spec) { s.Rules[0].From = states("nowhere") }, `rule #1 (nowhere --submit--> ready) leaves unknown state "nowhere"`},
		{"unknown target", func(s *jobstate.Spec) { s.Rules[0].To = "nowhere" }, `targets unknown state "nowhere"`},
		{"duplicate rule", func(s *jobstate.Spec) { s.Rules = append(s.Rules, s.Rules[0]) }, "rule #5 (new --submit--> ready) duplicates rule #1 (new --submit--> ready)"},
		{"ambiguous rule", func(s *jobstate.Spec) {
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: "submit", To: "bad"})
		}, `rule #1 (new --submit--> ready) is ambiguous: unguarded, it hides rule #5 (new --submit--> bad) for event "submit" from "new"`},
		{"unreachable state", func(s *jobstate.Spec) {
			s.States = append(s.States, jobstate.StateSpec{Name: "island", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed})
		}, `state "island" is unreachable from initial state "new"`},
		{"dead end", func(s *jobstate.Spec) {
			s.States = append(s.States, jobstate.StateSpec{Name: "limbo", Kind: jobstate.KindInitial})
			s.Initial = "new"
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: "park", To: "limbo"})
		}, `non-terminal state "limbo" has no outgoing rule (a dead end)`},
		{"no way to finish", func(s *jobstate.Spec) {
			s.States = append(s.States, jobstate.StateSpec{Name: "p", Kind: jobstate.KindInitial}, jobstate.StateSpec{Name: "q", Kind: jobstate.KindInitial})
			s.Initial = "new"
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: "loop", To: "p"},
				jobstate.Rule{From: states("p"), Event: "loop", To: "q"}, jobstate.Rule{From: states("q"), Event: "loop", To: "p"})
		}, `non-terminal state "p" cannot reach any terminal state`},
		{"terminal with outgoing rule", func(s *jobstate.Spec) {
			s.Rules = append(s.Rules, jobstate.Rule{From: states("ok"), Event: "reopen", To: "ready"})
		}, `leaves terminal state "ok"; nothing may leave a terminal state`},
		{"no initial state", func(s *jobstate.Spec) { s.States[0].Kind = jobstate.KindReady }, "no initial state"},
		{"terminal without outcome", func(s *jobstate.Spec) { s.States[3].Outcome = "" }, `terminal state "ok" has no outcome`},
		{"outcome on non-terminal", func(s *jobstate.Spec) { s.States[1].Outcome = jobstate.OutcomeFailed }, `state "ready" is ready but has outcome "failed"`},
		{"invalid kind", func(s *jobstate.Spec) { s.States[1].Kind = 0 }, `state "ready" has invalid kind Kind(0)`},
		{"state declared twice", func(s *jobstate.Spec) { s.States = append(s.States, s.States[1]) }, `state "ready" is declared twice`},
		{"claim from non-ready", func(s *jobstate.Spec) {
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: jobstate.EventClaim, To: "run"})
		}, `"claim" must leave a ready state, not initial state "new"`},
		{"active entered without claim", func(s *jobstate.Spec) {
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: "jump", To: "run"})
		}, `enters active state "run" from initial state "new"`},
		{"succeed into failure", func(s *jobstate.Spec) { s.Rules[2].To = "bad" }, `"succeed" must enter a terminal state with outcome "succeeded"`},
		{"ready without claim", func(s *jobstate.Spec) {
			s.States = append(s.States, jobstate.StateSpec{Name: "idle", Kind: jobstate.KindReady})
			s.Rules = append(s.Rules, jobstate.Rule{From: states("new"), Event: "idle", To: "idle"}, jobstate.Rule{From: states("idle"), Event: "wake", To: "ready"})
		}, `ready state "idle" has no "claim" rule`},
		{"active without fail", func(s *jobstate.Spec) { s.Rules = s.Rules[:3] }, `active state "run" has no "fail" rule`},
		{"retries without a retry rule", func(s *jobstate.Spec) { s.Policy.Retry.MaxRetries = 2 }, `active state "run" has no "retry" or "abandon" rule, but the retry policy allows retries`},
		{"waiting without requeue", func(s *jobstate.Spec) {
			s.States = append(s.States, jobstate.StateSpec{Name: "wait", Kind: jobstate.KindWaiting})
			s.Rules = append(s.Rules, jobstate.Rule{From: states("run"), Event: jobstate.EventRetry, To: "wait"}, jobstate.Rule{From: states("wait"), Event: "give_up", To: "bad"})
		}, `waiting state "wait" has no "requeue" rule`},
		{"self-loop claim on a single-execution machine", func(s *jobstate.Spec) { s.Rules[1].To = "ready" }, `which only a machine allowing several concurrent executions (Policy.MaxExecutions > 1) may do`},
		{"bad backoff", func(s *jobstate.Spec) { s.Policy.Retry.Backoff = jobstate.Backoff{Kind: "fibonacci"} }, `policy Retry: unknown backoff kind "fibonacci"`},
		{"negative lease", func(s *jobstate.Spec) { s.Policy.LeaseTTL = -time.Second }, "policy LeaseTTL is negative"},
		{"negative limit per key", func(s *jobstate.Spec) { s.Policy.MaxPerKey = -1 }, "policy MaxPerKey is negative (-1)"},
		{"release in unknown state", func(s *jobstate.Spec) { s.Policy.Idempotency.ReleaseIn = states("gone") }, `policy Idempotency.ReleaseIn names unknown state "gone"`},
		{"derived with user events", func(s *jobstate.Spec) { s.Policy.DerivedState = true }, `user event "submit" is not allowed`},
		{"effect without run", func(s *jobstate.Spec) { s.Effects = []jobstate.EffectSpec{{Name: "refund"}} }, `effect "refund" has no Run function`},
		{"reserved effect name", func(s *jobstate.Spec) {
			s.Effects = []jobstate.EffectSpec{{Name: jobstate.RedriveEffect, Run: func(context.Context, jobstate.Job) error { return nil }}}
		}, `effect "redrive": the name is reserved`},
		{"empty event", func(s *jobstate.Spec) { s.Rules[0].Event = "" }, "has an empty event"},
		{"redrive from a live state", func(s *jobstate.Spec) { s.Policy.RedriveFrom = states("ready") }, `policy RedriveFrom names ready state "ready"; only terminal jobs are redriven`},
		{"redrive from an unknown state", func(s *jobstate.Spec) { s.Policy.RedriveFrom = states("gone") }, `policy RedriveFrom names unknown state "gone"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base()
			tc.mutate(&spec)
			d, err := jobstate.NewDefinition(spec)
			require.Error(t, err)
			assert.Nil(t, d)
			assert.ErrorIs(t, err, jobstate.ErrInvalidDefinition)
			var de *jobstate.DefinitionError
			require.ErrorAs(t, err, &de)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	spec := base()
	spec.States[3].Outcome = ""
	spec.Rules[0].To = "nowhere"
	spec.Policy.LeaseTTL = -1
	_, err := jobstate.NewDefinition(spec)
	var de *jobstate.DefinitionError
	require.ErrorAs(t, err, &de)
	assert.GreaterOrEqual(t, len(de.Problems), 3)
	msg := err.Error()
	for _, want := range []string{`terminal state "ok" has no outcome`, `targets unknown state "nowhere"`, "LeaseTTL is negative"} {
		assert.Contains(t, msg, want)
	}
}

func TestGuardedRulesTriedInOrder(t *testing.T) {
	spec := guardedSpec()
	d, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	job := jobstate.Job{Machine: "base", State: "new", Kind: jobstate.KindInitial, Version: 1}
	a, b := job, job
	_, err = d.Step(context.Background(), &a, jobstate.Input{Event: "submit", Actor: "vip"})
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("vip"), a.State)
	_, err = d.Step(context.Background(), &b, jobstate.Input{Event: "submit", Actor: "joe"})
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("ready"), b.State, "the unguarded rule after the refusing guard fires")
}

func TestStep(t *testing.T) {
	def := m.Queue()
	ctx := context.Background()
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	job := jobstate.Job{Machine: "queue", State: m.Queued, Kind: jobstate.KindReady, Version: 4}
	next := job
	rec, err := def.Step(ctx, &next, jobstate.Input{Event: jobstate.EventClaim, Actor: "w", Reason: "go", Now: at})
	require.NoError(t, err)
	assert.Equal(t, m.Running, next.State)
	assert.Equal(t, jobstate.KindActive, next.Kind)
	assert.Equal(t, int64(5), next.Version)
	assert.Equal(t, at, next.StartedAt)
	assert.Equal(t, at, next.UpdatedAt)
	assert.Equal(t, jobstate.Transition{Version: 5, From: m.Queued, Event: jobstate.EventClaim, To: m.Running, Actor: "w", Reason: "go", At: at}, rec)
	assert.Equal(t, m.Queued, job.State, "the original is untouched")

	rec, err = def.Step(ctx, &next, jobstate.Input{Event: jobstate.EventSucceed, Now: at.Add(time.Second)})
	require.NoError(t, err)
	assert.Equal(t, jobstate.EventSucceed, rec.Event)
	assert.Equal(t, jobstate.OutcomeSucceeded, next.Outcome)
	assert.Equal(t, at.Add(time.Second), next.CompletedAt)
	assert.Equal(t, at, next.StartedAt, "StartedAt is kept")

	_, err = def.Step(ctx, nil, jobstate.Input{Event: jobstate.EventClaim})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a nil job is refused, not dereferenced")

	for _, tc := range []struct {
		job  jobstate.Job
		ev   jobstate.Event
		want error
	}{
		{next, jobstate.EventClaim, jobstate.ErrTerminal},
		{job, "submit", jobstate.ErrInvalidTransition},
		{jobstate.Job{Machine: "other", State: m.Queued}, jobstate.EventClaim, jobstate.ErrInvalidArgument},
		{jobstate.Job{Machine: "queue", State: "NOPE"}, jobstate.EventClaim, jobstate.ErrInvalidArgument},
	} {
		before := tc.job
		_, err := def.Step(ctx, &tc.job, jobstate.Input{Event: tc.ev})
		assert.ErrorIs(t, err, tc.want)
		assert.Equal(t, before, tc.job, "a refused step leaves the job unchanged")
	}
}

func TestReplay(t *testing.T) {
	def := m.Queue()
	rec := func(v int64, from jobstate.State, ev jobstate.Event, to jobstate.State) jobstate.Transition {
		return jobstate.Transition{Version: v, From: from, Event: ev, To: to}
	}
	good := []jobstate.Transition{rec(1, "", jobstate.EventCreate, m.Created), rec(2, m.Created, m.Submit, m.Queued), rec(4, m.Queued, jobstate.EventClaim, m.Running)}
	st, err := def.Replay(good)
	require.NoError(t, err)
	assert.Equal(t, m.Running, st)

	bad := map[string][]jobstate.Transition{
		"empty":              nil,
		"no creation":        good[1:],
		"gap in states":      {good[0], good[2]},
		"version not rising": {good[0], good[1], rec(2, m.Queued, jobstate.EventClaim, m.Running)},
		"not a rule":         {good[0], rec(2, m.Created, jobstate.EventClaim, m.Running)},
		"leaves terminal":    {good[0], good[1], rec(3, m.Queued, jobstate.EventCancel, m.Failed), rec(4, m.Failed, m.Submit, m.Queued)},
	}
	for name, h := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := def.Replay(h)
			assert.Error(t, err)
		})
	}
}

func TestKindText(t *testing.T) {
	for k := jobstate.KindInitial; k <= jobstate.KindTerminal; k++ {
		b, err := k.MarshalText()
		require.NoError(t, err)
		var back jobstate.Kind
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, k, back)
	}
	var k jobstate.Kind
	assert.Error(t, k.UnmarshalText([]byte("sleepy")))
	_, err := jobstate.Kind(0).MarshalText()
	assert.Error(t, err)
	assert.True(t, strings.HasPrefix(fmt.Sprint(jobstate.Kind(9)), "Kind("))
}

// guardedSpec is base with two rules for the same event from the same
// state, the first guarded: the lookups must try them in table order.
var guardedSpec = machines.GuardedSpec
