package conformance

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
)

var updateLifecycles = flag.Bool("update-lifecycles", false,
	"rewrite the definition of every lifecycle vector (imagegen_, docproc_, exactlyonce_, bounty_, delivery_) as its lifecycle's literal definition")

// literalDefinitions returns each lifecycle's literal definition with the
// functions it leaves to its program bound to the registry's stand-ins
// (docs/conformance.md §3.4), as the vectors hold it.
func literalDefinitions(t *testing.T) map[string]jobstate.Spec {
	t.Helper()
	reg := NewRegistry()
	guard := func(name string) hook.Guard {
		g, ok := reg.Guards[name]
		if !ok {
			t.Fatalf("the registry has no guard %q", name)
		}
		return hook.Guard{Name: name, Func: g}
	}
	count := hook.Effect{Name: "count", Func: reg.Effects["count"]}
	classifier := func(name string) hook.Classifier {
		c, ok := reg.Classifiers[name]
		if !ok {
			t.Fatalf("the registry has no classifier %q", name)
		}
		return hook.Classifier{Name: name, Func: c}
	}
	return map[string]jobstate.Spec{
		imagegen.Name: imagegen.Spec(imagegen.Hooks{
			Create:         guard("owner_only"),
			ReserveCredits: count,
			AuditSafeBlock: count,
		}),
		docproc.Name:     docproc.Spec(docproc.Hooks{Classify: classifier("prefix")}),
		exactlyonce.Name: exactlyonce.Spec(),
		bounty.Name: bounty.Spec(bounty.Hooks{
			Create:        guard("owner_only"),
			ListBounty:    count,
			Fund:          guard("owner_only"),
			RecordDeposit: count,
			CancelOpen:    guard("owner_only"),
			Join:          guard("not_owner"),
			RecordJoin:    count,
			Submit:        guard("not_owner"),
			CancelFunded:  guard("owner_and_no_live_executions"),
			RefundGuard:   guard("owner_only"),
			Refund:        count,
		}),
		delivery.Name: delivery.Spec(delivery.Hooks{
			StartDownload: guard("retries_below_3"),
			Classify:      classifier("http"),
		}),
	}
}

// lifecycleOfVector returns the lifecycle a vector's name claims (its
// prefix before the first "_"), or "".
func lifecycleOfVector(name string) string {
	prefix, _, _ := strings.Cut(name, "_")
	if _, ok := machines.LifecycleOf(prefix); ok {
		return prefix
	}
	return ""
}

// definitionName returns the "name" of a definition, when it is an object
// with a string name.
func definitionName(def json.RawMessage) string {
	var d struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(def, &d) != nil {
		return ""
	}
	return d.Name
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// checkLiteral reports, for a definition claiming lifecycle name, how it
// differs from that lifecycle's literal definition.
func checkLiteral(t *testing.T, where string, name string, def json.RawMessage, literal map[string]jobstate.Spec) {
	t.Helper()
	want, err := jobstate.MarshalSpec(literal[name])
	if err != nil {
		t.Fatal(err)
	}
	if sameJSON(want, def) {
		return
	}
	got, err := jobstate.ParseSpec(def, NewRegistry())
	if err != nil {
		t.Errorf("%s: machine %q is not the literal %s definition: %v", where, name, name, err)
		return
	}
	diff := machines.Diff(literal[name], got)
	if len(diff) == 0 {
		diff = []string{"the names of its guards, effects or classifier differ from the stand-ins of docs/conformance.md §3.4"}
	}
	t.Errorf("%s: machine %q is not the literal %s definition:\n  %s", where, name, name, strings.Join(diff, "\n  "))
}

// TestVectorsRunTheLiteralLifecycles fails when a vector named for a
// lifecycle (imagegen_, docproc_, exactlyonce_, bounty_, delivery_) runs
// another machine than that lifecycle's literal definition, and when any
// vector, hand-written or generated, holds a machine bearing a lifecycle's
// name that is not that definition. go test -run TestVectorsRunTheLiteralLifecycles
// -update-lifecycles rewrites the definitions of the lifecycle vectors.
func TestVectorsRunTheLiteralLifecycles(t *testing.T) {
	literal := literalDefinitions(t)
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		claimed := lifecycleOfVector(v.Name)
		name := definitionName(v.Definition)
		if claimed != "" && name != claimed {
			if *updateLifecycles {
				rewriteDefinition(t, v, literal[claimed])
				continue
			}
			t.Errorf("%s: a %s vector runs machine %q", v.Name, claimed, name)
			continue
		}
		if _, ok := literal[name]; !ok {
			continue
		}
		want, _ := jobstate.MarshalSpec(literal[name])
		if *updateLifecycles && claimed != "" && !sameJSON(want, v.Definition) {
			rewriteDefinition(t, v, literal[name])
			continue
		}
		checkLiteral(t, "vectors/"+v.Name+".json", name, v.Definition, literal)
	}
	manifest, err := GeneratedManifest()
	if err != nil {
		t.Fatal(err)
	}
	gen, err := GeneratedFirst(len(manifest.Files)) // one scenario of every machine
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, v := range gen {
		name := definitionName(v.Definition)
		if _, ok := literal[name]; !ok || seen[string(v.Definition)] {
			continue
		}
		seen[string(v.Definition)] = true
		checkLiteral(t, "generated "+v.Name, name, v.Definition, literal)
	}
}

// rewriteDefinition replaces the definition of vector v's file with spec,
// as MarshalSpec writes it, indented.
func rewriteDefinition(t *testing.T, v Vector, spec jobstate.Spec) {
	t.Helper()
	path := filepath.Join("vectors", v.Name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, v.Definition)
	if i < 0 {
		t.Fatalf("%s: the definition's text is not found", path)
	}
	compact, err := jobstate.MarshalSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "  ", "  "); err != nil {
		t.Fatal(err)
	}
	next := append(append(append([]byte(nil), data[:i]...), out.Bytes()...), data[i+len(v.Definition):]...)
	if err := os.WriteFile(path, next, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: definition rewritten", path)
}

// TestLiteralDefinitionsLoad: the stand-in bindings name registry
// functions, and the definitions they give load and are their lifecycles'.
func TestLiteralDefinitionsLoad(t *testing.T) {
	for name, spec := range literalDefinitions(t) {
		data, err := jobstate.MarshalSpec(spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		def, err := jobstate.ParseDefinition(data, NewRegistry())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := machines.CheckDefinition(def); err != nil {
			t.Error(err)
		}
	}
}
