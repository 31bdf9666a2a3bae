// Package machines holds the machines the library's own tests, the store
// suite, the conformance vectors and the benchmarks run.
//
// The five lifecycles this library was built to run each have one literal
// definition, in a package of its own: imagegen (image generation),
// docproc (document processing), exactlyonce (exactly-once executions),
// bounty (bounty marketplace) and delivery (file delivery). The example
// programs run those definitions too. A definition leaves the functions
// that need an application (a quota, a ledger) to its caller as hooks
// (package hook); each package's Plain gives hooks that need none.
//
// This package lists the lifecycles (Lifecycles), checks that a machine
// bearing a lifecycle's name is that lifecycle's definition (Check, Diff),
// and holds the generic machines of tests that need other rules, named so
// that they claim no lifecycle: queue, transfer, projected, parking and
// work (the last named by its caller, with options for its lease, retries
// and abandon rule, for the test programs and the benchmarks).
package machines

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
)

// Lifecycle names one of the five lifecycles.
type Lifecycle struct {
	// Name is the machine's name: a machine bearing it claims to be this
	// lifecycle.
	Name string
	// Title is the lifecycle as the documentation names it.
	Title string
	// Spec returns the literal definition, bound to the lifecycle's Plain
	// hooks.
	Spec func() jobstate.Spec
}

// Lifecycles returns the five lifecycles, in the order the documentation
// lists them.
func Lifecycles() []Lifecycle {
	return []Lifecycle{
		{imagegen.Name, "image generation", func() jobstate.Spec { return imagegen.Spec(imagegen.Plain()) }},
		{docproc.Name, "document processing", func() jobstate.Spec { return docproc.Spec(docproc.Plain()) }},
		{exactlyonce.Name, "exactly-once executions", exactlyonce.Spec},
		{bounty.Name, "bounty marketplace", func() jobstate.Spec { return bounty.Spec(bounty.Plain()) }},
		{delivery.Name, "file delivery", func() jobstate.Spec { return delivery.Spec(delivery.Plain()) }},
	}
}

// LifecycleOf returns the lifecycle whose name the machine bears, if any.
func LifecycleOf(machine string) (Lifecycle, bool) {
	for _, l := range Lifecycles() {
		if l.Name == machine {
			return l, true
		}
	}
	return Lifecycle{}, false
}

// Check returns nil when spec does not bear a lifecycle's name, or when it
// is that lifecycle's literal definition as Diff compares them; otherwise
// an error listing every difference.
func Check(spec jobstate.Spec) error {
	l, ok := LifecycleOf(spec.Name)
	if !ok {
		return nil
	}
	if d := Diff(l.Spec(), spec); len(d) > 0 {
		return fmt.Errorf("machine %q is not the literal %s definition:\n  %s", spec.Name, l.Title, strings.Join(d, "\n  "))
	}
	return nil
}

// CheckDefinition is Check for a validated Definition: it compares the
// machine as the engine runs it, the defaults NewDefinition fills in
// included, with the literal definition validated the same way.
func CheckDefinition(d *jobstate.Definition) error {
	l, ok := LifecycleOf(d.Name())
	if !ok {
		return nil
	}
	if diff := Diff(SpecOf(Must(l.Spec())), SpecOf(d)); len(diff) > 0 {
		return fmt.Errorf("machine %q is not the literal %s definition:\n  %s", d.Name(), l.Title, strings.Join(diff, "\n  "))
	}
	return nil
}

// SpecOf returns the Spec of a validated Definition: its states, initial
// state, rules, policy (with the defaults NewDefinition filled in),
// creation and once-only effects.
func SpecOf(d *jobstate.Definition) jobstate.Spec {
	return jobstate.Spec{
		Name:    d.Name(),
		States:  d.States(),
		Initial: d.Initial(),
		Rules:   d.Rules(),
		Policy:  d.Policy(),
		Create:  d.Create(),
		Effects: d.Effects(),
	}
}

// Diff lists the differences between two machine definitions, one per
// field, each as "path: want W, got G" with the path of the JSON form
// (jobstate.MarshalSpec). It compares every field of the JSON form,
// descriptions included, except the names of guards, effects and
// classifiers: the program running a definition binds those, so only
// whether each is there is compared. A spec that cannot be written as JSON
// is reported as one difference.
func Diff(want, got jobstate.Spec) []string {
	w, err := shape(want)
	if err != nil {
		return []string{"want: " + err.Error()}
	}
	g, err := shape(got)
	if err != nil {
		return []string{"got: " + err.Error()}
	}
	var out []string
	diffJSON("", w, g, &out)
	return out
}

// shape is the JSON form of s with every guard, effect and classifier
// named by its kind alone.
func shape(s jobstate.Spec) (any, error) {
	guard := func(context.Context, jobstate.GuardInput) error { return nil }
	effect := func(context.Context, jobstate.Job) error { return nil }
	classify := func(error) (jobstate.ErrorClass, time.Duration) { return jobstate.ClassNone, 0 }
	g := func(f *jobstate.Guard, name *string) {
		if *f != nil || *name != "" {
			*f, *name = guard, "guard"
		}
	}
	e := func(f *jobstate.EffectFunc, name *string) {
		if *f != nil || *name != "" {
			*f, *name = effect, "effect"
		}
	}
	s.Rules = append([]jobstate.Rule(nil), s.Rules...)
	for i := range s.Rules {
		g(&s.Rules[i].Guard, &s.Rules[i].GuardName)
		e(&s.Rules[i].Effect, &s.Rules[i].EffectName)
	}
	g(&s.Create.Guard, &s.Create.GuardName)
	e(&s.Create.Effect, &s.Create.EffectName)
	s.Effects = append([]jobstate.EffectSpec(nil), s.Effects...)
	for i := range s.Effects {
		g(&s.Effects[i].Guard, &s.Effects[i].GuardName)
		e(&s.Effects[i].Run, &s.Effects[i].RunName)
	}
	if s.Policy.Classify != nil || s.Policy.ClassifyName != "" {
		s.Policy.Classify, s.Policy.ClassifyName = classify, "classifier"
	}
	data, err := jobstate.MarshalSpec(s)
	if err != nil {
		return nil, err
	}
	var v any
	err = json.Unmarshal(data, &v)
	return v, err
}

// diffJSON appends the differences between two decoded JSON values.
func diffJSON(path string, want, got any, out *[]string) {
	at := path
	if at == "" {
		at = "definition"
	}
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		keys := make(map[string]bool)
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diffJSON(p, wm[k], gm[k], out)
		}
		return
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		for i := range wl {
			diffJSON(fmt.Sprintf("%s[%d]", at, i), wl[i], gl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*out = append(*out, fmt.Sprintf("%s: want %s, got %s", at, text(want), text(got)))
	}
}

// text writes a decoded JSON value for a difference; nil is "absent".
func text(v any) string {
	if v == nil {
		return "absent"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Must builds a Definition from a spec of this package, which is valid by
// construction.
func Must(spec jobstate.Spec) *jobstate.Definition {
	d, err := jobstate.NewDefinition(spec)
	if err != nil {
		panic(err)
	}
	return d
}
