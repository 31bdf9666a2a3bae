package machines

import (
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
)

// all is every machine this package returns.
func all() []jobstate.Spec {
	out := Generic()
	for _, l := range Lifecycles() {
		out = append(out, l.Spec())
	}
	return out
}

func TestEveryMachineIsValid(t *testing.T) {
	for _, s := range all() {
		if _, err := jobstate.NewDefinition(s); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

// TestMachinesBearingALifecycleNameAreLiteral fails when a machine of this
// package bears the name of a lifecycle without being its literal
// definition.
func TestMachinesBearingALifecycleNameAreLiteral(t *testing.T) {
	for _, s := range all() {
		if err := Check(s); err != nil {
			t.Error(err)
		}
	}
	for _, s := range Generic() {
		if _, ok := LifecycleOf(s.Name); ok {
			t.Errorf("generic machine %q bears a lifecycle's name", s.Name)
		}
	}
}

// TestLiteralsWriteAsJSON: every lifecycle's definition, bound to its Plain
// hooks, names all its functions, so that MarshalSpec writes it.
func TestLiteralsWriteAsJSON(t *testing.T) {
	for _, l := range Lifecycles() {
		if _, err := jobstate.MarshalSpec(l.Spec()); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
		if l.Name != l.Spec().Name {
			t.Errorf("lifecycle %q returns machine %q", l.Name, l.Spec().Name)
		}
	}
}

func TestCheckNamesEveryDifference(t *testing.T) {
	spec := delivery.Spec(delivery.Plain())
	spec.Policy.Retry.MaxRetries = 2
	spec.Policy.LeaseTTL = delivery.HeartbeatTimeout
	spec.Rules = spec.Rules[:len(spec.Rules)-1]
	err := Check(spec)
	if err == nil {
		t.Fatal("a changed delivery machine passed the check")
	}
	for _, want := range []string{
		`policy.retry.max_retries: want 3, got 2`,
		`policy.lease_ttl: want "30.000000001s", got "30s"`,
		`rules: want [`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	spec.Name = "transfer-variant"
	if err := Check(spec); err != nil {
		t.Errorf("a machine with a name of its own is not checked: %v", err)
	}
}

// TestDiffComparesWhetherFunctionsAreBoundNotTheirNames: the program
// running a definition names its functions; a missing one is a difference.
func TestDiffComparesWhetherFunctionsAreBoundNotTheirNames(t *testing.T) {
	other := imagegen.Plain()
	other.Create = hook.Guard{Name: "PromptGuard.validate, Quota.check", Func: other.Create.Func}
	if d := Diff(imagegen.Spec(imagegen.Plain()), imagegen.Spec(other)); len(d) != 0 {
		t.Errorf("names of functions compared: %v", d)
	}
	other.AuditSafeBlock = hook.Effect{}
	d := Diff(imagegen.Spec(imagegen.Plain()), imagegen.Spec(other))
	if len(d) != 1 || !strings.HasPrefix(d[0], "rules[6].effect: want \"effect\", got absent") {
		t.Errorf("a missing effect: got %q", d)
	}
}

func TestDiffOfDescriptions(t *testing.T) {
	want := delivery.Spec(delivery.Plain())
	got := delivery.Spec(delivery.Plain())
	got.States[0].Description = "waiting"
	d := Diff(want, got)
	if len(d) != 1 || d[0] != `states[0].description: want "waiting for a worker", got "waiting"` {
		t.Errorf("got %q", d)
	}
}

func TestCheckDefinitionComparesTheMachineAsRun(t *testing.T) {
	for _, l := range Lifecycles() {
		if err := CheckDefinition(Must(l.Spec())); err != nil {
			t.Error(err)
		}
	}
	spec := imagegen.Spec(imagegen.Plain())
	spec.Policy.Idempotency.ReleaseIn = nil
	err := CheckDefinition(Must(spec))
	if err == nil || !strings.Contains(err.Error(), "policy.idempotency: want") {
		t.Errorf("a changed idempotency policy: %v", err)
	}
}
