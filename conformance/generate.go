package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// This file holds the scenario generator of docs/conformance.md §6: it
// draws random step sequences over the machines of the hand-written
// vectors, runs them on the Go engine through the runner's own operation
// code (runner.do, runner.bind), and writes down everything each step
// gave as the step's expectation. cmd/genvectors writes the result to
// generated/; RunGenerated replays it.

// GenStart is the clock's first reading in every generated scenario.
const GenStart = "2026-01-01T00:00:00Z"

// GenOptions says what to generate.
type GenOptions struct {
	// Rand is the seed value of the random draws. Scenario n of a machine
	// depends only on Rand, the machine's label and n, so that asking for
	// more scenarios keeps the first ones.
	Rand uint64
	// PerMachine is how many scenarios to draw for each machine.
	PerMachine int
	// First is the number of the first scenario (0 for the corpus); a
	// later First draws scenarios the corpus does not have.
	First int
	// MinSteps and MaxSteps bound each scenario's length (defaults 8
	// and 40).
	MinSteps, MaxSteps int
}

// Finding is something the generator saw the engine do that a check of
// the runner, or an invariant of the specification (§5), does not allow.
// A finding that the runner would reject (a failing operation that changed
// stored state, a returned job that differs from the stored one) ends its
// scenario before the step, so that the corpus replays.
type Finding struct {
	// Scenario and Step (1-based) locate it; Steps is the scenario up to
	// and including the step, a reproduction.
	Scenario string
	Step     int
	Problem  string
	Steps    []Step
}

// Generate draws opts.PerMachine scenarios for machine m, running each on
// a fresh store from newStore. It returns the scenarios and the findings.
func Generate(m GenMachine, opts GenOptions, newStore func() jobstate.Store) ([]Vector, []Finding, error) {
	if opts.MinSteps <= 0 {
		opts.MinSteps = 8
	}
	if opts.MaxSteps < opts.MinSteps {
		opts.MaxSteps = max(40, opts.MinSteps)
	}
	h := fnv.New64a()
	h.Write([]byte(m.Label))
	lab := h.Sum64()
	var out []Vector
	var findings []Finding
	for n := opts.First; n < opts.First+opts.PerMachine; n++ {
		rnd := rand.New(rand.NewPCG(opts.Rand, lab^(uint64(n)*0x9e3779b97f4a7c15)))
		name := fmt.Sprintf("gen_%s_%04d", m.Label, n)
		v, fs, err := generateOne(m, name, opts, rnd, newStore())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, v)
		findings = append(findings, fs...)
	}
	return out, findings, nil
}

// generator is the state of one scenario being drawn.
type generator struct {
	r        *runner
	rnd      *rand.Rand
	def      *jobstate.Definition
	name     string
	steps    []Step
	findings []Finding
	jobs     []string // one alias per job, in creation order
	first    map[uuid.UUID]string
	leases   []string
	nLease   int
	nJob     int
	pages    []Step // the list steps that bound a page, with its next cursor
	nPage    int
	user     []jobstate.Event // user events of the table, sorted
	guards   map[string]bool
}

