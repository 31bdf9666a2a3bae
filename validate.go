package jobstate

import (
	"fmt"
	"strings"
)

// validate returns every problem of spec, each naming the state or rule at
// fault; none means the spec is a valid Definition. It reads spec only.
func validate(spec *Spec) []string {
	var p problems
	if strings.TrimSpace(spec.Name) == "" {
		p.add("machine name is empty")
	} else if pr := nameProblem(spec.Name); pr != "" {
		p.add("machine name %s", pr)
	}
	if len(spec.States) == 0 {
		p.add("no states declared")
	}

	kinds := make(map[State]StateSpec, len(spec.States))
	for i, s := range spec.States {
		switch {
		case s.Name == "":
			p.add("state #%d has an empty name", i+1)
			continue
		case nameProblem(string(s.Name)) != "":
			p.add("state #%d: its name %s", i+1, nameProblem(string(s.Name)))
		case !s.Kind.Valid():
			p.add("state %q has invalid kind %s", s.Name, s.Kind)
		case s.Kind == KindTerminal && !s.Outcome.Valid():
			if s.Outcome == "" {
				p.add("terminal state %q has no outcome", s.Name)
			} else {
				p.add("terminal state %q has unknown outcome %q", s.Name, s.Outcome)
			}
		case s.Kind != KindTerminal && s.Outcome != "":
			p.add("state %q is %s but has outcome %q (only terminal states carry one)", s.Name, s.Kind, s.Outcome)
		}
		if _, dup := kinds[s.Name]; dup {
			p.add("state %q is declared twice", s.Name)
			continue
		}
		kinds[s.Name] = s
	}

	validateStart(spec, kinds, &p)
	validateRules(spec, kinds, &p)
	validateGraph(spec, kinds, &p)
	validateLifecycle(spec, kinds, &p)
	validatePolicy(spec, kinds, &p)
	return p.list
}

type problems struct{ list []string }

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// startState returns the state new jobs start in: Spec.Initial, or the only
// state of kind initial. It returns "" when neither settles it.
func startState(spec *Spec) State {
	if spec.Initial != "" {
		return spec.Initial
	}
	var found State
	for _, s := range spec.States {
		if s.Kind == KindInitial {
			if found != "" {
				return ""
			}
			found = s.Name
		}
	}
	return found
}

func validateStart(spec *Spec, kinds map[State]StateSpec, p *problems) {
	if spec.Initial == "" {
		n := 0
		for _, s := range spec.States {
			if s.Kind == KindInitial {
				n++
			}
		}
		switch {
		case n == 0:
			p.add("no initial state: declare a state of kind initial or set Initial")
		case n > 1:
			p.add("%d states of kind initial: set Initial to the one new jobs start in", n)
		}
		return
	}
	s, ok := kinds[spec.Initial]
	switch {
	case !ok:
		p.add("initial state %q is not declared", spec.Initial)
	case s.Kind != KindInitial && s.Kind != KindReady:
		p.add("initial state %q is %s; new jobs may start only in an initial or ready state", s.Name, s.Kind)
	}
}

func ruleName(i int, r *Rule) string {
	from := make([]string, len(r.From))
	for j, f := range r.From {
		from[j] = string(f)
	}
	return fmt.Sprintf("rule #%d (%s --%s--> %s)", i+1, strings.Join(from, "|"), r.Event, r.To)
}

func validateRules(spec *Spec, kinds map[State]StateSpec, p *problems) {
	type key struct {
		from State
		ev   Event
	}
	// seen[key] lists the rules for one from+event, in order.
	seen := make(map[key][]int)
	var order []key
	for i := range spec.Rules {
		r := &spec.Rules[i]
		name := ruleName(i, r)
		if r.Event == "" {
			p.add("%s has an empty event", name)
		} else if pr := nameProblem(string(r.Event)); pr != "" {
			p.add("rule #%d: its event name %s", i+1, pr)
		}
		if len(r.From) == 0 {
			p.add("%s has no from state", name)
		}
		_, toOK := kinds[r.To]
		if r.To == "" {
			p.add("%s has an empty target state", name)
		} else if !toOK {
			p.add("%s targets unknown state %q", name, r.To)
		}
		fromSeen := make(map[State]bool, len(r.From))
		for _, f := range r.From {
			if fromSeen[f] {
				p.add("%s lists from state %q twice", name, f)
				continue
			}
			fromSeen[f] = true
			fs, ok := kinds[f]
			if !ok {
				p.add("%s leaves unknown state %q", name, f)
				continue
			}
			if fs.Kind == KindTerminal {
				p.add("%s leaves terminal state %q; nothing may leave a terminal state", name, f)
			}
			k := key{f, r.Event}
			if _, ok := seen[k]; !ok {
				order = append(order, k)
			}
			seen[k] = append(seen[k], i)
		}
	}
	for _, k := range order {
		idx := seen[k]
		if len(idx) < 2 {
			continue
		}
		for n, i := range idx {
			r := &spec.Rules[i]
			if r.Guard == nil && n < len(idx)-1 {
				other := idx[n+1]
				if spec.Rules[other].To == r.To && spec.Rules[other].Guard == nil {
					p.add("%s duplicates %s", ruleName(other, &spec.Rules[other]), ruleName(i, r))
				} else {
					p.add("%s is ambiguous: unguarded, it hides %s for event %q from %q", ruleName(i, r), ruleName(other, &spec.Rules[other]), k.ev, k.from)
				}
				break
			}
		}
	}
}

// validateGraph checks reachability from the start state and that every
// non-terminal state can leave and can still reach a terminal state.
func validateGraph(spec *Spec, kinds map[State]StateSpec, p *problems) {
	start := startState(spec)
	if _, ok := kinds[start]; !ok {
		return // reported by validateStart
	}
	next := make(map[State][]State)
	prev := make(map[State][]State)
	for _, r := range spec.Rules {
		if _, ok := kinds[r.To]; !ok {
			continue
		}
		for _, f := range r.From {
			if _, ok := kinds[f]; ok {
				next[f] = append(next[f], r.To)
				prev[r.To] = append(prev[r.To], f)
			}
		}
	}
	reached := walk([]State{start}, next)
	var ends []State
	for _, s := range spec.States {
		if s.Kind == KindTerminal {
			ends = append(ends, s.Name)
		}
	}
	finishes := walk(ends, prev)
	if len(ends) == 0 {
		p.add("no terminal state: every job must be able to finish")
	}
	reported := make(map[State]bool)
	for _, s := range spec.States {
		if s.Name == "" || reported[s.Name] {
			continue
		}
		reported[s.Name] = true
		if !reached[s.Name] {
			p.add("state %q is unreachable from initial state %q", s.Name, start)
		}
		if s.Kind == KindTerminal {
			continue
		}
		if len(next[s.Name]) == 0 {
			p.add("non-terminal state %q has no outgoing rule (a dead end)", s.Name)
		} else if len(ends) > 0 && !finishes[s.Name] {
			p.add("non-terminal state %q cannot reach any terminal state", s.Name)
		}
	}
}

func walk(from []State, edges map[State][]State) map[State]bool {
	seen := make(map[State]bool)
	stack := append([]State(nil), from...)
	for _, s := range from {
		seen[s] = true
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range edges[s] {
			if !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	return seen
}
