package jobstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Registry resolves the names a JSON definition uses for code: guards (of
// rules, of creation and of once-only effects), effect functions (of
// rules, of creation, and the Run of once-only effects) and error
// classifiers. A name that is absent from its map, or mapped to a nil
// function, is an error of ParseSpec. The zero Registry resolves nothing:
// it suits definitions that name no code. ParseSpec only reads the maps.
type Registry struct {
	// Guards resolves "guard" in rules, "create" and "effects".
	Guards map[string]Guard
	// Effects resolves "effect" in rules and "create", and "run" in
	// "effects".
	Effects map[string]EffectFunc
	// Classifiers resolves "policy.classify".
	Classifiers map[string]Classifier
}

// ParseSpec decodes the JSON form of a machine definition (documented in
// docs/conformance.md) into a Spec, resolving every guard, effect and
// classifier name through reg. It decodes only: the Spec it returns is
// checked by NewDefinition like any Spec built in Go (ParseDefinition does
// both).
//
// The input must be one JSON object. Keys are snake_case and matched
// exactly; an unknown key anywhere is an error, and null counts as an
// absent value. Absent values are the zero values of the Go fields, so the
// defaults are NewDefinition's (a zero lease TTL means DefaultLeaseTTL,
// and so on). Durations are Go duration strings ("1s", "1m30s"); state
// kinds are written by name ("initial", "ready", "active", "waiting",
// "terminal"); outcomes, backoff kinds and jitters by their string values.
// An effect's "run" defaults to the effect's own name.
//
// Errors: a *DefinitionError (errors.Is ErrInvalidDefinition) listing every
// problem found, each prefixed by the path of the field at fault, such as
// `rules[2].guard: unknown guard "owner"` or
// `policy.lease_ttl: invalid duration "5 s"`. ParseSpec never panics,
// whatever data holds.
//
// Every function is resolved together with its name, kept in the Spec
// (GuardName, EffectName, RunName, ClassifyName), so MarshalSpec can write
// it back.
func ParseSpec(data []byte, reg Registry) (Spec, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Spec{}, &DefinitionError{Problems: []string{jsonProblem(err)}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, &DefinitionError{Problems: []string{"invalid JSON: unexpected data after the definition object"}}
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return Spec{}, &DefinitionError{Problems: []string{fmt.Sprintf("a definition is a JSON object, not %s", jsonKind(raw))}}
	}
	name, _ := obj["name"].(string)
	var p problems
	checkShape(raw, reflect.TypeOf(specJSON{}), "", &p)
	if len(p.list) > 0 {
		return Spec{}, &DefinitionError{Machine: name, Problems: p.list}
	}
	var js specJSON
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&js); err != nil {
		// checkShape accepted the document, so this is not expected; report
		// it rather than trust a partial decode.
		return Spec{}, &DefinitionError{Machine: name, Problems: []string{jsonProblem(err)}}
	}
	spec := js.spec(reg, &p)
	if len(p.list) > 0 {
		return Spec{}, &DefinitionError{Machine: js.Name, Problems: p.list}
	}
	return spec, nil
}

// ParseDefinition is ParseSpec followed by NewDefinition: a JSON definition
// is validated exactly like one built in Go. Errors: the *DefinitionError
// of either step (errors.Is ErrInvalidDefinition). It never panics.
func ParseDefinition(data []byte, reg Registry) (*Definition, error) {
	spec, err := ParseSpec(data, reg)
	if err != nil {
		return nil, err
	}
	return NewDefinition(spec)
}

// MarshalSpec writes s in the JSON form that ParseSpec reads, naming code
// by name: a rule's guard and effect by Rule.GuardName and
// Rule.EffectName, creation's by CreateSpec.GuardName and EffectName, a
// once-only effect's guard and Run by EffectSpec.GuardName and RunName, the
// classifier by Policy.ClassifyName.
// Zero values are left out, durations are written as Go duration strings,
// kinds by name. ParseSpec of the result, with a registry resolving the
// same names to the same functions, gives back a Spec equal to s, except
// that empty lists come back nil.
//
// MarshalSpec checks that s can be written, not that it is a valid
// definition. Errors (wrapping ErrInvalidArgument) name the field at
// fault: a function with no name to write it by, a name with no function
// behind it (which would give the definition code it does not have), an
// invalid kind, a backoff factor JSON cannot hold (NaN, ±Inf). It never
// panics.
func MarshalSpec(s Spec) ([]byte, error) {
	js, err := specToJSON(s)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return out, nil
}

// MarshalJSON writes the definition in the JSON form of MarshalSpec. The
// policy is written with NewDefinition's defaults filled in (lease_ttl,
// max_executions) and the initial state named, so the output is equivalent
// to, not necessarily identical with, the Spec the definition was built
// from. A nil *Definition is written as null.
func (d *Definition) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	return MarshalSpec(Spec{
		Name:    d.Name(),
		States:  d.States(),
		Initial: d.Initial(),
		Rules:   d.Rules(),
		Policy:  d.Policy(),
		Create:  d.Create(),
		Effects: d.Effects(),
	})
}

