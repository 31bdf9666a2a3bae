package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Run replays every embedded vector as a subtest named after it, each on a
// fresh store from newStore, an engine with a jobstate.ManualClock reading
// the vector's start time, sequential ids and a jitter draw fixed at 0.5
// (docs/conformance.md §2.1). It stops a vector at its first step that
// does not give what it expects.
//
// A vector that this Go engine is known to fail (see knownIssues) is
// skipped with the reason, not weakened: the vector states the specified
// behaviour, and the skip goes when the engine is fixed.
func Run(t *testing.T, newStore func(t *testing.T) jobstate.Store) {
	t.Helper()
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if why, ok := knownIssues[v.Name]; ok {
				t.Skip("known engine issue: " + why)
			}
			RunVector(t, v, newStore)
		})
	}
}

// knownIssues maps the names of vectors the Go engine does not yet pass to
// the engine defect each one exposes. It is empty when the engine conforms.
var knownIssues = map[string]string{}

// RunVector replays one vector. Its definition is loaded with
// jobstate.ParseDefinition and NewRegistry(); a vector whose definition
// must not load is checked against its expected error and problem
// fragments, and newStore is not called.
func RunVector(t *testing.T, v Vector, newStore func(t *testing.T) jobstate.Store) {
	t.Helper()
	def, err := jobstate.ParseDefinition(v.Definition, NewRegistry())
	want := LoadExpect{}
	if v.Expect != nil {
		want = *v.Expect
	}
	if got := jobstate.Code(err); got != want.Error {
		t.Fatalf("loading the definition: got code %q (%v), want %q", got, err, want.Error)
	}
	if err != nil {
		for _, frag := range want.Problems {
			if !strings.Contains(err.Error(), frag) {
				t.Errorf("loading the definition: the error does not mention %q:\n%v", frag, err)
			}
		}
		var de *jobstate.DefinitionError
		if want.Complete && (!errors.As(err, &de) || !reflect.DeepEqual(de.Problems, want.Problems)) {
			t.Errorf("loading the definition: the problems are not exactly, in order:\n  %s\ngot:\n%v", strings.Join(want.Problems, "\n  "), err)
		}
		return
	}
	start, err := time.Parse(time.RFC3339Nano, v.Start)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	r := &runner{
		t:      t,
		clock:  jobstate.NewManualClock(start),
		store:  newStore(t),
		def:    def,
		jobs:   make(map[string]uuid.UUID),
		leases: make(map[string]jobstate.Lease),
		pages:  make(map[string]string),
		counts: &counts{},
		seq:    new(atomic.Uint64),
	}
	if kl, ok := r.store.(jobstate.KeyLimiter); (!ok || !kl.LimitsKeys()) && v.usesKeyLimits() {
		t.Skip("the store does not enforce Policy.MaxPerKey (jobstate.KeyLimiter)")
	}
	r.ctx = context.WithValue(context.Background(), countsKey{}, r.counts)
	r.draw = 0.5
	if v.Draw != nil {
		r.draw = *v.Draw
	}
	if r.eng, err = r.engine(def); err != nil {
		t.Fatalf("engine: %v", err)
	}
	for i, s := range v.Steps {
		r.step(i+1, s)
	}
}

// engine makes the vector's engine running def, over the runner's store,
// clock, ids and draw, with an observer that records what it is told.
func (r *runner) engine(def *jobstate.Definition) (*jobstate.Engine, error) {
	return jobstate.New(r.store,
		jobstate.WithClock(r.clock),
		jobstate.WithMachines(def),
		jobstate.WithIDs(func() (uuid.UUID, error) { return sequentialID(r.seq.Add(1)), nil }),
		jobstate.WithRandom(func() float64 { return r.draw }),
		jobstate.WithObserver(func(_ context.Context, _ jobstate.Job, tr jobstate.Transition) {
			r.observed = append(r.observed, [3]string{string(tr.From), string(tr.Event), string(tr.To)})
		}),
	)
}

// sequentialID is the n-th id of a vector's engine: a version 7 UUID whose
// last 48 bits count, so ids sort in the order they were made.
func sequentialID(n uint64) uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[8:], n)
	id[6] = 0x70
	id[8] = 0x80
	return id
}

type runner struct {
	t      *testing.T
	ctx    context.Context
	clock  *jobstate.ManualClock
	store  jobstate.Store
	eng    *jobstate.Engine
	def    *jobstate.Definition
	jobs   map[string]uuid.UUID
	order  []string // job aliases in the order they were bound
	leases map[string]jobstate.Lease
	pages  map[string]string // page alias → the page's next cursor
	counts *counts
	// observed are the records the observers were told of during the
	// current step.
	observed [][3]string
	seq      *atomic.Uint64 // the last id issued
	draw     float64        // the random draw of backoff jitter
}

