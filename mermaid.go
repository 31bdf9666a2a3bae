package jobstate

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mermaid returns the machine as a Mermaid state diagram. The output is
// deterministic: the same Definition always gives the same text, byte for
// byte, so it can be kept in documentation and compared in golden files.
//
// The text starts with the line "stateDiagram-v2" and holds, in this order:
//
//   - one classDef per kind of state the machine uses (initial, ready,
//     active, waiting, terminal), then one per outcome its terminal states
//     carry (outcome_succeeded, outcome_failed, ...);
//   - every state in declaration order, as `state "<name>" as <id>`,
//     followed by `<id> : <description>` when the state has a description;
//   - the transitions, starting with `[*] --> <initial>` for the state new
//     jobs start in, then one edge per From state of each rule, in table
//     order (a rule with several From states gives one edge for each, in
//     the order listed), labelled with the event and, when the rule has a
//     GuardName, " [<GuardName>]", or " [guard]" when it has a Guard but no
//     GuardName, then, when the rule has an effect, " / <EffectName>" (or
//     " / effect" when it has no EffectName);
//   - for each once-only effect (Spec.Effects), a self-loop labelled
//     "<name> (once)" and its guard on every state where it may run: an
//     effect is not a state;
//   - `<id> --> [*]` for every terminal state, in declaration order;
//   - `class <id> <kind>` for every state in declaration order, and for a
//     terminal state also `class <id> outcome_<outcome>`.
//
// A state whose name is a plain identifier (ASCII letters, digits and
// underscores, starting with a letter or underscore, and not a word
// Mermaid reserves such as "state", "note", "class", "default" or "end")
// keeps its name as its id. Any other state ("dead letter", "a-b:c",
// "état", "state") gets the alias s<index>, its 0-based position in the
// declaration, with underscores appended should that clash with a state
// named so. Names, descriptions and labels are written with Mermaid's
// entity codes (#35; for '#', #58; for ':', ...) for the characters that
// Mermaid's syntax or its markup would otherwise interpret, so any State
// string, event, guard name or description renders as written.
func (d *Definition) Mermaid() string {
	ids := d.mermaidIDs()
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")

	var kinds [KindTerminal + 1]bool
	outcomes := make(map[Outcome]bool)
	for _, st := range d.states {
		if st.spec.Kind.Valid() {
			kinds[st.spec.Kind] = true
		}
		if st.spec.Kind == KindTerminal && st.spec.Outcome.Valid() {
			outcomes[st.spec.Outcome] = true
		}
	}
	for k := KindInitial; k <= KindTerminal; k++ {
		if kinds[k] {
			b.WriteString("    classDef " + k.String() + " " + mermaidKindStyle[k] + "\n")
		}
	}
	for _, o := range mermaidOutcomes {
		if outcomes[o.outcome] {
			b.WriteString("    classDef outcome_" + string(o.outcome) + " " + o.style + "\n")
		}
	}

	for i, st := range d.states {
		b.WriteString("    state \"" + mermaidText(string(st.spec.Name)) + "\" as " + ids[i] + "\n")
		if desc := strings.TrimSpace(st.spec.Description); desc != "" {
			b.WriteString("    " + ids[i] + " : " + mermaidText(desc) + "\n")
		}
	}

	if i := d.mermaidIndex(d.initial); i >= 0 {
		b.WriteString("    [*] --> " + ids[i] + "\n")
	}
	for _, r := range d.rules {
		to := d.mermaidIndex(r.To)
		if to < 0 {
			continue
		}
		label := mermaidText(string(r.Event))
		switch {
		case r.GuardName != "":
			label += " [" + mermaidText(r.GuardName) + "]"
		case r.Guard != nil:
			label += " [guard]"
		}
		switch {
		case r.EffectName != "":
			label += " / " + mermaidText(r.EffectName)
		case r.Effect != nil:
			label += " / effect"
		}
		label = strings.TrimSpace(label)
		for _, f := range r.From {
			from := d.mermaidIndex(f)
			if from < 0 {
				continue
			}
			b.WriteString("    " + ids[from] + " --> " + ids[to])
			if label != "" {
				b.WriteString(" : " + label)
			}
			b.WriteString("\n")
		}
	}
	// Once-only effects change no state: a self-loop on each state where
	// they may run (every state when they name none).
	for _, ef := range d.effects {
		label := mermaidText(ef.Name) + " (once)"
		if ef.GuardName != "" {
			label += " [" + mermaidText(ef.GuardName) + "]"
		} else if ef.Guard != nil {
			label += " [guard]"
		}
		for i, st := range d.states {
			if len(ef.In) == 0 || containsState(ef.In, st.spec.Name) {
				b.WriteString("    " + ids[i] + " --> " + ids[i] + " : " + label + "\n")
			}
		}
	}
	for i, st := range d.states {
		if st.spec.Kind == KindTerminal {
			b.WriteString("    " + ids[i] + " --> [*]\n")
		}
	}

	for i, st := range d.states {
		if st.spec.Kind.Valid() {
			b.WriteString("    class " + ids[i] + " " + st.spec.Kind.String() + "\n")
		}
		if st.spec.Kind == KindTerminal && st.spec.Outcome.Valid() {
			b.WriteString("    class " + ids[i] + " outcome_" + string(st.spec.Outcome) + "\n")
		}
	}
	return b.String()
}