func generateOne(m GenMachine, name string, opts GenOptions, rnd *rand.Rand, store jobstate.Store) (Vector, []Finding, error) {
	def, err := jobstate.ParseDefinition(m.Definition, NewRegistry())
	if err != nil {
		return Vector{}, nil, err
	}
	start, _ := time.Parse(time.RFC3339Nano, GenStart)
	r := &runner{
		clock:  jobstate.NewManualClock(start),
		store:  store,
		def:    def,
		jobs:   make(map[string]uuid.UUID),
		leases: make(map[string]jobstate.Lease),
		pages:  make(map[string]string),
		counts: &counts{},
	}
	r.ctx = context.WithValue(context.Background(), countsKey{}, r.counts)
	var seq atomic.Uint64
	r.eng, err = jobstate.New(r.store,
		jobstate.WithClock(r.clock),
		jobstate.WithMachines(def),
		jobstate.WithIDs(func() (uuid.UUID, error) { return sequentialID(seq.Add(1)), nil }),
		jobstate.WithRandom(func() float64 { return 0.5 }),
	)
	if err != nil {
		return Vector{}, nil, err
	}
	g := &generator{r: r, rnd: rnd, def: def, name: name, first: make(map[uuid.UUID]string), guards: make(map[string]bool)}
	events := make(map[jobstate.Event]bool)
	for _, ru := range def.Rules() {
		if !jobstate.IsLifecycle(ru.Event) {
			events[ru.Event] = true
		}
		if ru.GuardName != "" {
			g.guards[ru.GuardName] = true
		}
	}
	if c := def.Create(); c.GuardName != "" {
		g.guards[c.GuardName] = true
	}
	for _, e := range def.Effects() {
		if e.GuardName != "" {
			g.guards[e.GuardName] = true
		}
	}
	for e := range events {
		g.user = append(g.user, e)
	}
	sort.Slice(g.user, func(i, j int) bool { return g.user[i] < g.user[j] })

	n := opts.MinSteps + rnd.IntN(opts.MaxSteps-opts.MinSteps+1)
	for len(g.steps) < n {
		s := g.draw()
		ok, err := g.run(s)
		if err != nil {
			return Vector{}, nil, err
		}
		if !ok {
			break // a finding the runner would reject ends the scenario
		}
	}
	v := Vector{
		Name: name,
		Description: fmt.Sprintf("generated by conformance/cmd/genvectors with seed value %d: a random sequence of operations on the machine of vector %s, "+
			"every step expecting every field it can (docs/conformance.md §6)", opts.Rand, m.From),
		Covers:     covers(g.steps),
		Definition: m.Definition,
		Start:      GenStart,
		Steps:      g.steps,
	}
	return v, g.findings, nil
}

// run executes s as the runner does, fills in its expectation from what
// the engine gave, and appends it. It reports false when the step shows a
// finding the runner rejects; the step is then left out.
func (g *generator) run(s Step) (bool, error) {
	r := g.r
	target, hasTarget, verr := r.target(s)
	if verr != nil {
		return false, errors.New(verr.msg)
	}
	if hasTarget && r.def.Policy().LazyExpiry && getsFirst(s) {
		_, _ = r.eng.Get(r.ctx, target)
	}
	before := r.snapshot()
	res, verr := r.do(s, target, hasTarget)
	if verr != nil {
		return false, fmt.Errorf("step %d (%s): %s", len(g.steps)+1, describe(s), verr.msg)
	}
	s.Expect = Expect{Error: jobstate.Code(res.err)}
	if res.err != nil && s.Op != "sweep" && s.Op != "recover_worker" && !errors.Is(res.err, jobstate.ErrIncomplete) {
		if after := r.snapshot(); !reflect.DeepEqual(before, after) {
			g.find(s, "a failing operation (%s) changed stored state:\n%s", s.Expect.Error, diffSnapshots(before, after))
			return false, nil
		}
	}
	if res.err == nil {
		if verr := r.bind(s, res); verr != nil {
			return false, fmt.Errorf("step %d (%s): %s", len(g.steps)+1, describe(s), verr.msg)
		}
		g.note(s, res)
		if res.job != nil {
			target, hasTarget = res.job.ID, true
			stored, err := r.store.Get(r.ctx, res.job.ID)
			if err != nil || !reflect.DeepEqual(*res.job, stored) {
				g.find(s, "the operation returned a job that differs from the stored one:\n returned %+v\n stored   %+v (%v)", *res.job, stored, err)
				return false, nil
			}
		}
	}
	e := &s.Expect
	if s.Op == "create" && res.err == nil {
		e.Existing = ptr(*res.existing)
	}
	if res.lease != nil && res.err == nil {
		e.Token = ptr(res.lease.Token)
	}
	if res.page != nil {
		p := &Page{Jobs: []string{}, States: []string{}, Next: ptr(res.page.Next != "")}
		for _, j := range res.page.Jobs {
			p.Jobs = append(p.Jobs, g.first[j.ID])
			p.States = append(p.States, string(j.State))
		}
		e.Page = p
	}
	if res.report != nil {
		rp := res.report
		e.Report = &Report{
			Jobs: ptr(rp.Jobs), Finalized: ptr(rp.Finalized), Aborted: ptr(rp.Aborted), Retried: ptr(rp.Retried),
			Failed: ptr(rp.Failed), Requeued: ptr(rp.Requeued), Expired: ptr(rp.Expired),
			Failures: []Failure{},
		}
		for _, f := range rp.Failures {
			a, ok := g.first[f.JobID]
			if !ok {
				return false, fmt.Errorf("report: a failure of job %s, which the scenario did not create", f.JobID)
			}
			e.Report.Failures = append(e.Report.Failures, Failure{Job: a, Error: jobstate.Code(f.Err)})
		}
	}
	if hasTarget && s.Op != "clock" {
		job := res.job
		if job == nil || res.err != nil {
			if j, err := r.store.Get(r.ctx, target); err == nil {
				job = &j
			}
		}
		if job != nil {
			g.expectJob(s, e, job, res.err == nil)
		}
		if s.Op == "history" || s.Op == "executions" {
			if res.readHist {
				e.History = make([][3]string, len(res.history))
				for i, tr := range res.history {
					e.History[i] = [3]string{string(tr.From), string(tr.Event), string(tr.To)}
				}
				e.Executions = make([]string, len(res.execs))
				for i, x := range res.execs {
					e.Executions[i] = string(x.Status)
				}
			}
		}
	}
	g.steps = append(g.steps, s)
	g.invariants()
	return true, nil
}