// result is what one operation gave.
type result struct {
	err      error
	job      *jobstate.Job // the job the operation returned
	lease    *jobstate.Lease
	existing *bool
	report   *jobstate.SweepReport
	history  []jobstate.Transition
	execs    []jobstate.Execution
	readHist bool // history/execs were read by the op itself
	page     *jobstate.ListPage
}

// stepError reports a problem of the vector itself (not of the engine).
type stepError struct{ msg string }

func (r *runner) step(n int, s Step) {
	t := r.t
	t.Helper()
	label := fmt.Sprintf("step %d (%s)", n, describe(s))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s", label, fmt.Sprintf(format, args...))
	}

	target, hasTarget, verr := r.target(s)
	if verr != nil {
		fail("vector error: %s", verr.msg)
	}
	if hasTarget && r.def.Policy().LazyExpiry && getsFirst(s) {
		// Lazy expiry precedes the operation as a write of its own and
		// stays if the operation fails: compare from after it.
		_, _ = r.eng.Get(r.ctx, target)
	}
	before := r.snapshot()

	r.observed = nil
	res, verr := r.do(s, target, hasTarget)
	if verr != nil {
		fail("vector error: %s", verr.msg)
	}

	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if got := jobstate.Code(res.err); got != s.Expect.Error {
		if res.err != nil {
			bad("error: got %q (%v), want %q", got, res.err, s.Expect.Error)
		} else {
			bad("error: got success, want %q", s.Expect.Error)
		}
		fail("%s", strings.Join(problems, "; "))
	}
	if res.err != nil && s.Op != "sweep" && s.Op != "recover_worker" && !s.SkipGet && !errors.Is(res.err, jobstate.ErrIncomplete) {
		if after := r.snapshot(); !reflect.DeepEqual(before, after) {
			bad("a failing operation changed stored state:\n%s", diffSnapshots(before, after))
		}
	}

	// Bind aliases after success.
	if res.err == nil {
		if verr := r.bind(s, res); verr != nil {
			fail("vector error: %s", verr.msg)
		}
		if res.job != nil {
			target, hasTarget = res.job.ID, true
			stored, err := r.store.Get(r.ctx, res.job.ID)
			if err != nil {
				bad("reading the job back: %v", err)
			} else if !reflect.DeepEqual(*res.job, stored) {
				bad("the operation returned a job that differs from the stored one:\n returned %+v\n stored   %+v", *res.job, stored)
			}
		}
		if res.page != nil {
			for _, j := range res.page.Jobs {
				stored, err := r.store.Get(r.ctx, j.ID)
				if err != nil {
					bad("reading listed job %s back: %v", r.aliasOf(j.ID), err)
				} else if !reflect.DeepEqual(j, stored) {
					bad("the list returned a job that differs from the stored one:\n returned %+v\n stored   %+v", j, stored)
				}
			}
		}
	}

	e := s.Expect
	if e.Existing != nil {
		if res.existing == nil {
			fail("vector error: existing is only given by create")
		}
		if *res.existing != *e.Existing {
			bad("existing: got %v, want %v", *res.existing, *e.Existing)
		}
	}
	if e.Token != nil {
		if res.lease == nil {
			fail("vector error: token is only given by claim, claim_job and heartbeat")
		}
		if res.lease.Token != *e.Token {
			bad("token: got %d, want %d", res.lease.Token, *e.Token)
		}
	}
	if e.LeaseExpires != nil || e.LeaseTTL != nil {
		if res.lease == nil {
			fail("vector error: lease_expires and lease_ttl are only given by claim, claim_job and heartbeat")
		}
		if e.LeaseExpires != nil {
			w, verr := parseTime("lease_expires", *e.LeaseExpires)
			if verr != nil {
				fail("vector error: %s", verr.msg)
			}
			if !w.Equal(res.lease.ExpiresAt) {
				bad("lease_expires: got %s, want %s", timeText(res.lease.ExpiresAt), timeText(w))
			}
		}
		if e.LeaseTTL != nil {
			w, verr := parseDuration("lease_ttl", *e.LeaseTTL)
			if verr != nil {
				fail("vector error: %s", verr.msg)
			}
			if w != res.lease.TTL {
				bad("lease_ttl: got %s, want %s", res.lease.TTL, w)
			}
		}
	}
	for _, name := range e.Wraps {
		want, ok := RegistryErrors()[name]
		if !ok {
			fail("vector error: wraps: no registry error named %q", name)
		}
		if !errors.Is(res.err, want) {
			bad("error: got %v, which does not wrap the registry's %q", res.err, name)
		}
	}
	if e.Observed != nil && !reflect.DeepEqual(r.observed, e.Observed) && (len(r.observed) > 0 || len(e.Observed) > 0) {
		bad("observed:\n got  %s\n want %s", triples(r.observed), triples(e.Observed))
	}
	if e.Report != nil {
		if res.report == nil {
			fail("vector error: report is only given by sweep and recover_worker")
		}
		if verr := r.checkReport(*e.Report, *res.report, bad); verr != nil {
			fail("vector error: %s", verr.msg)
		}
	}
	if e.Page != nil {
		if res.page == nil {
			fail("vector error: page is only given by list")
		}
		if verr := r.checkPage(*e.Page, *res.page, bad); verr != nil {
			fail("vector error: %s", verr.msg)
		}
	}

	// history and executions return the records of the step's job, as
	// the operation read them or read now; what says what the step
	// expects of them, for the vector error of a step that names no job.
	history := func(what string) []jobstate.Transition {
		t.Helper()
		if !hasTarget {
			fail("vector error: %s expected but the step names no job", what)
		}
		if res.readHist {
			return res.history
		}
		h, err := r.store.History(r.ctx, target)
		if err != nil {
			fail("reading the history: %v", err)
		}
		return h
	}
	executions := func(what string) []jobstate.Execution {
		t.Helper()
		if !hasTarget {
			fail("vector error: %s expected but the step names no job", what)
		}
		if res.readHist {
			return res.execs
		}
		xs, err := r.store.Executions(r.ctx, target)
		if err != nil {
			fail("reading the executions: %v", err)
		}
		return xs
	}
	if needsJob(e) {
		if !hasTarget {
			fail("vector error: job fields are expected but the step names no job")
		}
		job := res.job
		if job == nil || res.err != nil {
			j, err := r.store.Get(r.ctx, target)
			if err != nil {
				fail("reading the job: %v", err)
			}
			job = &j
		}
		if verr := r.checkJob(e, job, bad); verr != nil {
			fail("vector error: %s", verr.msg)
		}
	}
	if e.History != nil {
		h := history("history is")
		got := make([][3]string, len(h))
		for i, tr := range h {
			got[i] = [3]string{string(tr.From), string(tr.Event), string(tr.To)}
		}
		if !reflect.DeepEqual(got, e.History) {
			bad("history:\n got  %s\n want %s", triples(got), triples(e.History))
		}
	}
	if e.Records != nil {
		h := history("records are")
		got := make([][2]string, len(h))
		for i, tr := range h {
			got[i] = [2]string{tr.Actor, tr.Reason}
		}
		want := make([][2]string, len(e.Records))
		for i, rec := range e.Records {
			for k, text := range rec {
				x, verr := r.expandAliases(text)
				if verr != nil {
					fail("vector error: %s", verr.msg)
				}
				want[i][k] = x
			}
		}
		if !reflect.DeepEqual(got, want) {
			bad("records (actor, reason):\n got  %q\n want %q", got, want)
		}
	}
	if e.Executions != nil {
		xs := executions("executions are")
		got := make([]string, len(xs))
		for i, x := range xs {
			got[i] = string(x.Status)
		}
		if !reflect.DeepEqual(got, e.Executions) {
			bad("executions: got %v, want %v", got, e.Executions)
		}
	}
	if e.ExecutionStartedAt != nil {
		xs := executions("execution start times are")
		got := make([]string, len(xs))
		for i, x := range xs {
			got[i] = timeText(x.StartedAt)
		}
		want := make([]string, len(e.ExecutionStartedAt))
		for i, text := range e.ExecutionStartedAt {
			w, verr := parseTime("execution_started_at", text)
			if verr != nil {
				fail("vector error: %s", verr.msg)
			}
			want[i] = timeText(w)
		}
		if !reflect.DeepEqual(got, want) {
			bad("execution start times: got %q, want %q", got, want)
		}
	}
	if e.ExecutionErrors != nil {
		xs := executions("execution errors are")
		got := make([]string, len(xs))
		for i, x := range xs {
			got[i] = x.Error
		}
		want := make([]string, len(e.ExecutionErrors))
		for i, text := range e.ExecutionErrors {
			x, verr := r.expandAliases(text)
			if verr != nil {
				fail("vector error: %s", verr.msg)
			}
			want[i] = x
		}
		if !reflect.DeepEqual(got, want) {
			bad("execution errors:\n got  %q\n want %q", got, want)
		}
	}
	if len(problems) > 0 {
		fail("%s", strings.Join(problems, "\n  "))
	}
}

