package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
)

// The machines the generator draws scenarios for: the distinct
// definitions of the hand-written vectors, and for those with a requeue
// rule without an effect, a variant whose sweeps fail.

// GenMachine is one machine the generator draws scenarios for: a
// definition taken from the hand-written vectors, under a label that names
// its corpus file (generated/<label>.json.gz) and its scenarios
// (gen_<label>_<n>).
type GenMachine struct {
	// Label is the machine's name, with a number appended when several
	// distinct definitions of the vectors share that name.
	Label string
	// From is the first hand-written vector (by name) holding the
	// definition.
	From string
	// Definition is the definition, compact JSON.
	Definition json.RawMessage
}

// GenMachines returns the distinct definitions of the embedded vectors
// that load, sorted by label. Two definitions are the same when their
// compact JSON is. Labels are stable as long as the vectors are: the
// definitions sharing a name are numbered in the order of their first
// vector's name.
func GenMachines() ([]GenMachine, error) {
	vs, err := Vectors()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	varied := make(map[string]bool) // names with a sweep-failure variant: the first definition of each
	var ms []GenMachine
	for _, v := range vs { // sorted by name
		if v.Expect != nil && v.Expect.Error != "" {
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v.Definition); err != nil {
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		if seen[buf.String()] {
			continue
		}
		seen[buf.String()] = true
		def, err := jobstate.ParseDefinition(buf.Bytes(), NewRegistry())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		ms = append(ms, GenMachine{Label: def.Name(), From: v.Name, Definition: buf.Bytes()})
		if variant, ok := sweepFailVariant(buf.Bytes()); ok && !varied[def.Name()] {
			varied[def.Name()] = true
			def, err := jobstate.ParseDefinition(variant, NewRegistry())
			if err != nil {
				return nil, fmt.Errorf("%s, its sweep-failure variant: %w", v.Name, err)
			}
			ms = append(ms, GenMachine{Label: def.Name(), From: v.Name, Definition: variant})
		}
	}
	byName := make(map[string]int)
	for _, m := range ms {
		byName[m.Label]++
	}
	next := make(map[string]int)
	for i := range ms {
		if name := ms[i].Label; byName[name] > 1 {
			next[name]++
			ms[i].Label = fmt.Sprintf("%s%d", name, next[name])
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Label < ms[j].Label })
	return ms, nil
}

// sweepFailSuffix ends the name of a machine's sweep-failure variant.
const sweepFailSuffix = "_sweepfail"

// sweepFailVariant returns, for a definition whose table has a requeue
// rule without an effect, the same machine named <name>_sweepfail whose
// requeue rules run the registry's fail_effect and whose abandon rules
// without an effect run count: its sweeps fail, whole (a requeue's effect
// first in its write) or in part (after a lost lease's abandon), so that
// its scenarios exercise the sweep's failures and push-backs
// (specification §4.17). GenMachines draws one variant per machine name,
// of its first definition. Lifecycle machines keep their literal
// definitions and have none.
func sweepFailVariant(def []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	var d map[string]any
	if dec.Decode(&d) != nil {
		return nil, false
	}
	name, _ := d["name"].(string)
	if _, ok := machines.LifecycleOf(name); ok {
		return nil, false
	}
	rules, _ := d["rules"].([]any)
	changed := false
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok || rule["effect"] != nil {
			continue
		}
		switch rule["event"] {
		case "requeue":
			rule["effect"] = "fail_effect"
			changed = true
		case "abandon":
			rule["effect"] = "count"
		}
	}
	if !changed {
		return nil, false
	}
	d["name"] = name + sweepFailSuffix
	out, err := json.Marshal(d)
	if err != nil {
		return nil, false
	}
	return out, true
}