// note records the aliases a successful step bound.
func (g *generator) note(s Step, res result) {
	switch s.Op {
	case "create", "redrive":
		if s.As != "" {
			g.nJob++
		}
		if _, ok := g.first[res.job.ID]; !ok {
			g.first[res.job.ID] = s.As
			g.jobs = append(g.jobs, s.As)
		}
	case "claim", "claim_job":
		g.nLease++
		g.leases = append(g.leases, s.As)
	case "list":
		if s.As != "" {
			g.nPage++
			if res.page.Next != "" {
				g.pages = append(g.pages, s)
			}
		}
	}
}

// expectJob sets every job key of e from j.
func (g *generator) expectJob(s Step, e *Expect, j *jobstate.Job, ok bool) {
	r := g.r
	switch s.Op {
	case "create", "claim", "claim_job", "redrive":
		if a, found := g.first[j.ID]; found && ok {
			e.Job = ptr(a)
		}
	}
	kind := ""
	if j.Kind.Valid() {
		kind = j.Kind.String()
	}
	e.State = ptr(string(j.State))
	e.Kind = ptr(kind)
	e.Outcome = ptr(string(j.Outcome))
	e.Version = ptr(j.Version)
	e.Attempt = ptr(j.Attempt)
	e.RetryCount = ptr(j.RetryCount)
	e.MaxRetries = ptr(j.MaxRetries)
	e.Leases = ptr(j.Leases)
	e.NotBefore = ptr(genTime(j.NotBefore))
	e.Deadline = ptr(genTime(j.Deadline))
	e.StartedAt = ptr(genTime(j.StartedAt))
	e.CompletedAt = ptr(genTime(j.CompletedAt))
	e.LeaseExpiresAt = ptr(genTime(j.LeaseExpiresAt))
	e.LastError = ptr(j.LastError)
	e.ErrorClass = ptr(string(j.ErrorClass))
	if j.Committed == uuid.Nil {
		e.Committed = ptr("")
	} else {
		for _, a := range g.leases {
			if r.leases[a].ExecID == j.Committed {
				e.Committed = ptr(a)
				break
			}
		}
	}
	e.Result = ptr(string(j.Result))
	e.UpdatedAt = ptr(genTime(j.UpdatedAt))
	e.WakeAt = ptr(genTime(j.WakeAt))
	e.SweepFailures = ptr(j.SweepFailures)
	e.SweepRetryAt = ptr(genTime(j.SweepRetryAt))
	e.CancelRequested = ptr(j.CancelRequested)
	e.EffectCount = map[string]int{"count": r.counts.get(j.ID, "count")}
}