// getsFirst reports whether the runner reads a step's job with a get
// before the step, on a machine with lazy expiry (docs/conformance.md
// §2.5): for every operation on a named job or lease but those that do no
// lazy expiry, unless the step asks it not to (skip_get).
func getsFirst(s Step) bool {
	switch s.Op {
	case "claim", "sweep", "recover_worker", "create", "clock", "history", "executions":
		return false
	}
	return !s.SkipGet
}

// target resolves the job a step names: job alias, literal job id, or the
// job of the named lease.
func (r *runner) target(s Step) (uuid.UUID, bool, *stepError) {
	switch {
	case s.Job != "" && s.JobID != "":
		return uuid.Nil, false, &stepError{"give job or job_id, not both"}
	case s.Job != "":
		id, ok := r.jobs[s.Job]
		if !ok {
			return uuid.Nil, false, &stepError{fmt.Sprintf("no job named %q", s.Job)}
		}
		return id, true, nil
	case s.JobID != "":
		id, err := uuid.Parse(s.JobID)
		if err != nil {
			return uuid.Nil, false, &stepError{fmt.Sprintf("job_id: %v", err)}
		}
		return id, true, nil
	case s.Lease != "":
		l, ok := r.leases[s.Lease]
		if !ok {
			return uuid.Nil, false, &stepError{fmt.Sprintf("no lease named %q", s.Lease)}
		}
		return l.JobID, true, nil
	}
	return uuid.Nil, false, nil
}

