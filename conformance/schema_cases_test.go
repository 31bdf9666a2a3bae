package conformance

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// schemaBaseDefinition is a small definition that loads with the
// conformance registry; the cases of TestSchemaCases change it.
const schemaBaseDefinition = `{
  "name": "m",
  "initial": "Q",
  "states": [
    {"name": "Q", "kind": "ready"},
    {"name": "R", "kind": "active"},
    {"name": "D", "kind": "terminal", "outcome": "succeeded"},
    {"name": "F", "kind": "terminal", "outcome": "failed"}
  ],
  "rules": [
    {"from": ["Q"], "event": "claim", "to": "R"},
    {"from": ["R"], "event": "succeed", "to": "D"},
    {"from": ["R"], "event": "fail", "to": "F"}
  ]
}`

// schemaBaseVector is a small vector that passes on memstore; the cases of
// TestSchemaCases change it.
const schemaBaseVector = `{
  "name": "schema_base",
  "description": "a job is created, claimed, succeeds; its history",
  "covers": ["4.2"],
  "definition": ` + schemaBaseDefinition + `,
  "start": "2026-01-01T00:00:00Z",
  "steps": [
    {"op": "create", "as": "j", "expect": {"state": "Q", "version": 1, "existing": false}},
    {"op": "claim", "worker": "w", "as": "a", "expect": {"job": "j", "token": 1, "kind": "active"}},
    {"op": "succeed", "lease": "a", "result": "ok", "expect": {"state": "D", "outcome": "succeeded"}},
    {"op": "clock", "advance": "1s"},
    {"op": "sweep", "expect": {"report": {"jobs": 0}}},
    {"op": "history", "job": "j", "note": "the whole history",
     "expect": {"history": [["", "create", "Q"], ["Q", "claim", "R"], ["R", "succeed", "D"]], "executions": ["DONE"]}}
  ]
}`

// schemaBadVector is a vector whose definition must not load.
const schemaBadVector = `{
  "name": "def_schema_base",
  "description": "a definition that is no object",
  "covers": ["2.7"],
  "definition": [1],
  "start": "2026-01-01T00:00:00Z",
  "expect": {"error": "invalid_definition", "problems": ["a definition is a JSON object, not an array"], "complete": true},
  "steps": []
}`

// editDoc decodes base, applies f to it and encodes it again.
func editDoc(t *testing.T, base string, f func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(base))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if f != nil {
		f(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putAt sets the value at path in node (removes it, with remove), where
// path names object keys and array indices (decimal; an index equal to the
// array's length appends), and returns the changed node.
func putAt(node any, path []string, v any, remove bool) any {
	if len(path) == 0 {
		return v
	}
	switch x := node.(type) {
	case map[string]any:
		if len(path) == 1 && remove {
			delete(x, path[0])
			return x
		}
		x[path[0]] = putAt(x[path[0]], path[1:], v, remove)
		return x
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i > len(x) {
			panic(fmt.Sprintf("bad index %q", path[0]))
		}
		if len(path) == 1 && remove {
			return append(x[:i:i], x[i+1:]...)
		}
		if i == len(x) {
			x = append(x, nil)
		}
		x[i] = putAt(x[i], path[1:], v, remove)
		return x
	}
	panic(fmt.Sprintf("no object or array at %q", path[0]))
}

// setAt returns an edit setting the value at path to the JSON value v.
func setAt(v string, path ...string) func(map[string]any) {
	var x any
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		panic(err)
	}
	return func(m map[string]any) { putAt(m, path, x, false) }
}

// delAt returns an edit removing the value at path.
func delAt(path ...string) func(map[string]any) {
	return func(m map[string]any) { putAt(m, path, nil, true) }
}

// edits applies several edits in order.
func edits(fs ...func(map[string]any)) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range fs {
			f(m)
		}
	}
}