// find records a finding at the step about to be appended.
func (g *generator) find(s Step, format string, args ...any) {
	steps := append(append([]Step(nil), g.steps...), s)
	g.findings = append(g.findings, Finding{Scenario: g.name, Step: len(steps), Problem: fmt.Sprintf(format, args...), Steps: steps})
}

// invariants checks, after each step, the invariants of the specification
// (§5) that one job shows on its own, for every job of the scenario, and
// records a finding for each that fails.
func (g *generator) invariants() {
	r := g.r
	last := len(g.steps) - 1
	for _, a := range g.jobs {
		id := r.jobs[a]
		j, err := r.store.Get(r.ctx, id)
		if err != nil {
			continue
		}
		xs, _ := r.store.Executions(r.ctx, id)
		hist, _ := r.store.History(r.ctx, id)
		bad := func(format string, args ...any) {
			g.findings = append(g.findings, Finding{Scenario: g.name, Step: last + 1,
				Problem: fmt.Sprintf("job %s: ", a) + fmt.Sprintf(format, args...), Steps: append([]Step(nil), g.steps...)})
		}
		st, ok := g.def.State(j.State)
		switch {
		case !ok:
			bad("state %q is not declared", j.State)
		case st.Kind != j.Kind || st.Outcome != j.Outcome:
			bad("state %q is %v/%q but the job says %v/%q", j.State, st.Kind, st.Outcome, j.Kind, j.Outcome)
		}
		live, done := 0, 0
		for _, x := range xs {
			if x.Status.Live() {
				live++
			}
			if x.Status == jobstate.ExecCommitted || x.Status == jobstate.ExecDone {
				done++
			}
		}
		if live != j.Leases {
			bad("leases %d but %d live executions", j.Leases, live)
		}
		if m := g.def.Policy().MaxExecutions; live > max(m, 1) {
			bad("%d live executions, max_executions %d", live, m)
		}
		if done > 1 {
			bad("%d executions COMMITTED or DONE", done)
		}
		if j.MaxRetries >= 0 && j.RetryCount > j.MaxRetries {
			bad("retry_count %d above max_retries %d", j.RetryCount, j.MaxRetries)
		}
		if w := g.def.WakeAt(j); !w.Equal(j.WakeAt) {
			bad("wake time %s, Definition.WakeAt gives %s", genTime(j.WakeAt), genTime(w))
		}
		if len(hist) == 0 || hist[len(hist)-1].To != j.State {
			bad("history does not end in the job's state %q", j.State)
		} else if got, err := g.def.Replay(hist); err != nil || got != j.State {
			bad("history replays to %q (%v), job is in %q", got, err, j.State)
		}
		if int64(len(hist)) > j.Version {
			bad("%d history records, version %d", len(hist), j.Version)
		}
		if g.def.Policy().DerivedState {
			if err := jobstate.CheckProjection(j, xs); err != nil {
				bad("derived state: %v", err)
			}
		}
		if (j.Committed != uuid.Nil) != (done == 1) {
			bad("committed %v but %d executions COMMITTED or DONE", j.Committed != uuid.Nil, done)
		}
		if j.Kind == jobstate.KindTerminal && live > 0 {
			bad("terminal with %d live executions", live)
		}
	}
}

