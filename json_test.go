package jobstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// vectorDefinitions returns the definition of every conformance vector.
func vectorDefinitions(t testing.TB) map[string][]byte {
	t.Helper()
	vs, err := conformance.Vectors()
	require.NoError(t, err)
	out := make(map[string][]byte, len(vs))
	for _, v := range vs {
		out[v.Name] = v.Definition
	}
	return out
}

// TestJSONRoundTripVectors: for every definition the vectors use,
// MarshalSpec(ParseSpec(x)) is equivalent to x, parses back to the same
// Spec, and a Definition's JSON loads to the same machine.
func TestJSONRoundTripVectors(t *testing.T) {
	reg := conformance.NewRegistry()
	parsed := 0
	for name, def := range vectorDefinitions(t) {
		spec, err := jobstate.ParseSpec(def, reg)
		if err != nil {
			require.ErrorIs(t, err, jobstate.ErrInvalidDefinition, name)
			continue // a vector of an unparsable definition
		}
		parsed++
		out, err := jobstate.MarshalSpec(spec)
		require.NoError(t, err, name)
		assert.Equal(t, canonical(t, def), canonical(t, out), "%s: MarshalSpec(ParseSpec(x)) is not equivalent to x", name)

		again, err := jobstate.ParseSpec(out, reg)
		require.NoError(t, err, name)
		out2, err := jobstate.MarshalSpec(again)
		require.NoError(t, err, name)
		assert.JSONEq(t, string(out), string(out2), name)

		d, err := jobstate.NewDefinition(spec)
		if err != nil {
			continue // a vector of an invalid definition
		}
		dj, err := json.Marshal(d)
		require.NoError(t, err, name)
		d2, err := jobstate.ParseDefinition(dj, reg)
		require.NoError(t, err, name)
		assert.Equal(t, d.States(), d2.States(), name)
		assert.Equal(t, d.Initial(), d2.Initial(), name)
		assert.Equal(t, len(d.Rules()), len(d2.Rules()), name)
		dj2, err := json.Marshal(d2)
		require.NoError(t, err, name)
		assert.JSONEq(t, string(dj), string(dj2), name)
	}
	assert.Greater(t, parsed, 40)
}

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

