package jobstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	"github.com/jobstate/jobstate/internal/require"
)

// vectorDefinitions returns the definition of every conformance vector.
func vectorDefinitions(t testing.TB) map[string][]byte {
	t.Helper()
	defs, err := conformance.Definitions()
	require.NoError(t, err)
	return defs
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