// ---- drawing steps ----

func (g *generator) now() time.Time { return g.r.clock.Now() }

func (g *generator) chance(p float64) bool { return g.rnd.Float64() < p }

func pick[T any](g *generator, xs ...T) T { return xs[g.rnd.IntN(len(xs))] }

// stored reads a job without lazy expiry, for the generator's choices.
func (g *generator) stored(alias string) (jobstate.Job, []jobstate.Execution, bool) {
	id := g.r.jobs[alias]
	j, err := g.r.store.Get(g.r.ctx, id)
	if err != nil {
		return jobstate.Job{}, nil, false
	}
	xs, _ := g.r.store.Executions(g.r.ctx, id)
	return j, xs, true
}

// claimable reports whether a claim could find a job: one in a ready
// state and due.
func (g *generator) claimable() bool {
	for _, a := range g.jobs {
		if j, _, ok := g.stored(a); ok && j.Due(g.now()) {
			return true
		}
	}
	return false
}

// committedLease returns a live lease whose execution committed, or "".
func (g *generator) committedLease(live []string) string {
	for _, a := range live {
		l := g.r.leases[a]
		xs, _ := g.r.store.Executions(g.r.ctx, l.JobID)
		for _, x := range xs {
			if x.ID == l.ExecID && x.Status == jobstate.ExecCommitted {
				return a
			}
		}
	}
	return ""
}

// liveLeases lists the lease aliases whose execution is live.
func (g *generator) liveLeases() []string {
	var out []string
	for _, a := range g.leases {
		l := g.r.leases[a]
		xs, _ := g.r.store.Executions(g.r.ctx, l.JobID)
		for _, x := range xs {
			if x.ID == l.ExecID && x.Status.Live() {
				out = append(out, a)
			}
		}
	}
	return out
}

// missingJob is the literal id of a job that no scenario has.
const missingJob = "ffffffff-ffff-7fff-bfff-ffffffffffff"

// covers lists the sections of the specification the steps exercise.
func covers(steps []Step) []string {
	set := map[string]bool{"1.2": true, "4.1": true, "4.23": true}
	bySection := map[string][]string{
		"create":         {"4.2"},
		"fire":           {"4.4", "2.5"},
		"cancel":         {"4.5", "4.20"},
		"get":            {"4.3"},
		"history":        {"4.3", "1.5"},
		"executions":     {"4.3", "1.3"},
		"claim":          {"4.6", "1.4"},
		"claim_job":      {"4.7", "1.4"},
		"heartbeat":      {"4.8", "1.4"},
		"start":          {"4.9", "1.3"},
		"advance":        {"4.10"},
		"commit":         {"4.11"},
		"finish":         {"4.12"},
		"succeed":        {"4.13"},
		"fail":           {"4.14", "4.15", "4.16"},
		"snooze":         {"4.15"},
		"apply":          {"4.22"},
		"redrive":        {"4.26"},
		"sweep":          {"4.17"},
		"recover_worker": {"4.25"},
		"list":           {"4.25"},
	}
	for _, s := range steps {
		for _, c := range bySection[s.Op] {
			set[c] = true
		}
		if s.Expect.Error != "" {
			set["6"] = true
		}
		if s.Key != "" {
			set["4.18"] = true
		}
		if s.TTL != "" && s.Op == "create" || s.Deadline != "" {
			set["4.20"] = true
		}
		if s.Effect != "" && (s.Op == "commit" || s.Op == "succeed") {
			set["4.21.1"] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return sectionLess(out[i], out[j]) })
	return out
}

// sectionLess orders section numbers numerically, part by part.
func sectionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

// genTime writes a time as the expectations do: "" for unset, else RFC
// 3339 in UTC.
func genTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func ptr[T any](v T) *T { return &v }

// Fingerprint returns a short hash of data, for the manifest.
func Fingerprint(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
