package jobstate_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// TestJSONRoundTripGenericMachines: the generic machines, which name no
// code, survive MarshalSpec and ParseSpec unchanged, field for field.
func TestJSONRoundTripGenericMachines(t *testing.T) {
	for _, spec := range m.Generic() {
		out, err := jobstate.MarshalSpec(spec)
		require.NoError(t, err, spec.Name)
		back, err := jobstate.ParseSpec(out, jobstate.Registry{})
		require.NoError(t, err, spec.Name)
		assert.Equal(t, spec, back, spec.Name)
		_, err = jobstate.NewDefinition(back)
		require.NoError(t, err, spec.Name)
	}
}

// TestJSONRoundTripPolicyFlags sets each boolean policy field in turn, so
// a flag the JSON form forgets is caught.
func TestJSONRoundTripPolicyFlags(t *testing.T) {
	typ := reflect.TypeOf(jobstate.Policy{})
	for i := 0; i < typ.NumField(); i++ {
		if typ.Field(i).Type.Kind() != reflect.Bool {
			continue
		}
		spec := m.QueueSpec()
		reflect.ValueOf(&spec.Policy).Elem().Field(i).SetBool(true)
		out, err := jobstate.MarshalSpec(spec)
		require.NoError(t, err)
		back, err := jobstate.ParseSpec(out, jobstate.Registry{})
		require.NoError(t, err)
		assert.Equal(t, spec.Policy, back.Policy, typ.Field(i).Name)
	}
}

