package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"
)

// vectorDefinitions returns the definition of every conformance vector.
func vectorDefinitions(t testing.TB) map[string][]byte {
	t.Helper()
	defs, err := conformance.Definitions()
	require.NoError(t, err)
	return defs
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
