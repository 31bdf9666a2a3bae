package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
)

// errNeedsCode: a move would run a guard or an effect that a JSON
// definition names but only the service's Go code provides.
var errNeedsCode = errors.New("needs the service's code")

// codeNames are the names of code a JSON definition refers to.
type codeNames struct {
	guards, effects, classifiers []string
}

// any reports whether the definition names any code.
func (c codeNames) any() bool {
	return len(c.guards)+len(c.effects)+len(c.classifiers) > 0
}

// String lists the names, for people.
func (c codeNames) String() string {
	var parts []string
	for _, g := range []struct {
		what  string
		names []string
	}{{"guards", c.guards}, {"effects", c.effects}, {"classifiers", c.classifiers}} {
		if len(g.names) > 0 {
			parts = append(parts, g.what+" "+strings.Join(quoteAll(g.names), ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// scanCodeNames finds the names of code data refers to, reading it
// leniently: what is malformed is ParseSpec's to report.
func scanCodeNames(data []byte) codeNames {
	var doc struct {
		Rules []struct {
			Guard  any `json:"guard"`
			Effect any `json:"effect"`
		} `json:"rules"`
		Create *struct {
			Guard  any `json:"guard"`
			Effect any `json:"effect"`
		} `json:"create"`
		Effects []struct {
			Name  any `json:"name"`
			Guard any `json:"guard"`
			Run   any `json:"run"`
		} `json:"effects"`
		Policy *struct {
			Classify any `json:"classify"`
		} `json:"policy"`
	}
	_ = json.Unmarshal(data, &doc) // a partial decode still names what it found
	guards, effects, classifiers := map[string]bool{}, map[string]bool{}, map[string]bool{}
	add := func(set map[string]bool, v any) {
		if s, ok := v.(string); ok && s != "" {
			set[s] = true
		}
	}
	for _, r := range doc.Rules {
		add(guards, r.Guard)
		add(effects, r.Effect)
	}
	if c := doc.Create; c != nil {
		add(guards, c.Guard)
		add(effects, c.Effect)
	}
	for _, e := range doc.Effects {
		add(guards, e.Guard)
		if s, ok := e.Run.(string); ok && s != "" {
			effects[s] = true
		} else {
			add(effects, e.Name) // "run" defaults to the effect's name
		}
	}
	if p := doc.Policy; p != nil {
		add(classifiers, p.Classify)
	}
	return codeNames{guards: sorted(guards), effects: sorted(effects), classifiers: sorted(classifiers)}
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// placeholders returns a registry resolving every name of names to a
// function that stands for the service's code without running it: a guard
// refuses and an effect fails, both with errNeedsCode, so that no move
// that would run them is written. A classifier calls every error
// permanent; the command never records a failure, so it is never called.
func placeholders(names codeNames) jobstate.Registry {
	reg := jobstate.Registry{
		Guards:      map[string]jobstate.Guard{},
		Effects:     map[string]jobstate.EffectFunc{},
		Classifiers: map[string]jobstate.Classifier{},
	}
	for _, n := range names.guards {
		reg.Guards[n] = func(context.Context, jobstate.GuardInput) error {
			return fmt.Errorf("%w: guard %q", errNeedsCode, n)
		}
	}
	for _, n := range names.effects {
		reg.Effects[n] = func(context.Context, jobstate.Job) error {
			return fmt.Errorf("%w: effect %q", errNeedsCode, n)
		}
	}
	for _, n := range names.classifiers {
		reg.Classifiers[n] = func(error) (jobstate.ErrorClass, time.Duration) {
			return jobstate.ClassPermanent, 0
		}
	}
	return reg
}

// definitionFile is one JSON definition read from a file.
type definitionFile struct {
	path string
	def  *jobstate.Definition
	code codeNames
}

// parseDefinitionFile reads and validates one JSON definition. Its
// problems come back in a *jobstate.DefinitionError.
func parseDefinitionFile(path string) (definitionFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return definitionFile{}, err
	}
	code := scanCodeNames(data)
	def, err := jobstate.ParseDefinition(data, placeholders(code))
	if err != nil {
		return definitionFile{}, err
	}
	return definitionFile{path: path, def: def, code: code}, nil
}

// definitionPaths returns the paths --definitions gave, else those of
// JOBSTATE_DEFINITIONS.
func (a *app) definitionPaths(flagged []string) []string {
	if len(flagged) > 0 {
		return flagged
	}
	var out []string
	for _, p := range filepath.SplitList(a.getenv("JOBSTATE_DEFINITIONS")) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// loadDefinitions reads every definition of paths: a file, or a directory
// whose *.json files are read in name order. A file that cannot be read
// or is not a valid definition, or two definitions of one machine, are
// usage errors.
func loadDefinitions(paths []string) ([]definitionFile, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, usagef("--definitions: %v", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, usagef("--definitions: %v", err)
		}
		if len(matches) == 0 {
			return nil, usagef("--definitions: directory %s holds no *.json file", p)
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	var out []definitionFile
	seen := map[string]string{}
	for _, f := range files {
		df, err := parseDefinitionFile(f)
		if err != nil {
			var de *jobstate.DefinitionError
			if errors.As(err, &de) {
				return nil, usagef("--definitions: %s is not a valid definition (%d problem(s); run `jobstate validate %s`): %s", f, len(de.Problems), f, de.Problems[0])
			}
			return nil, usagef("--definitions: %v", err)
		}
		name := df.def.Name()
		if prev, dup := seen[name]; dup {
			return nil, usagef("--definitions: machine %q is defined twice, in %s and %s", name, prev, f)
		}
		seen[name] = f
		out = append(out, df)
	}
	return out, nil
}

// machineNames lists the machines of defs, sorted.
func machineNames(defs []definitionFile) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.def.Name()
	}
	sort.Strings(out)
	return out
}

// ruleCode names the code the rules for ev from state run (guards and
// effects), "" when they run none.
func ruleCode(def *jobstate.Definition, from jobstate.State, ev jobstate.Event) string {
	var names []string
	for _, r := range def.Rules() {
		if r.Event != ev || !containsState(r.From, from) {
			continue
		}
		if r.GuardName != "" {
			names = append(names, fmt.Sprintf("guard %q", r.GuardName))
		}
		if r.EffectName != "" {
			names = append(names, fmt.Sprintf("effect %q", r.EffectName))
		}
	}
	return strings.Join(names, ", ")
}

// createCode names the code a creation on def runs, "" when none.
func createCode(def *jobstate.Definition) string {
	var names []string
	c := def.Create()
	if c.GuardName != "" {
		names = append(names, fmt.Sprintf("guard %q", c.GuardName))
	}
	if c.EffectName != "" {
		names = append(names, fmt.Sprintf("effect %q", c.EffectName))
	}
	return strings.Join(names, ", ")
}

func containsState(list []jobstate.State, s jobstate.State) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
