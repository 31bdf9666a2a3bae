package conformance

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

// TestSchemaMatchesGo checks that the schemas name exactly what the Go code
// reads and writes: the keys of a definition in which every field is set,
// the JSON keys of Vector, LoadExpect, Step, Expect and Report, the
// operations (Ops), error codes, kinds, outcomes, lifecycle events and
// execution statuses.
func TestSchemaMatchesGo(t *testing.T) {
	s := loadSchemas(t)

	// Definition keys: a definition with every field set, as MarshalSpec
	// writes it, has exactly the keys of the schema.
	reg := NewRegistry()
	full := jobstate.Spec{
		Name:    "full",
		Initial: "A",
		States: []jobstate.StateSpec{
			{Name: "A", Kind: jobstate.KindReady, Outcome: "x", Description: "d"},
		},
		Rules: []jobstate.Rule{{
			From: []jobstate.State{"A"}, Event: "e", To: "A", Description: "d",
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Effect: reg.Effects["count"], EffectName: "count",
		}},
		Policy: jobstate.Policy{
			LeaseTTL: time.Second, MaxExecutions: 2, MaxPerKey: 1,
			Retry: jobstate.RetryPolicy{MaxRetries: 1, Backoff: jobstate.Backoff{
				Kind: jobstate.BackoffExponential, Initial: time.Second, Factor: 3, Max: time.Minute, Jitter: jobstate.JitterFull,
			}},
			Classify: reg.Classifiers["http"], ClassifyName: "http",
			RequireStart: true, FailOnLeaseLoss: true, LazyExpiry: true, DerivedState: true,
			Idempotency: jobstate.IdempotencyPolicy{Retention: time.Hour, ReleaseIn: []jobstate.State{"A"}},
			RedriveFrom: []jobstate.State{"A"},
		},
		Create: jobstate.CreateSpec{
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Effect: reg.Effects["count"], EffectName: "count",
		},
		Effects: []jobstate.EffectSpec{{
			Name: "count", In: []jobstate.State{"A"},
			Guard: reg.Guards["owner_only"], GuardName: "owner_only",
			Run: reg.Effects["count"], RunName: "count",
		}},
	}
	data, err := jobstate.MarshalSpec(full)
	if err != nil {
		t.Fatal(err)
	}
	var written any
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	if _, err := jobstate.ParseSpec(data, reg); err != nil {
		t.Fatalf("ParseSpec of MarshalSpec's output: %v", err)
	}
	gotKeys := docPaths(written, "")
	wantKeys := schemaPaths(s.defDoc, s.defDoc, "")
	if !reflect.DeepEqual(gotKeys, wantKeys) {
		t.Errorf("definition keys:\n MarshalSpec writes %v\n the schema declares %v", gotKeys, wantKeys)
	}

	// Vector keys: the JSON names of the Go types.
	defs := s.vecDoc["$defs"].(map[string]any)
	for _, c := range []struct {
		name string
		node any
		typ  reflect.Type
	}{
		{"vector", s.vecDoc, reflect.TypeOf(Vector{})},
		{"loadExpect", defs["loadExpect"], reflect.TypeOf(LoadExpect{})},
		{"step", defs["step"], reflect.TypeOf(Step{})},
		{"expect", defs["expect"], reflect.TypeOf(Expect{})},
		{"report", defs["report"], reflect.TypeOf(Report{})},
		{"page", defs["page"], reflect.TypeOf(Page{})},
	} {
		props := c.node.(map[string]any)["properties"].(map[string]any)
		if got, want := objectKeys(props), jsonFieldNames(c.typ); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the schema declares %v, %s has %v", c.name, got, c.typ, want)
		}
	}

	enum := func(doc map[string]any, path ...string) []string {
		t.Helper()
		var node any = doc
		for _, p := range path {
			m, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("no %s in the schema", strings.Join(path, "/"))
			}
			node = m[p]
		}
		list, ok := node.(map[string]any)["enum"].([]any)
		if !ok {
			t.Fatalf("no enum at %s", strings.Join(path, "/"))
		}
		var out []string
		for _, v := range list {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		sort.Strings(out)
		return out
	}
	sorted := func(list []string) []string {
		out := append([]string(nil), list...)
		sort.Strings(out)
		return out
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, sorted(want)) {
			t.Errorf("%s: the schema has %v, the Go code %v", what, got, sorted(want))
		}
	}

	same("ops", enum(s.vecDoc, "$defs", "step", "properties", "op"), Ops)

	codes := []string{"", "unknown"}
	for _, e := range []error{
		jobstate.ErrIncomplete, jobstate.ErrOutcomeUnknown, jobstate.ErrUnavailable, jobstate.ErrCancelled, jobstate.ErrLeaseLost, jobstate.ErrAlreadyCommitted,
		jobstate.ErrEffectApplied, jobstate.ErrKeyConflict, jobstate.ErrUnknownEffect, jobstate.ErrKeyLimit, jobstate.ErrNotClaimable,
		jobstate.ErrGuardRefused, jobstate.ErrTerminal, jobstate.ErrInvalidTransition, jobstate.ErrNoJob,
		jobstate.ErrNotFound, jobstate.ErrUnknownMachine, jobstate.ErrInvalidDefinition,
		jobstate.ErrVersionConflict, jobstate.ErrDuplicateJob, jobstate.ErrUnsupported, jobstate.ErrInvalidArgument,
	} {
		codes = append(codes, jobstate.Code(e))
	}
	same("error codes", enum(s.vecDoc, "$defs", "expect", "properties", "error"), codes)
	same("load error codes", enum(s.vecDoc, "$defs", "loadExpect", "properties", "error"), []string{"", jobstate.Code(jobstate.ErrInvalidDefinition)})

	var kinds []string
	for k := jobstate.KindInitial; k.Valid(); k++ {
		kinds = append(kinds, k.String())
	}
	same("kinds (definition)", enum(s.defDoc, "$defs", "kind"), kinds)
	same("kinds (expect)", enum(s.vecDoc, "$defs", "expect", "properties", "kind"), kinds)

	var outcomes []string
	for _, o := range []jobstate.Outcome{
		jobstate.OutcomeSucceeded, jobstate.OutcomeFailed, jobstate.OutcomeCancelled,
		jobstate.OutcomeExpired, jobstate.OutcomeRejected, jobstate.OutcomeDeadLettered,
	} {
		if !o.Valid() {
			t.Errorf("outcome %q is not valid", o)
		}
		outcomes = append(outcomes, string(o))
	}
	same("outcomes (definition)", enum(s.defDoc, "$defs", "outcome"), outcomes)
	same("outcomes (expect)", enum(s.vecDoc, "$defs", "expect", "properties", "outcome"), append([]string{""}, outcomes...))

	var lifecycle []string
	for _, e := range []jobstate.Event{
		jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail,
		jobstate.EventExhaust, jobstate.EventRequeue, jobstate.EventAbandon, jobstate.EventExpire,
		jobstate.EventCancel,
	} {
		if jobstate.IsLifecycle(e) {
			lifecycle = append(lifecycle, string(e))
		}
	}
	same("lifecycle events", enum(s.defDoc, "$defs", "lifecycleEvent"), lifecycle)

	same("backoff kinds", enum(s.defDoc, "$defs", "backoff", "properties", "kind"),
		[]string{string(jobstate.BackoffNone), string(jobstate.BackoffFixed), string(jobstate.BackoffExponential)})
	same("jitters", enum(s.defDoc, "$defs", "backoff", "properties", "jitter"),
		[]string{string(jobstate.JitterNone), string(jobstate.JitterFull), string(jobstate.JitterEqual)})
	same("error classes", enum(s.vecDoc, "$defs", "expect", "properties", "error_class"),
		[]string{string(jobstate.ClassNone), string(jobstate.ClassRetryable), string(jobstate.ClassPermanent)})

	statuses := enum(s.vecDoc, "$defs", "expect", "properties", "executions", "items")
	same("execution statuses", statuses, []string{
		string(jobstate.ExecLeased), string(jobstate.ExecInProgress), string(jobstate.ExecCommitted),
		string(jobstate.ExecDone), string(jobstate.ExecAborted),
	})
}