func TestParseSpecResolvesNames(t *testing.T) {
	reg := conformance.NewRegistry()
	spec, err := jobstate.ParseSpec([]byte(`{
		"name": "b", "initial": "open",
		"states": [{"name": "open", "kind": "initial"}, {"name": "done", "kind": "terminal", "outcome": "cancelled"}],
		"rules": [{"from": ["open"], "event": "cancel", "to": "done", "guard": "owner_only", "effect": "count", "description": "d"}],
		"policy": {"lease_ttl": "1m30s", "classify": "http", "idempotency": {"retention": "24h"}},
		"create": {"guard": "even_arg", "effect": "count"},
		"effects": [{"name": "count", "in": ["done"], "guard": "owner_only"}]
	}`), reg)
	require.NoError(t, err)
	r := spec.Rules[0]
	assert.NotNil(t, r.Guard)
	assert.Equal(t, "owner_only", r.GuardName)
	assert.NotNil(t, r.Effect)
	assert.Equal(t, "count", r.EffectName)
	assert.Equal(t, "d", r.Description)
	assert.Equal(t, 90*time.Second, spec.Policy.LeaseTTL)
	assert.Equal(t, 24*time.Hour, spec.Policy.Idempotency.Retention)
	require.NotNil(t, spec.Policy.Classify)
	class, after := spec.Policy.Classify(errors.New("429"))
	assert.Equal(t, jobstate.ClassRetryable, class)
	assert.Equal(t, 7*time.Second, after)
	assert.Equal(t, "even_arg", spec.Create.GuardName)
	assert.Equal(t, "count", spec.Create.EffectName)
	require.Len(t, spec.Effects, 1)
	assert.NotNil(t, spec.Effects[0].Run, "run defaults to the effect's name")
	assert.Equal(t, "owner_only", spec.Effects[0].GuardName)

	// The guard resolved is the registry's.
	err = r.Guard(context.Background(), jobstate.GuardInput{Actor: "a", Job: jobstate.Job{Owner: "b"}})
	assert.ErrorIs(t, err, conformance.ErrNotOwner)

	// The classifier and the effect's Run are written back by name.
	out, err := jobstate.MarshalSpec(spec)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"classify":"http"`)
	assert.Contains(t, string(out), `"run":"count"`)
}

// parseProblems parses data and returns the problems of its error, which
// must be a *DefinitionError with code invalid_definition.
func parseProblems(t *testing.T, data string, reg jobstate.Registry) []string {
	t.Helper()
	_, err := jobstate.ParseSpec([]byte(data), reg)
	require.Error(t, err, data)
	assert.ErrorIs(t, err, jobstate.ErrInvalidDefinition)
	assert.Equal(t, "invalid_definition", jobstate.Code(err))
	var de *jobstate.DefinitionError
	require.ErrorAs(t, err, &de)
	require.NotEmpty(t, de.Problems)
	return de.Problems
}

func TestParseSpecErrors(t *testing.T) {
	reg := conformance.NewRegistry()
	const states = `"states": [{"name": "A", "kind": "initial"}, {"name": "Z", "kind": "terminal", "outcome": "failed"}]`
	const rules = `"rules": [{"from": ["A"], "event": "go", "to": "Z"}]`
	cases := []struct {
		name, data string
		want       []string
	}{
		{"empty", ``, []string{"invalid JSON: empty input"}},
		{"blank", "  \n", []string{"invalid JSON: empty input"}},
		{"truncated", `{"name": "x"`, []string{"invalid JSON: unexpected end of input"}},
		{"syntax", `{"name": x}`, []string{"invalid JSON at byte offset"}},
		{"trailing", `{"name": "x"} {}`, []string{"unexpected data after the definition object"}},
		{"null", `null`, []string{"a definition is a JSON object, not null"}},
		{"array", `[]`, []string{"a definition is a JSON object, not an array"}},
		{"string", `"queue"`, []string{"a definition is a JSON object, not a string"}},
		{"unknown field", `{"name": "x", "nmae": "y"}`, []string{`definition: unknown field "nmae"`}},
		{"keys are exact", `{"Name": "x"}`, []string{`definition: unknown field "Name"`}},
		{"nested unknown field", `{"name": "x", "policy": {"retry": {"max_retry": 1}}}`, []string{`policy.retry: unknown field "max_retry"`}},
		{"unknown field in a list", `{"name": "x", ` + states + `, "rules": [{"from": ["A"], "event": "go", "to": "Z", "when": 1}]}`,
			[]string{`rules[0]: unknown field "when"`}},
		{"wrong type", `{"name": 7}`, []string{"name: want a string, not a number"}},
		{"wrong type in a list", `{"name": "x", "states": [{"name": "A", "kind": 1}]}`, []string{"states[0].kind: want a string, not a number"}},
		{"from is a list", `{"name": "x", "rules": [{"from": "A"}]}`, []string{"rules[0].from: want an array, not a string"}},
		{"fraction for an integer", `{"name": "x", "policy": {"max_executions": 1.5}}`, []string{"policy.max_executions: 1.5 is not an integer in range"}},
		{"integer overflow", `{"name": "x", "policy": {"retry": {"max_retries": 1e40}}}`, []string{"policy.retry.max_retries: 1e40 is not an integer in range"}},
		{"float overflow", `{"name": "x", "policy": {"retry": {"backoff": {"factor": 1e400}}}}`, []string{"policy.retry.backoff.factor: 1e400 is out of range"}},
		{"bool", `{"name": "x", "policy": {"lazy_expiry": "yes"}}`, []string{"policy.lazy_expiry: want true or false, not a string"}},
		{"every shape problem", `{"name": 1, "states": {}, "x": 2}`, []string{"name: want a string", "states: want an array", `unknown field "x"`}},
		{"unknown kind", `{"name": "x", "states": [{"name": "A", "kind": "queued"}]}`, []string{`states[0].kind: unknown kind "queued"`}},
		{"bad lease_ttl", `{"name": "x", "policy": {"lease_ttl": "5 s"}}`, []string{`policy.lease_ttl: invalid duration "5 s"`}},
		{"bad backoff durations", `{"name": "x", "policy": {"retry": {"backoff": {"initial": "1", "max": "1y"}}}}`,
			[]string{`policy.retry.backoff.initial: invalid duration "1"`, `policy.retry.backoff.max: invalid duration "1y"`}},
		{"bad retention", `{"name": "x", "policy": {"idempotency": {"retention": "forever"}}}`, []string{`policy.idempotency.retention: invalid duration "forever"`}},
		{"duration overflow", `{"name": "x", "policy": {"lease_ttl": "99999999999h"}}`, []string{`policy.lease_ttl: invalid duration`}},
		{"unknown guard", `{"name": "x", "rules": [{"from": ["A"], "event": "go", "to": "Z", "guard": "admin"}]}`,
			[]string{`rules[0].guard: unknown guard "admin" (the registry has "attempt_below_3", "even_arg", "no_live_executions", "not_owner", "owner_and_no_live_executions", "owner_only", "retries_below_3")`}},
		{"unknown rule effect", `{"name": "x", "rules": [{"from": ["A"], "event": "go", "to": "Z", "effect": "mail"}]}`, []string{`rules[0].effect: unknown effect "mail"`}},
		{"unknown create guard and effect", `{"name": "x", "create": {"guard": "g", "effect": "e"}}`,
			[]string{`create.guard: unknown guard "g"`, `create.effect: unknown effect "e"`}},
		{"unknown classifier", `{"name": "x", "policy": {"classify": "grpc"}}`, []string{`policy.classify: unknown classifier "grpc"`}},
		{"unknown effect run", `{"name": "x", "effects": [{"name": "refund", "run": "pay"}]}`, []string{`effects[0].run: unknown effect "pay"`}},
		{"effect run defaults to its name", `{"name": "x", "effects": [{"name": "refund"}]}`, []string{`effects[0].run: unknown effect "refund"`}},
		{"unknown effect guard", `{"name": "x", "effects": [{"name": "count", "guard": "g"}]}`, []string{`effects[0].guard: unknown guard "g"`}},
		{"machine named", `{"name": "mine", ` + rules + `, "policy": {"classify": "nope"}}`, []string{`unknown classifier "nope"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := strings.Join(parseProblems(t, tc.data, reg), "\n")
			for _, w := range tc.want {
				assert.Contains(t, problems, w)
			}
		})
	}

	// An empty registry names no code; a nil function is no function.
	problems := parseProblems(t, `{"name": "x", "rules": [{"guard": "g"}]}`, jobstate.Registry{})
	assert.Equal(t, []string{`rules[0].guard: unknown guard "g" (the registry has none)`}, problems)
	problems = parseProblems(t, `{"name": "x", "rules": [{"guard": "g"}]}`, jobstate.Registry{Guards: map[string]jobstate.Guard{"g": nil}})
	assert.Contains(t, problems[0], `unknown guard "g"`)

	// The machine's name is kept in the error when it could be read.
	_, err := jobstate.ParseSpec([]byte(`{"name": "mine", "policy": {"classify": "nope"}}`), reg)
	var de *jobstate.DefinitionError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "mine", de.Machine)
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