// TestSchemaCases checks the schemas on documents made to be valid or
// invalid: each must be accepted or rejected as stated. Every definition
// case is also loaded with jobstate.ParseDefinition, which must agree.
func TestSchemaCases(t *testing.T) {
	s := loadSchemas(t)

	t.Run("base vector passes", func(t *testing.T) {
		v, err := ParseVector([]byte(schemaBaseVector))
		if err != nil {
			t.Fatal(err)
		}
		RunVector(t, v, func(t *testing.T) jobstate.Store { return memstore.New() })
	})

	retryRule := setAt(`[{"from": ["Q"], "event": "claim", "to": "R"}, {"from": ["R"], "event": "succeed", "to": "D"},
		{"from": ["R"], "event": "fail", "to": "F"}, {"from": ["R"], "event": "retry", "to": "Q"}]`, "rules")
	defCases := []struct {
		name  string
		edit  func(map[string]any)
		valid bool
	}{
		{"base", nil, true},
		{"nulls for absent values", edits(setAt(`null`, "policy"), setAt(`null`, "create"), setAt(`null`, "effects"),
			setAt(`null`, "states", "0", "description"), setAt(`null`, "rules", "0", "guard")), true},
		{"empty policy members", setAt(`{"retry": null, "idempotency": {}, "lease_ttl": "", "classify": ""}`, "policy"), true},
		{"durations", setAt(`{"lease_ttl": "1h2m3.5s", "idempotency": {"retention": "-0s"}}`, "policy"), true},
		{"fractional durations", setAt(`{"lease_ttl": ".5s", "idempotency": {"retention": "1.5µs"}}`, "policy"), true},
		{"signed and zero durations", setAt(`{"lease_ttl": "+2s", "idempotency": {"retention": "0"}}`, "policy"), true},
		{"fixed backoff", edits(retryRule, setAt(`{"retry": {"max_retries": -1, "backoff": {"kind": "fixed", "initial": "1s", "factor": 0}}}`, "policy")), true},
		{"exponential backoff", edits(retryRule, setAt(`{"retry": {"max_retries": 2, "backoff": {"kind": "exponential", "initial": "10ms", "factor": 1.5, "max": "1m", "jitter": "equal"}}}`, "policy")), true},
		{"initial state by kind", edits(delAt("initial"), setAt(`{"name": "I", "kind": "initial"}`, "states", "4"),
			setAt(`{"from": ["I"], "event": "submit", "to": "Q"}`, "rules", "3")), true},
		{"registry names", edits(setAt(`"owner_only"`, "rules", "2", "guard"), setAt(`{"guard": "owner_only", "effect": "count"}`, "create"),
			setAt(`[{"name": "count", "in": ["D"]}]`, "effects"), setAt(`{"classify": "http"}`, "policy")), true},
		{"derived state", setAt(`{"derived_state": true, "max_executions": 1}`, "policy"), true},

		{"unknown field", setAt(`"m"`, "nmae"), false},
		{"key in another case", edits(delAt("name"), setAt(`"m"`, "Name")), false},
		{"unknown policy field", setAt(`{"leaseTTL": "1s"}`, "policy"), false},
		{"unknown state field", setAt(`"x"`, "states", "0", "label"), false},
		{"name of the wrong type", setAt(`5`, "name"), false},
		{"blank name", setAt(`"  "`, "name"), false},
		{"integer as a string", setAt(`{"max_executions": "1"}`, "policy"), false},
		{"from as a string", setAt(`"Q"`, "rules", "0", "from"), false},
		{"boolean as a string", setAt(`{"require_start": "yes"}`, "policy"), false},
		{"bad duration", setAt(`{"lease_ttl": "5 s"}`, "policy"), false},
		{"duration in days", setAt(`{"lease_ttl": "1d"}`, "policy"), false},
		{"duration without unit", setAt(`{"idempotency": {"retention": "10"}}`, "policy"), false},
		{"negative duration", setAt(`{"lease_ttl": "-1s"}`, "policy"), false},
		{"unknown kind", setAt(`"running"`, "states", "1", "kind"), false},
		{"no kind", delAt("states", "1", "kind"), false},
		{"terminal without outcome", delAt("states", "2", "outcome"), false},
		{"unknown outcome", setAt(`"done"`, "states", "2", "outcome"), false},
		{"outcome on a ready state", setAt(`"failed"`, "states", "0", "outcome"), false},
		{"factor below 1", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "exponential", "initial": "1s", "factor": 0.5}}}`, "policy")), false},
		{"negative factor", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "exponential", "initial": "1s", "factor": -1}}}`, "policy")), false},
		{"backoff without initial", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "fixed"}}}`, "policy")), false},
		{"backoff with a zero initial", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "fixed", "initial": "0s"}}}`, "policy")), false},
		{"unknown backoff kind", edits(retryRule, setAt(`{"retry": {"max_retries": 1, "backoff": {"kind": "linear", "initial": "1s"}}}`, "policy")), false},
		{"unknown jitter", setAt(`{"retry": {"backoff": {"jitter": "half"}}}`, "policy"), false},
		{"max_retries below -1", edits(retryRule, setAt(`{"retry": {"max_retries": -2}}`, "policy")), false},
		{"negative max_executions", setAt(`{"max_executions": -1}`, "policy"), false},
		{"fractional max_executions", setAt(`{"max_executions": 1.5}`, "policy"), false},
		{"guarded succeed rule", setAt(`"owner_only"`, "rules", "1", "guard"), false},
		{"rule with no from state", setAt(`[]`, "rules", "0", "from"), false},
		{"from state twice", setAt(`["Q", "Q"]`, "rules", "0", "from"), false},
		{"rule with an empty event", setAt(`""`, "rules", "0", "event"), false},
		{"no terminal state", setAt(`[{"name": "Q", "kind": "ready"}, {"name": "R", "kind": "active"}]`, "states"), false},
		{"no initial state", delAt("initial"), false},
		{"two initial states", edits(delAt("initial"), setAt(`{"name": "I", "kind": "initial"}`, "states", "4"),
			setAt(`{"name": "J", "kind": "initial"}`, "states", "5")), false},
		{"no states", setAt(`[]`, "states"), false},
		{"no rules", delAt("rules"), false},
		{"null state", setAt(`null`, "states", "0"), false},
		{"derived state with a user event", edits(setAt(`{"derived_state": true}`, "policy"),
			setAt(`{"from": ["Q"], "event": "cancel", "to": "F"}`, "rules", "3")), false},
		{"derived state with several executions", setAt(`{"derived_state": true, "max_executions": 2}`, "policy"), false},
		{"effect named redrive", setAt(`[{"name": "redrive", "run": "count"}]`, "effects"), false},
		{"effect without a name", setAt(`[{"run": "count"}]`, "effects"), false},
		{"empty state in a list", setAt(`{"idempotency": {"release_in": [""]}}`, "policy"), false},
	}
	checkDef := func(t *testing.T, data []byte, valid bool) {
		t.Helper()
		inst, err := decodeInstance(data)
		if err != nil {
			if valid {
				t.Errorf("not JSON: %v", err)
			}
		} else if verr := s.def.Validate(inst); valid && verr != nil {
			t.Errorf("rejected:\n%v\n%s", verr, data)
		} else if !valid && verr == nil {
			t.Errorf("accepted:\n%s", data)
		}
		_, lerr := jobstate.ParseDefinition(data, NewRegistry())
		if loads := lerr == nil; loads != valid {
			t.Errorf("ParseDefinition disagrees with the case (loads: %v, %v):\n%s", loads, lerr, data)
		}
	}
	for _, c := range defCases {
		t.Run("definition/"+c.name, func(t *testing.T) {
			checkDef(t, editDoc(t, schemaBaseDefinition, c.edit), c.valid)
		})
	}
	for name, doc := range map[string]string{
		"not an object": "[" + schemaBaseDefinition + "]",
		"null":          "null",
		"not JSON":      `{"name": "m",`,
	} {
		t.Run("definition/"+name, func(t *testing.T) { checkDef(t, []byte(doc), false) })
	}

	vecCases := []struct {
		name  string
		base  string
		edit  func(map[string]any)
		valid bool
	}{
		{"base", schemaBaseVector, nil, true},
		{"definition that must not load", schemaBadVector, nil, true},
		{"definition that must not load, any JSON", schemaBadVector, setAt(`"not a definition"`, "definition"), true},
		{"definition that must not load, semantically wrong", schemaBadVector,
			setAt(`{"name": "m", "states": [{"name": "Q", "kind": "ready"}], "rules": [{"from": ["Q"], "event": "claim", "to": "Q"}]}`, "definition"), true},
		{"empty load error", schemaBaseVector, setAt(`{"error": ""}`, "expect"), true},
		{"clock set", schemaBaseVector, setAt(`{"op": "clock", "set": "2026-01-01T00:00:01.5+01:00"}`, "steps", "3"), true},
		{"literal job id", schemaBaseVector, setAt(`{"op": "get", "job_id": "ffffffff-ffff-7fff-bfff-ffffffffffff", "expect": {"error": "not_found"}}`, "steps", "5"), true},
		{"sweep naming its job", schemaBaseVector, setAt(`{"op": "sweep", "job": "j", "expect": {"state": "D"}}`, "steps", "4"), true},
		{"fail with a class", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "error": "429", "class": "retry_after", "after": "7s", "expect": {"error": "lease_lost"}}`, "steps", "2"), true},
		{"times in expectations", schemaBaseVector, setAt(`{"not_before": "", "started_at": "2026-01-01T00:00:00.000000001Z"}`, "steps", "0", "expect"), true},

		{"unknown op", schemaBaseVector, setAt(`"launch"`, "steps", "3", "op"), false},
		{"no op", schemaBaseVector, delAt("steps", "3", "op"), false},
		{"unknown vector field", schemaBaseVector, setAt(`"x"`, "comment"), false},
		{"unknown step field", schemaBaseVector, setAt(`5`, "steps", "3", "delay_ms"), false},
		{"unknown expectation field", schemaBaseVector, setAt(`"Q"`, "steps", "0", "expect", "status"), false},
		{"argument the op does not read", schemaBaseVector, setAt(`"1s"`, "steps", "1", "delay"), false},
		{"token as a string", schemaBaseVector, setAt(`"1"`, "steps", "1", "expect", "token"), false},
		{"no name", schemaBaseVector, delAt("name"), false},
		{"name with a space", schemaBaseVector, setAt(`"schema base"`, "name"), false},
		{"blank description", schemaBaseVector, setAt(`" "`, "description"), false},
		{"no covers", schemaBaseVector, delAt("covers"), false},
		{"bad section", schemaBaseVector, setAt(`["4.x"]`, "covers"), false},
		{"no steps", schemaBaseVector, delAt("steps"), false},
		{"start not RFC 3339", schemaBaseVector, setAt(`"2026-01-01 00:00:00"`, "start"), false},
		{"start in month 13", schemaBaseVector, setAt(`"2026-13-01T00:00:00Z"`, "start"), false},
		{"empty start", schemaBaseVector, setAt(`""`, "start"), false},
		{"bad duration", schemaBaseVector, setAt(`"1 s"`, "steps", "3", "advance"), false},
		{"bad deadline", schemaBaseVector, setAt(`"tomorrow"`, "steps", "0", "deadline"), false},
		{"bad expected time", schemaBaseVector, setAt(`"2026-01-01"`, "steps", "0", "expect", "deadline"), false},
		{"job and job_id", schemaBaseVector, setAt(`"ffffffff-ffff-7fff-bfff-ffffffffffff"`, "steps", "5", "job_id"), false},
		{"job_id not a UUID", schemaBaseVector, edits(delAt("steps", "5", "job"), setAt(`"42"`, "steps", "5", "job_id")), false},
		{"history without a job", schemaBaseVector, delAt("steps", "5", "job"), false},
		{"lease operation without a lease", schemaBaseVector, delAt("steps", "2", "lease"), false},
		{"clock with advance and set", schemaBaseVector, setAt(`"2026-01-01T00:00:05Z"`, "steps", "3", "set"), false},
		{"clock with neither", schemaBaseVector, delAt("steps", "3", "advance"), false},
		{"clock with a job expectation", schemaBaseVector, setAt(`{"state": "Q"}`, "steps", "3", "expect"), false},
		{"unknown error code", schemaBaseVector, setAt(`{"error": "lease_expired"}`, "steps", "2", "expect"), false},
		{"existing on claim", schemaBaseVector, setAt(`true`, "steps", "1", "expect", "existing"), false},
		{"token on create", schemaBaseVector, setAt(`1`, "steps", "0", "expect", "token"), false},
		{"report on succeed", schemaBaseVector, setAt(`{"jobs": 1}`, "steps", "2", "expect", "report"), false},
		{"unknown report count", schemaBaseVector, setAt(`{"swept": 1}`, "steps", "4", "expect", "report"), false},
		{"sweep without job expecting a state", schemaBaseVector, setAt(`"D"`, "steps", "4", "expect", "state"), false},
		{"class without an error", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "class": "permanent"}`, "steps", "2"), false},
		{"unknown class", schemaBaseVector, setAt(`{"op": "fail", "lease": "a", "error": "x", "class": "fatal"}`, "steps", "2"), false},
		{"unknown kind", schemaBaseVector, setAt(`"running"`, "steps", "1", "expect", "kind"), false},
		{"unknown execution status", schemaBaseVector, setAt(`["RUNNING"]`, "steps", "5", "expect", "executions"), false},
		{"history record of two", schemaBaseVector, setAt(`[["", "create"]]`, "steps", "5", "expect", "history"), false},
		{"history not starting with create", schemaBaseVector, setAt(`[["Q", "claim", "R"]]`, "steps", "5", "expect", "history"), false},
		{"negative effect count", schemaBaseVector, setAt(`{"count": -1}`, "steps", "5", "expect", "effect_count"), false},
		{"definition that must load with an unknown field", schemaBaseVector, setAt(`"x"`, "definition", "comment"), false},
		{"definition that must load with a bad duration", schemaBaseVector, setAt(`{"lease_ttl": "30 s"}`, "definition", "policy"), false},
		{"definition that must load, any JSON", schemaBaseVector, setAt(`[1]`, "definition"), false},
		{"definition that must not load, with steps", schemaBadVector, setAt(`[{"op": "sweep"}]`, "steps"), false},
		{"definition that must not load, no problems", schemaBadVector, delAt("expect", "problems"), false},
		{"unknown load error", schemaBadVector, setAt(`"invalid"`, "expect", "error"), false},
		{"problems of a definition that loads", schemaBaseVector, setAt(`{"error": "", "problems": ["x"]}`, "expect"), false},
		{"list", schemaBaseVector, setAt(`{"op": "list", "machine": "m", "states": ["Q"], "kinds": ["ready"], "outcomes": ["failed"], "owner": "o", "key": "k", "created_from": "2026-01-01T00:00:00Z", "created_to": "2026-01-01T00:00:05Z", "updated_from": "", "completed_to": "2026-01-02T00:00:00Z", "order": "updated", "desc": true, "limit": 2, "as": "p", "expect": {"page": {"jobs": ["j"], "states": ["Q"], "next": false}}}`, "steps", "4"), true},
		{"list with a cursor and an empty page", schemaBaseVector, setAt(`{"op": "list", "cursor": "p", "expect": {"page": {"jobs": []}}}`, "steps", "4"), true},
		{"list expecting a job field", schemaBaseVector, setAt(`{"op": "list", "expect": {"state": "Q"}}`, "steps", "4"), false},
		{"list with a lease", schemaBaseVector, setAt(`{"op": "list", "lease": "a"}`, "steps", "4"), false},
		{"list with an unknown kind", schemaBaseVector, setAt(`{"op": "list", "kinds": ["running"]}`, "steps", "4"), false},
		{"page without jobs", schemaBaseVector, setAt(`{"op": "list", "expect": {"page": {"next": true}}}`, "steps", "4"), false},
		{"page on a get", schemaBaseVector, setAt(`{"jobs": []}`, "steps", "5", "expect", "page"), false},
	}
	for _, c := range vecCases {
		t.Run("vector/"+c.name, func(t *testing.T) {
			data := editDoc(t, c.base, c.edit)
			inst, err := decodeInstance(data)
			if err != nil {
				t.Fatal(err)
			}
			err = s.vec.Validate(inst)
			if c.valid && err != nil {
				t.Errorf("rejected:\n%v\n%s", err, data)
			}
			if !c.valid && err == nil {
				t.Errorf("accepted:\n%s", data)
			}
		})
	}
}