// docPaths lists the object keys of a decoded JSON value as paths
// ("policy.retry.backoff.kind", "states[].name"), sorted.
func docPaths(v any, prefix string) []string {
	set := make(map[string]bool)
	var walk func(v any, prefix string)
	walk = func(v any, prefix string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := joinKey(prefix, k)
				set[p] = true
				walk(e, p)
			}
		case []any:
			for _, e := range x {
				walk(e, prefix+"[]")
			}
		}
	}
	walk(v, prefix)
	return sortedSet(set)
}

// schemaPaths lists the properties a schema declares, as docPaths names
// them, following local references ("#/$defs/...") and ignoring
// conditions.
func schemaPaths(root map[string]any, node any, prefix string) []string {
	set := make(map[string]bool)
	var walk func(node any, prefix string, depth int)
	walk = func(node any, prefix string, depth int) {
		m, ok := node.(map[string]any)
		if !ok || depth > 20 {
			return
		}
		if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#/$defs/") {
			defs, _ := root["$defs"].(map[string]any)
			walk(defs[strings.TrimPrefix(ref, "#/$defs/")], prefix, depth+1)
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				path := joinKey(prefix, k)
				set[path] = true
				walk(p, path, depth+1)
			}
		}
		if items, ok := m["items"]; ok {
			walk(items, prefix+"[]", depth+1)
		}
	}
	walk(node, prefix, 0)
	return sortedSet(set)
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func objectKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFieldNames lists the JSON names of a struct type's fields, sorted.
func jsonFieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