// checkParse is the property every input must satisfy: ParseSpec does not
// panic; it fails with a *DefinitionError, or returns a Spec that
// MarshalSpec writes and ParseSpec reads back to the same JSON, and that
// NewDefinition judges without panicking.
func checkParse(t interface{ Fatalf(string, ...any) }, data []byte) {
	reg := conformance.NewRegistry()
	spec, err := jobstate.ParseSpec(data, reg)
	if err != nil {
		var de *jobstate.DefinitionError
		if !errors.As(err, &de) || !errors.Is(err, jobstate.ErrInvalidDefinition) || len(de.Problems) == 0 {
			t.Fatalf("ParseSpec(%q): error %v is not a *DefinitionError with problems", data, err)
		}
		return
	}
	if _, err := jobstate.NewDefinition(spec); err != nil && !errors.Is(err, jobstate.ErrInvalidDefinition) {
		t.Fatalf("NewDefinition: %v", err)
	}
	out, err := jobstate.MarshalSpec(spec)
	if err != nil {
		if math.IsInf(spec.Policy.Retry.Backoff.Factor, 0) {
			return
		}
		t.Fatalf("MarshalSpec of %q: %v", data, err)
	}
	back, err := jobstate.ParseSpec(out, reg)
	if err != nil {
		t.Fatalf("ParseSpec(MarshalSpec(ParseSpec(%q))) = %v\n%s", data, err, out)
	}
	out2, err := jobstate.MarshalSpec(back)
	if err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("round trip of %q changed:\n%s\n%s (%v)", data, out, out2, err)
	}
}

// TestParseSpecNeverPanics feeds random definitions, random JSON and
// mutated vector definitions to ParseSpec.
func TestParseSpecNeverPanics(t *testing.T) {
	var seeds [][]byte
	for _, d := range vectorDefinitions(t) {
		seeds = append(seeds, d)
	}
	rapid.Check(t, func(t *rapid.T) {
		var data []byte
		switch rapid.IntRange(0, 2).Draw(t, "source") {
		case 0:
			v := genDefinition(t)
			data, _ = json.Marshal(v)
		case 1:
			data, _ = json.Marshal(genJSON(t, 4))
		case 2:
			data = mutate(t, rapid.SampledFrom(seeds).Draw(t, "seed"))
		}
		checkParse(t, data)
	})
}