var mermaidKindStyle = [...]string{
	KindInitial:  "fill:#eceff1,stroke:#546e7a",
	KindReady:    "fill:#e3f2fd,stroke:#1565c0",
	KindActive:   "fill:#fff3e0,stroke:#ef6c00",
	KindWaiting:  "fill:#f3e5f5,stroke:#6a1b9a",
	KindTerminal: "stroke-width:3px",
}

// mermaidOutcomes fixes the order and the style of the outcome classes.
var mermaidOutcomes = [...]struct {
	outcome Outcome
	style   string
}{
	{OutcomeSucceeded, "fill:#e8f5e9,stroke:#2e7d32"},
	{OutcomeFailed, "fill:#ffebee,stroke:#c62828"},
	{OutcomeCancelled, "fill:#f5f5f5,stroke:#757575"},
	{OutcomeExpired, "fill:#fff8e1,stroke:#f9a825"},
	{OutcomeRejected, "fill:#fce4ec,stroke:#ad1457"},
	{OutcomeDeadLettered, "fill:#efebe9,stroke:#4e342e"},
}

// mermaidIndex returns the index of state s, or -1.
func (d *Definition) mermaidIndex(s State) int {
	if i, ok := d.byName[s]; ok && i < len(d.states) {
		return i
	}
	return -1
}

// mermaidIDs returns the diagram id of every state, by state index: the
// name itself when it is a plain identifier, otherwise a unique alias.
func (d *Definition) mermaidIDs() []string {
	ids := make([]string, len(d.states))
	used := make(map[string]bool, len(d.states))
	for i, st := range d.states {
		if name := string(st.spec.Name); mermaidPlainID(name) && !used[name] {
			ids[i] = name
			used[name] = true
		}
	}
	for i := range d.states {
		if ids[i] != "" {
			continue
		}
		id := "s" + strconv.Itoa(i)
		for used[id] {
			id += "_"
		}
		ids[i] = id
		used[id] = true
	}
	return ids
}

// mermaidReserved lists, in lower case, the words that must not be used as
// state ids: keywords of the state diagram grammar (which is case
// insensitive) and ids Mermaid gives to nodes of its own.
var mermaidReserved = map[string]bool{
	"accdescr": true, "acctitle": true, "as": true, "call": true,
	"callback": true, "choice": true, "class": true, "classdef": true,
	"click": true, "direction": true, "end": true, "fork": true,
	"hide": true, "href": true, "join": true, "left": true, "link": true,
	"note": true, "of": true, "right": true, "root": true,
	"root_end": true, "root_start": true, "scale": true, "state": true,
	"statediagram": true, "style": true,
}

// mermaidPlainID reports whether name can be used as a state id as it is.
func mermaidPlainID(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	lower := strings.ToLower(name)
	if mermaidReserved[lower] || strings.HasPrefix(lower, "default") {
		return false
	}
	// Mermaid names the [*] nodes start1, end2, ... in some versions.
	for _, p := range []string{"start", "end"} {
		if rest, ok := strings.CutPrefix(lower, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return false
		}
	}
	return true
}

// mermaidText returns s ready to stand inside a quoted state name, a state
// description or a transition label. Characters that Mermaid's grammar or
// its HTML and markdown labels would interpret become entity codes, which
// Mermaid turns back into the characters in the rendered diagram; line
// breaks, other white space and control characters become spaces.
func mermaidText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == '\uFEFF':
			// A space after "direction" would let Mermaid read the whole
			// line as a direction statement ("direction LR").
			if out := b.String(); len(out) >= len("direction") && strings.EqualFold(out[len(out)-len("direction"):], "direction") {
				b.WriteString("#32;")
			} else {
				b.WriteByte(' ')
			}
		case strings.ContainsRune(`"#%&*:;<>[]`, r):
			b.WriteString("#" + strconv.Itoa(int(r)) + ";")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