// The JSON form. Field order is the order MarshalSpec writes.
type specJSON struct {
	Name    string       `json:"name"`
	Initial string       `json:"initial,omitempty"`
	States  []stateJSON  `json:"states"`
	Rules   []ruleJSON   `json:"rules"`
	Policy  *policyJSON  `json:"policy,omitempty"`
	Create  *createJSON  `json:"create,omitempty"`
	Effects []effectJSON `json:"effects,omitempty"`
}

type stateJSON struct {
	Name        string `json:"name"`
	Kind        string `json:"kind,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	Description string `json:"description,omitempty"`
}

type ruleJSON struct {
	From        []string `json:"from"`
	Event       string   `json:"event"`
	To          string   `json:"to"`
	Guard       string   `json:"guard,omitempty"`
	Effect      string   `json:"effect,omitempty"`
	Description string   `json:"description,omitempty"`
}

type policyJSON struct {
	LeaseTTL        string     `json:"lease_ttl,omitempty"`
	MaxExecutions   int        `json:"max_executions,omitempty"`
	MaxPerKey       int        `json:"max_per_key,omitempty"`
	Retry           *retryJSON `json:"retry,omitempty"`
	Classify        string     `json:"classify,omitempty"`
	RequireStart    bool       `json:"require_start,omitempty"`
	FailOnLeaseLoss bool       `json:"fail_on_lease_loss,omitempty"`
	LazyExpiry      bool       `json:"lazy_expiry,omitempty"`
	DerivedState    bool       `json:"derived_state,omitempty"`
	Idempotency     *idemJSON  `json:"idempotency,omitempty"`
	RedriveFrom     []string   `json:"redrive_from,omitempty"`
}

type retryJSON struct {
	MaxRetries int          `json:"max_retries,omitempty"`
	Backoff    *backoffJSON `json:"backoff,omitempty"`
}

type backoffJSON struct {
	Kind    string  `json:"kind,omitempty"`
	Initial string  `json:"initial,omitempty"`
	Factor  float64 `json:"factor,omitempty"`
	Max     string  `json:"max,omitempty"`
	Jitter  string  `json:"jitter,omitempty"`
}

type idemJSON struct {
	Retention string   `json:"retention,omitempty"`
	ReleaseIn []string `json:"release_in,omitempty"`
}

type createJSON struct {
	Guard  string `json:"guard,omitempty"`
	Effect string `json:"effect,omitempty"`
}

type effectJSON struct {
	Name  string   `json:"name"`
	In    []string `json:"in,omitempty"`
	Guard string   `json:"guard,omitempty"`
	Run   string   `json:"run,omitempty"`
}

// spec converts the decoded form, resolving names through reg; problems
// go to p.
func (js *specJSON) spec(reg Registry, p *problems) Spec {
	s := Spec{Name: js.Name, Initial: State(js.Initial)}
	for i, st := range js.States {
		ss := StateSpec{Name: State(st.Name), Outcome: Outcome(st.Outcome), Description: st.Description}
		if st.Kind != "" {
			if err := ss.Kind.UnmarshalText([]byte(st.Kind)); err != nil {
				p.add("states[%d].kind: unknown kind %q (want initial, ready, active, waiting or terminal)", i, st.Kind)
			}
		}
		s.States = append(s.States, ss)
	}
	for i, r := range js.Rules {
		rule := Rule{From: toStates(r.From), Event: Event(r.Event), To: State(r.To), Description: r.Description}
		path := fmt.Sprintf("rules[%d]", i)
		rule.Guard, rule.GuardName = lookup(reg.Guards, "guard", path+".guard", r.Guard, p)
		rule.Effect, rule.EffectName = lookup(reg.Effects, "effect", path+".effect", r.Effect, p)
		s.Rules = append(s.Rules, rule)
	}
	if pj := js.Policy; pj != nil {
		pol := &s.Policy
		pol.LeaseTTL = duration("policy.lease_ttl", pj.LeaseTTL, p)
		pol.MaxExecutions = pj.MaxExecutions
		pol.MaxPerKey = pj.MaxPerKey
		if rj := pj.Retry; rj != nil {
			pol.Retry.MaxRetries = rj.MaxRetries
			if bj := rj.Backoff; bj != nil {
				pol.Retry.Backoff = Backoff{
					Kind:    BackoffKind(bj.Kind),
					Initial: duration("policy.retry.backoff.initial", bj.Initial, p),
					Factor:  bj.Factor,
					Max:     duration("policy.retry.backoff.max", bj.Max, p),
					Jitter:  Jitter(bj.Jitter),
				}
			}
		}
		if pj.Classify != "" {
			pol.Classify, pol.ClassifyName = lookup(reg.Classifiers, "classifier", "policy.classify", pj.Classify, p)
		}
		pol.RequireStart = pj.RequireStart
		pol.FailOnLeaseLoss = pj.FailOnLeaseLoss
		pol.LazyExpiry = pj.LazyExpiry
		pol.DerivedState = pj.DerivedState
		pol.RedriveFrom = toStates(pj.RedriveFrom)
		if ij := pj.Idempotency; ij != nil {
			pol.Idempotency.Retention = duration("policy.idempotency.retention", ij.Retention, p)
			pol.Idempotency.ReleaseIn = toStates(ij.ReleaseIn)
		}
	}
	if cj := js.Create; cj != nil {
		s.Create.Guard, s.Create.GuardName = lookup(reg.Guards, "guard", "create.guard", cj.Guard, p)
		s.Create.Effect, s.Create.EffectName = lookup(reg.Effects, "effect", "create.effect", cj.Effect, p)
	}
	for i, ej := range js.Effects {
		path := fmt.Sprintf("effects[%d]", i)
		ef := EffectSpec{Name: ej.Name, In: toStates(ej.In)}
		ef.Guard, ef.GuardName = lookup(reg.Guards, "guard", path+".guard", ej.Guard, p)
		run := ej.Run
		if run == "" {
			run = ej.Name // "run" defaults to the effect's own name
		}
		if run != "" {
			ef.Run, ef.RunName = lookup(reg.Effects, "effect", path+".run", run, p)
		}
		s.Effects = append(s.Effects, ef)
	}
	return s
}

// toStates converts a list of names; an empty list is nil, as absent.
func toStates(list []string) []State {
	if len(list) == 0 {
		return nil
	}
	out := make([]State, len(list))
	for i, s := range list {
		out[i] = State(s)
	}
	return out
}

// lookup resolves a name through one registry map. The empty name is no
// function. It returns the function and the name to keep beside it.
func lookup[F any](m map[string]F, what, path, name string, p *problems) (F, string) {
	var zero F
	if name == "" {
		return zero, ""
	}
	fn, ok := m[name]
	if !ok || reflect.ValueOf(&fn).Elem().IsNil() {
		known := make([]string, 0, len(m))
		for k := range m {
			known = append(known, strconv.Quote(k))
		}
		sort.Strings(known)
		if len(known) == 0 {
			p.add("%s: unknown %s %q (the registry has none)", path, what, name)
		} else {
			p.add("%s: unknown %s %q (the registry has %s)", path, what, name, strings.Join(known, ", "))
		}
		return zero, ""
	}
	return fn, name
}

// duration parses a Go duration string; "" is zero.
func duration(path, s string, p *problems) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.add("%s: invalid duration %q (want a Go duration such as \"1s\" or \"1m30s\")", path, s)
		return 0
	}
	return d
}

// jsonProblem describes a decoding error of data.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte offset %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		return fmt.Sprintf("%s: JSON %s cannot be a %s", te.Field, te.Value, te.Type)
	case errors.Is(err, io.EOF):
		return "invalid JSON: empty input"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: unexpected end of input"
	}
	return "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON type of a value decoded with UseNumber.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// checkShape checks a decoded JSON value against the Go type it is to be
// decoded into: keys matched exactly (encoding/json would also accept
// other cases), no unknown keys, JSON types fitting, integers in range. It
// reports every problem with its full path. null stands for absent.
func checkShape(v any, t reflect.Type, path string, p *problems) {
	if v == nil {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func() string {
		if path == "" {
			return "definition"
		}
		return path
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			p.add("%s: want an object, not %s", at(), jsonKind(v))
			return
		}
		fields := make(map[string]reflect.Type, t.NumField())
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields[name] = f.Type
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				p.add("%s: unknown field %q", at(), k)
				continue
			}
			checkShape(obj[k], ft, sub, p)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			p.add("%s: want an array, not %s", at(), jsonKind(v))
			return
		}
		for i, e := range arr {
			checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), p)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.add("%s: want a string, not %s", at(), jsonKind(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.add("%s: want true or false, not %s", at(), jsonKind(v))
		}
	case reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			p.add("%s: want an integer, not %s", at(), jsonKind(v))
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, strconv.IntSize); err != nil {
			p.add("%s: %s is not an integer in range", at(), n)
		}
	case reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			p.add("%s: want a number, not %s", at(), jsonKind(v))
			return
		}
		if f, err := strconv.ParseFloat(string(n), 64); err != nil || math.IsInf(f, 0) {
			p.add("%s: %s is out of range", at(), n)
		}
	}
}

// specToJSON converts s to the JSON form, refusing what cannot be written.
func specToJSON(s Spec) (*specJSON, error) {
	var p problems
	js := &specJSON{Name: s.Name, Initial: string(s.Initial), States: []stateJSON{}, Rules: []ruleJSON{}}
	for i, st := range s.States {
		sj := stateJSON{Name: string(st.Name), Outcome: string(st.Outcome), Description: st.Description}
		if st.Kind != 0 {
			k, err := st.Kind.MarshalText()
			if err != nil {
				p.add("states[%d].kind: invalid kind %d", i, uint8(st.Kind))
			}
			sj.Kind = string(k)
		}
		js.States = append(js.States, sj)
	}
	for i, r := range s.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		js.Rules = append(js.Rules, ruleJSON{
			From:        fromStates(r.From),
			Event:       string(r.Event),
			To:          string(r.To),
			Guard:       named(r.Guard == nil, r.GuardName, "Guard", "GuardName", path+".guard", &p),
			Effect:      named(r.Effect == nil, r.EffectName, "Effect", "EffectName", path+".effect", &p),
			Description: r.Description,
		})
	}
	if pj := policyToJSON(s.Policy, &p); pj != nil {
		js.Policy = pj
	}
	if c := s.Create; c.Guard != nil || c.Effect != nil || c.GuardName != "" || c.EffectName != "" {
		js.Create = &createJSON{
			Guard:  named(c.Guard == nil, c.GuardName, "Guard", "GuardName", "create.guard", &p),
			Effect: named(c.Effect == nil, c.EffectName, "Effect", "EffectName", "create.effect", &p),
		}
	}
	for i, ef := range s.Effects {
		path := fmt.Sprintf("effects[%d]", i)
		ej := effectJSON{
			Name:  ef.Name,
			In:    fromStates(ef.In),
			Guard: named(ef.Guard == nil, ef.GuardName, "Guard", "GuardName", path+".guard", &p),
		}
		ej.Run = named(ef.Run == nil, ef.RunName, "Run", "RunName", path+".run", &p)
		js.Effects = append(js.Effects, ej)
	}
	if len(p.list) > 0 {
		return nil, fmt.Errorf("%w: cannot write definition %q as JSON:\n  - %s", ErrInvalidArgument, s.Name, strings.Join(p.list, "\n  - "))
	}
	return js, nil
}

func policyToJSON(pol Policy, p *problems) *policyJSON {
	pj := &policyJSON{
		LeaseTTL:        durationText(pol.LeaseTTL),
		MaxExecutions:   pol.MaxExecutions,
		MaxPerKey:       pol.MaxPerKey,
		RequireStart:    pol.RequireStart,
		FailOnLeaseLoss: pol.FailOnLeaseLoss,
		LazyExpiry:      pol.LazyExpiry,
		DerivedState:    pol.DerivedState,
		RedriveFrom:     fromStatesOrNil(pol.RedriveFrom),
	}
	if r := pol.Retry; r.MaxRetries != 0 || r.Backoff != (Backoff{}) {
		pj.Retry = &retryJSON{MaxRetries: r.MaxRetries}
		if b := r.Backoff; b != (Backoff{}) {
			if math.IsNaN(b.Factor) || math.IsInf(b.Factor, 0) {
				p.add("policy.retry.backoff.factor: %v cannot be written in JSON", b.Factor)
			}
			pj.Retry.Backoff = &backoffJSON{
				Kind: string(b.Kind), Initial: durationText(b.Initial), Factor: b.Factor,
				Max: durationText(b.Max), Jitter: string(b.Jitter),
			}
		}
	}
	pj.Classify = named(pol.Classify == nil, pol.ClassifyName, "Classify", "ClassifyName", "policy.classify", p)
	if id := pol.Idempotency; id.Retention != 0 || len(id.ReleaseIn) > 0 {
		pj.Idempotency = &idemJSON{Retention: durationText(id.Retention), ReleaseIn: fromStates(id.ReleaseIn)}
	}
	if reflect.DeepEqual(*pj, policyJSON{}) {
		return nil
	}
	return pj
}

// named returns the name to write for a function, checking that name and
// function come together.
func named(noFn bool, name, fnField, nameField, path string, p *problems) string {
	switch {
	case !noFn && name == "":
		p.add("%s: the %s has no %s to write it by", path, fnField, nameField)
	case noFn && name != "":
		p.add("%s: %s %q names no %s function; written, it would give the definition code it does not have", path, nameField, name, fnField)
	}
	return name
}

// fromStates converts a list of states for writing; never nil, so that a
// rule's "from" is written as [] rather than null.
func fromStates(list []State) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// fromStatesOrNil is fromStates, but nil for an empty list, for optional
// fields left out when empty.
func fromStatesOrNil(list []State) []string {
	if len(list) == 0 {
		return nil
	}
	return fromStates(list)
}