var (
	stateNames = []string{"A", "B", "C", "QUEUED", "RUNNING", "DONE", ""}
	kindNames  = []string{"initial", "ready", "active", "waiting", "terminal", "", "queued", "Terminal"}
	outcomes   = []string{"", "succeeded", "failed", "cancelled", "expired", "rejected", "dead_lettered", "vanished"}
	events     = []string{"claim", "succeed", "retry", "fail", "exhaust", "requeue", "abandon", "expire", "cancel", "go", ""}
	codeNames  = []string{"", "owner_only", "even_arg", "count", "fail_effect", "http", "nope"}
	durations  = []string{"", "0", "1s", "1m30s", "-5s", "1.5h", "5 s", "1y", "99999999999h", "300ms", "1ns"}
	fieldNames = []string{"name", "initial", "states", "rules", "policy", "create", "effects", "kind", "outcome",
		"description", "from", "event", "to", "guard", "effect", "lease_ttl", "max_executions", "max_per_key", "retry",
		"max_retries", "backoff", "factor", "max", "jitter", "classify", "fail_on_lease_loss", "lazy_expiry",
		"derived_state", "idempotency", "retention", "release_in", "in", "run", "Name", "x"}
)

// genDefinition draws a definition-shaped JSON value, sometimes with a
// subtree replaced by random JSON.
func genDefinition(t *rapid.T) map[string]any {
	pick := func(list []string, label string) string { return rapid.SampledFrom(list).Draw(t, label) }
	opt := func(label string) bool { return rapid.Bool().Draw(t, label) }
	d := map[string]any{"name": pick([]string{"m", "", " "}, "name")}
	if opt("has initial") {
		d["initial"] = pick(stateNames, "initial")
	}
	var states []any
	for i := rapid.IntRange(0, 6).Draw(t, "states"); i > 0; i-- {
		s := map[string]any{"name": pick(stateNames, "state"), "kind": pick(kindNames, "kind")}
		if o := pick(outcomes, "outcome"); o != "" {
			s["outcome"] = o
		}
		states = append(states, s)
	}
	d["states"] = states
	var rules []any
	for i := rapid.IntRange(0, 8).Draw(t, "rules"); i > 0; i-- {
		r := map[string]any{
			"from":  []any{pick(stateNames, "from")},
			"event": pick(events, "event"),
			"to":    pick(stateNames, "to"),
		}
		if g := pick(codeNames, "guard"); g != "" {
			r["guard"] = g
		}
		if e := pick(codeNames, "effect"); e != "" {
			r["effect"] = e
		}
		rules = append(rules, r)
	}
	d["rules"] = rules
	if opt("has policy") {
		p := map[string]any{
			"lease_ttl":      pick(durations, "lease_ttl"),
			"max_executions": rapid.IntRange(-2, 4).Draw(t, "max_executions"),
			"max_per_key":    rapid.IntRange(-2, 4).Draw(t, "max_per_key"),
			"retry": map[string]any{
				"max_retries": rapid.IntRange(-3, 5).Draw(t, "max_retries"),
				"backoff": map[string]any{
					"kind":    pick([]string{"", "fixed", "exponential", "linear"}, "backoff kind"),
					"initial": pick(durations, "initial"),
					"factor":  rapid.SampledFrom([]float64{0, 0.5, 1, 2, 1e308}).Draw(t, "factor"),
					"max":     pick(durations, "max"),
					"jitter":  pick([]string{"", "full", "equal", "some"}, "jitter"),
				},
			},
			"fail_on_lease_loss": opt("fail_on_lease_loss"),
			"lazy_expiry":        opt("lazy_expiry"),
			"derived_state":      opt("derived_state"),
			"idempotency":        map[string]any{"retention": pick(durations, "retention"), "release_in": []any{pick(stateNames, "release_in")}},
		}
		if c := pick(codeNames, "classify"); c != "" {
			p["classify"] = c
		}
		d["policy"] = p
	}
	if opt("has create") {
		d["create"] = map[string]any{"guard": pick(codeNames, "create guard"), "effect": pick(codeNames, "create effect")}
	}
	if opt("has effects") {
		d["effects"] = []any{map[string]any{"name": pick(codeNames, "effect name"), "in": []any{pick(stateNames, "in")},
			"guard": pick(codeNames, "effect guard"), "run": pick(codeNames, "run")}}
	}
	if opt("corrupt") {
		d[pick(fieldNames, "corrupt field")] = genJSON(t, 2)
	}
	return d
}