// The limit of live executions per concurrency key survives the JSON
// form, and a negative one is refused there as in Go.
func TestJSONMaxPerKey(t *testing.T) {
	spec := m.QueueSpec()
	spec.Policy.MaxPerKey = 2
	out, err := jobstate.MarshalSpec(spec)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"max_per_key":2`)
	back, err := jobstate.ParseSpec(out, jobstate.Registry{})
	require.NoError(t, err)
	assert.Equal(t, 2, back.Policy.MaxPerKey)
	_, err = jobstate.ParseDefinition([]byte(`{"name": "q", "initial": "a", "states": [{"name": "a", "kind": "terminal", "outcome": "succeeded"}], "policy": {"max_per_key": -1}}`), jobstate.Registry{})
	assert.ErrorContains(t, err, "policy MaxPerKey is negative (-1)")
}

func TestJSONShape(t *testing.T) {
	out, err := jobstate.MarshalSpec(m.ParkingSpec())
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out, &doc))
	assert.Equal(t, "parking", doc["name"])
	assert.Equal(t, "queued", doc["initial"])
	st := doc["states"].([]any)[3].(map[string]any)
	assert.Equal(t, map[string]any{"name": "failed", "kind": "waiting"}, st)
	pol := doc["policy"].(map[string]any)
	assert.Equal(t, map[string]any{
		"max_retries": 3.0,
		"backoff":     map[string]any{"kind": "exponential", "initial": "2s", "factor": 2.0, "max": "1m0s"},
	}, pol["retry"])
	assert.Equal(t, map[string]any{"release_in": []any{"failed", "dead_letter"}}, pol["idempotency"])
	assert.NotContains(t, doc, "create", "zero values are left out")
	assert.NotContains(t, doc, "effects")
}

// TestParseDefinitionValidatesLikeGo: a JSON definition gets exactly the
// problems NewDefinition finds in the same Spec built in Go.
func TestParseDefinitionValidatesLikeGo(t *testing.T) {
	spec := m.QueueSpec()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "LIMBO", Kind: jobstate.KindWaiting})
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{"SUCCEEDED"}, Event: "reopen", To: "QUEUED"})
	spec.Policy.LeaseTTL = -time.Second
	_, goErr := jobstate.NewDefinition(spec)
	require.Error(t, goErr)

	data, err := jobstate.MarshalSpec(spec)
	require.NoError(t, err)
	_, jsonErr := jobstate.ParseDefinition(data, jobstate.Registry{})
	require.Error(t, jsonErr)
	assert.Equal(t, goErr.Error(), jsonErr.Error())
	assert.Equal(t, "invalid_definition", jobstate.Code(jsonErr))

	def, err := jobstate.ParseDefinition(mustMarshal(t, m.QueueSpec()), jobstate.Registry{})
	require.NoError(t, err)
	assert.Equal(t, "queue", def.Name())
	assert.Equal(t, jobstate.DefaultLeaseTTL, def.Policy().LeaseTTL)
}

func mustMarshal(t *testing.T, s jobstate.Spec) []byte {
	t.Helper()
	out, err := jobstate.MarshalSpec(s)
	require.NoError(t, err)
	return out
}

func TestMarshalSpecRefusals(t *testing.T) {
	guard := func(context.Context, jobstate.GuardInput) error { return nil }
	effect := func(context.Context, jobstate.Job) error { return nil }
	classify := func(error) (jobstate.ErrorClass, time.Duration) { return jobstate.ClassNone, 0 }
	base := func() jobstate.Spec { return m.QueueSpec() }
	cases := []struct {
		name   string
		change func(*jobstate.Spec)
		want   string
	}{
		{"guard without a name", func(s *jobstate.Spec) { s.Rules[0].Guard = guard }, "rules[0].guard: the Guard has no GuardName"},
		{"name without a guard", func(s *jobstate.Spec) { s.Rules[1].GuardName = "owner" }, `rules[1].guard: GuardName "owner" names no Guard function`},
		{"effect without a name", func(s *jobstate.Spec) { s.Rules[2].Effect = effect }, "rules[2].effect: the Effect has no EffectName"},
		{"create effect name only", func(s *jobstate.Spec) { s.Create.EffectName = "credit" }, `create.effect: EffectName "credit" names no Effect`},
		{"create guard unnamed", func(s *jobstate.Spec) { s.Create.Guard = guard }, "create.guard: the Guard has no GuardName"},
		{"effect guard unnamed", func(s *jobstate.Spec) {
			s.Effects = []jobstate.EffectSpec{{Name: "x", Guard: guard}}
		}, "effects[0].guard: the Guard has no GuardName"},
		{"run unknown", func(s *jobstate.Spec) {
			s.Effects = []jobstate.EffectSpec{{Name: "refund", Run: effect}}
		}, "effects[0].run: the Run has no RunName to write it by"},
		{"classifier unknown", func(s *jobstate.Spec) { s.Policy.Classify = classify }, "policy.classify: the Classify has no ClassifyName to write it by"},
		{"invalid kind", func(s *jobstate.Spec) { s.States[0].Kind = 42 }, "states[0].kind: invalid kind 42"},
		{"NaN factor", func(s *jobstate.Spec) { s.Policy.Retry.Backoff.Factor = math.NaN() }, "policy.retry.backoff.factor: NaN cannot be written"},
		{"infinite factor", func(s *jobstate.Spec) { s.Policy.Retry.Backoff.Factor = math.Inf(1) }, "policy.retry.backoff.factor: +Inf cannot be written"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.change(&s)
			_, err := jobstate.MarshalSpec(s)
			require.Error(t, err)
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A spec MarshalSpec cannot write is reported with every problem.
	s := base()
	s.Rules[0].Guard = guard
	s.Policy.Classify = classify
	_, err := jobstate.MarshalSpec(s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rules[0].guard")
	assert.Contains(t, err.Error(), "policy.classify")

	// A zero kind is written as absent, so that any Spec ParseSpec can
	// return can be written back.
	s = base()
	s.States[0].Kind = 0
	out, err := jobstate.MarshalSpec(s)
	require.NoError(t, err)
	back, err := jobstate.ParseSpec(out, jobstate.Registry{})
	require.NoError(t, err)
	assert.Equal(t, jobstate.Kind(0), back.States[0].Kind)
}

func httpLike(err error) (jobstate.ErrorClass, time.Duration) {
	if err.Error() == "404" {
		return jobstate.ClassPermanent, 0
	}
	return jobstate.ClassNone, 0
}

// TestMarshalSpecClassifierName: a classifier is written by the
// ClassifyName ParseSpec set, and a classifier without a name is refused.
func TestMarshalSpecClassifierName(t *testing.T) {
	reg := jobstate.Registry{Classifiers: map[string]jobstate.Classifier{"http-like": httpLike}}
	data := `{"name": "c", "states": [{"name": "A", "kind": "initial"}, {"name": "Z", "kind": "terminal", "outcome": "failed"}],
		"rules": [{"from": ["A"], "event": "go", "to": "Z"}], "policy": {"classify": "http-like"}}`
	spec, err := jobstate.ParseSpec([]byte(data), reg)
	require.NoError(t, err)
	assert.Equal(t, "http-like", spec.Policy.ClassifyName)
	out, err := jobstate.MarshalSpec(spec)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"classify":"http-like"`)

	hand := m.QueueSpec()
	hand.Policy.Classify = httpLike
	_, err = jobstate.MarshalSpec(hand)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a classifier needs its name")
	hand.Policy.ClassifyName = "http-like"
	out, err = jobstate.MarshalSpec(hand)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"classify":"http-like"`)
}

func TestDefinitionMarshalJSON(t *testing.T) {
	d := m.Queue()
	out, err := json.Marshal(d)
	require.NoError(t, err)
	var doc struct {
		Initial string
		Policy  map[string]any
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	assert.Equal(t, "CREATED", doc.Initial, "the initial state is named")
	assert.Equal(t, "30s", doc.Policy["lease_ttl"])
	assert.Equal(t, 1.0, doc.Policy["max_executions"], "defaults are filled in")

	var nilDef *jobstate.Definition
	out, err = nilDef.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, "null", string(out))
	out, err = json.Marshal(struct{ D *jobstate.Definition }{})
	require.NoError(t, err)
	assert.Equal(t, `{"D":null}`, string(out))

	// A machine whose effect Run has no registry name cannot be written:
	// the bounty marketplace with a refund that has no name.
	h := bounty.Plain()
	h.Refund = hook.Effect{Func: func(context.Context, jobstate.Job) error { return nil }}
	_, err = json.Marshal(m.Must(bounty.Spec(h)))
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}