func (r *runner) lease(s Step) (jobstate.Lease, *stepError) {
	if s.Lease == "" {
		return jobstate.Lease{}, &stepError{fmt.Sprintf("%s needs a lease", s.Op)}
	}
	l, ok := r.leases[s.Lease]
	if !ok {
		return jobstate.Lease{}, &stepError{fmt.Sprintf("no lease named %q", s.Lease)}
	}
	if s.Token != nil {
		l.Token = *s.Token
	}
	return l, nil
}

// stored is everything stored about one job.
type stored struct {
	Job        jobstate.Job
	Executions []jobstate.Execution
	History    []jobstate.Transition
	Effects    []jobstate.EffectRecord
	Errs       [4]string
}

type snapshot struct {
	Jobs   map[string]stored
	Counts map[uuid.UUID]map[string]int
}

// snapshot reads everything stored about every job the vector named.
func (r *runner) snapshot() snapshot {
	s := snapshot{Jobs: make(map[string]stored, len(r.order)), Counts: r.counts.snapshot()}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, a := range r.order {
		id := r.jobs[a]
		var st stored
		var err error
		st.Job, err = r.store.Get(r.ctx, id)
		st.Errs[0] = errText(err)
		st.Executions, err = r.store.Executions(r.ctx, id)
		st.Errs[1] = errText(err)
		st.History, err = r.store.History(r.ctx, id)
		st.Errs[2] = errText(err)
		st.Effects, err = r.store.Effects(r.ctx, id)
		st.Errs[3] = errText(err)
		s.Jobs[a] = st
	}
	return s
}

func diffSnapshots(a, b snapshot) string {
	var out []string
	for alias, x := range a.Jobs {
		y := b.Jobs[alias]
		if !reflect.DeepEqual(x.Job, y.Job) {
			out = append(out, fmt.Sprintf("job %q: %+v\n  became %+v", alias, x.Job, y.Job))
		}
		if !reflect.DeepEqual(x.Executions, y.Executions) {
			out = append(out, fmt.Sprintf("job %q executions: %+v\n  became %+v", alias, x.Executions, y.Executions))
		}
		if !reflect.DeepEqual(x.History, y.History) {
			out = append(out, fmt.Sprintf("job %q history: %d records became %d", alias, len(x.History), len(y.History)))
		}
		if !reflect.DeepEqual(x.Effects, y.Effects) {
			out = append(out, fmt.Sprintf("job %q effects: %+v became %+v", alias, x.Effects, y.Effects))
		}
	}
	if !reflect.DeepEqual(a.Counts, b.Counts) {
		out = append(out, fmt.Sprintf("effect counts: %v became %v", a.Counts, b.Counts))
	}
	return strings.Join(out, "\n")
}

// describe names a step for messages.
func describe(s Step) string {
	parts := []string{s.Op}
	for _, p := range []string{s.Event, s.Job, s.Lease, s.Worker, s.Effect, s.Advance, s.Set, s.Error, s.Cursor} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// usesKeyLimits reports whether v creates a job with a concurrency key or
// defines a machine with a limit per key: only a store that enforces the
// limit (jobstate.KeyLimiter) can run it.
func (v Vector) usesKeyLimits() bool {
	var def struct {
		Policy struct {
			MaxPerKey float64 `json:"max_per_key"`
		} `json:"policy"`
	}
	if json.Unmarshal(v.Definition, &def) == nil && def.Policy.MaxPerKey > 0 {
		return true
	}
	for _, s := range v.Steps {
		if s.ConcurrencyKey != "" {
			return true
		}
	}
	return false
}