// genJSON draws any JSON value of at most the given depth.
func genJSON(t *rapid.T, depth int) any {
	kinds := 5
	if depth > 0 {
		kinds = 7
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "json kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.SampledFrom([]any{0, -1, 1.5, 1e300, 9007199254740993, math.MaxInt64}).Draw(t, "number")
	case 3:
		return rapid.SampledFrom(append(append([]string{}, fieldNames...), durations...)).Draw(t, "string")
	case 4:
		return rapid.String().Draw(t, "any string")
	case 5:
		var out []any
		for i := rapid.IntRange(0, 3).Draw(t, "len"); i > 0; i-- {
			out = append(out, genJSON(t, depth-1))
		}
		return out
	default:
		out := map[string]any{}
		for i := rapid.IntRange(0, 4).Draw(t, "len"); i > 0; i-- {
			out[rapid.SampledFrom(fieldNames).Draw(t, "key")] = genJSON(t, depth-1)
		}
		return out
	}
}

// mutate applies a few random byte edits to data.
func mutate(t *rapid.T, data []byte) []byte {
	out := append([]byte(nil), data...)
	for n := rapid.IntRange(1, 4).Draw(t, "edits"); n > 0 && len(out) > 0; n-- {
		i := rapid.IntRange(0, len(out)-1).Draw(t, "at")
		switch rapid.IntRange(0, 3).Draw(t, "edit") {
		case 0:
			out[i] = rapid.SampledFrom([]byte(`{}[]",:0123456789-.eEtfn \`)).Draw(t, "byte")
		case 1:
			out = append(out[:i], out[i+1:]...)
		case 2:
			ins := rapid.SampledFrom([]string{`"x"`, `null`, `-1`, `[]`, `{}`, `,`, `"1s"`}).Draw(t, "insert")
			out = append(out[:i], append([]byte(ins), out[i:]...)...)
		default:
			out = out[:i]
		}
	}
	return out
}

// FuzzParseSpec: ParseSpec never panics, and whatever it accepts survives
// MarshalSpec and ParseSpec unchanged.
func FuzzParseSpec(f *testing.F) {
	for _, d := range vectorDefinitions(f) {
		f.Add(d)
	}
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"name": "x"}`, `{"name": "x"} {}`, `{"Name": "x"}`,
		`{"name": "x", "policy": {"lease_ttl": "-9223372036854775808ns"}}`,
		`{"name": "x", "policy": {"retry": {"max_retries": 9223372036854775807}}}`,
		`{"name": "x", "states": [{"name": "A", "kind": "initial"}], "rules": [{"from": [null], "event": null}]}`,
		fmt.Sprintf(`{"name": "%s"}`, strings.Repeat("é", 100)),
		`{"states":[{"name":"00000000000"}],"policy":{"idempotency":{"release_in":[]}}}`,
		`{"name": "x", "rules": [{"from": []}], "effects": [{"name": "count", "in": []}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, data) })
}

// canonical normalises a JSON definition for comparison: empty values
// ("", 0, false, [], {}, null) dropped, durations written the one way Go
// writes them ("1m" as "1m0s"), an effect's "run" dropped where it is the
// default (the effect's name).
func canonical(t *testing.T, data []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	out, err := json.Marshal(prune(v, "", ""))
	require.NoError(t, err)
	return string(out)
}

func prune(v any, key, parent string) any {
	switch x := v.(type) {
	case map[string]any:
		if run, ok := x["run"]; ok && run == x["name"] && parent == "effects" {
			delete(x, "run")
		}
		out := make(map[string]any)
		for k, e := range x {
			if p := prune(e, k, key); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = prune(e, key, key)
		}
		return out
	case string:
		if x == "" {
			return nil
		}
		if key == "lease_ttl" || key == "retention" || (parent == "backoff" && (key == "initial" || key == "max")) {
			if d, err := time.ParseDuration(x); err == nil {
				return d.String()
			}
		}
		return x
	case bool:
		if !x {
			return nil
		}
		return x
	case json.Number:
		if f, err := x.Float64(); err == nil && f == 0 {
			return nil
		}
		return x
	}
	return v
}
