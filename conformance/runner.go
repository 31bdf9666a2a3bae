package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
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
		t.Fatalf("engine: %v", err)
	}
	for i, s := range v.Steps {
		r.step(i+1, s)
	}
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
		if !hasTarget {
			fail("vector error: history is expected but the step names no job")
		}
		h := res.history
		if !res.readHist {
			var err error
			if h, err = r.store.History(r.ctx, target); err != nil {
				fail("reading the history: %v", err)
			}
		}
		got := make([][3]string, len(h))
		for i, tr := range h {
			got[i] = [3]string{string(tr.From), string(tr.Event), string(tr.To)}
		}
		if !reflect.DeepEqual(got, e.History) {
			bad("history:\n got  %s\n want %s", triples(got), triples(e.History))
		}
	}
	if e.Records != nil {
		if !hasTarget {
			fail("vector error: records are expected but the step names no job")
		}
		h := res.history
		if !res.readHist {
			var err error
			if h, err = r.store.History(r.ctx, target); err != nil {
				fail("reading the history: %v", err)
			}
		}
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
		if !hasTarget {
			fail("vector error: executions are expected but the step names no job")
		}
		xs := res.execs
		if !res.readHist {
			var err error
			if xs, err = r.store.Executions(r.ctx, target); err != nil {
				fail("reading the executions: %v", err)
			}
		}
		got := make([]string, len(xs))
		for i, x := range xs {
			got[i] = string(x.Status)
		}
		if !reflect.DeepEqual(got, e.Executions) {
			bad("executions: got %v, want %v", got, e.Executions)
		}
	}
	if e.ExecutionErrors != nil {
		if !hasTarget {
			fail("vector error: execution errors are expected but the step names no job")
		}
		xs := res.execs
		if !res.readHist {
			var err error
			if xs, err = r.store.Executions(r.ctx, target); err != nil {
				fail("reading the executions: %v", err)
			}
		}
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

// do runs the step's operation.
func (r *runner) do(s Step, target uuid.UUID, hasTarget bool) (result, *stepError) {
	var res result
	ctx, eng := r.ctx, r.eng
	args, verr := decodeArgs(s.Args)
	if verr != nil {
		return res, verr
	}
	call := jobstate.Call{Actor: s.Actor, Reason: s.Reason, Args: args, IfVersion: s.IfVersion}
	machine := r.def.Name()
	if s.Machine != nil {
		machine = *s.Machine
	}
	needJob := func() *stepError {
		if !hasTarget || (s.Job == "" && s.JobID == "") {
			return &stepError{fmt.Sprintf("%s needs job or job_id", s.Op)}
		}
		return nil
	}
	setJob := func(j jobstate.Job, err error) {
		res.err = err
		if err == nil {
			res.job = &j
		}
	}
	switch s.Op {
	case "create":
		nj := jobstate.NewJob{
			Machine: machine, Owner: s.Owner, Key: s.Key, Priority: s.Priority,
			Actor: s.Actor, Reason: s.Reason, Args: args,
		}
		if s.Payload != nil {
			nj.Payload = []byte(*s.Payload)
		}
		var err *stepError
		if nj.TTL, err = parseDuration("ttl", s.TTL); err != nil {
			return res, err
		}
		if nj.Deadline, err = parseTime("deadline", s.Deadline); err != nil {
			return res, err
		}
		if nj.NotBefore, err = parseTime("not_before", s.NotBefore); err != nil {
			return res, err
		}
		if s.MaxRetries != nil {
			nj.Retry = &jobstate.RetryOverride{MaxRetries: jobstate.Retries(*s.MaxRetries)}
		}
		if s.Backoff != nil {
			b, err := s.Backoff.backoff()
			if err != nil {
				return res, err
			}
			if nj.Retry == nil {
				nj.Retry = &jobstate.RetryOverride{}
			}
			nj.Retry.Backoff = &b
		}
		nj.Fingerprint = s.Fingerprint
		c, e := eng.Create(ctx, nj)
		setJob(c.Job, e)
		if e == nil {
			res.existing = &c.Existing
		}
	case "fire":
		if err := needJob(); err != nil {
			return res, err
		}
		setJob(eng.Fire(ctx, target, jobstate.Event(s.Event), call))
	case "cancel":
		if err := needJob(); err != nil {
			return res, err
		}
		setJob(eng.Cancel(ctx, target, call))
	case "get":
		if err := needJob(); err != nil {
			return res, err
		}
		setJob(eng.Get(ctx, target))
	case "claim", "claim_job":
		ttl, err := parseDuration("ttl", s.TTL)
		if err != nil {
			return res, err
		}
		req := jobstate.ClaimRequest{Machine: machine, Worker: s.Worker, TTL: ttl, Args: args}
		var c jobstate.Claimed
		var e error
		if s.Op == "claim" {
			c, e = eng.Claim(ctx, req)
		} else {
			if err := needJob(); err != nil {
				return res, err
			}
			req.Machine = ""
			c, e = eng.ClaimJob(ctx, target, req)
		}
		setJob(c.Job, e)
		if e == nil {
			res.lease = &c.Lease
		}
	case "heartbeat":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		nl, e := eng.Heartbeat(ctx, l)
		res.err = e
		if e == nil {
			res.lease = &nl
		}
	case "start", "finish":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		if s.Op == "start" {
			setJob(eng.Start(ctx, l))
		} else {
			setJob(eng.Finish(ctx, l))
		}
	case "commit", "succeed":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		in := jobstate.CommitInput{}
		if s.Result != nil {
			in.Result = []byte(*s.Result)
		}
		if s.Effect != "" {
			fx, ok := NewRegistry().Effects[s.Effect]
			if !ok {
				return res, &stepError{fmt.Sprintf("no registry effect %q", s.Effect)}
			}
			in.Effect = fx
		}
		if s.Op == "commit" {
			setJob(eng.Commit(ctx, l, in))
		} else {
			setJob(eng.Succeed(ctx, l, in))
		}
	case "fail":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		cause, err := failure(s)
		if err != nil {
			return res, err
		}
		setJob(eng.Fail(ctx, l, cause))
	case "snooze":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		d, err := parseDuration("delay", s.Delay)
		if err != nil {
			return res, err
		}
		setJob(eng.Snooze(ctx, l, d))
	case "advance":
		l, err := r.lease(s)
		if err != nil {
			return res, err
		}
		setJob(eng.Advance(ctx, l, jobstate.Event(s.Event), call))
	case "apply":
		if err := needJob(); err != nil {
			return res, err
		}
		setJob(eng.Apply(ctx, target, s.Effect, call))
	case "redrive":
		if err := needJob(); err != nil {
			return res, err
		}
		setJob(eng.Redrive(ctx, target, call))
	case "sweep":
		rep, e := eng.Sweep(ctx)
		res.err, res.report = e, &rep
	case "recover_worker":
		rep, e := eng.RecoverWorker(ctx, s.Worker)
		res.err, res.report = e, &rep
	case "clock":
		switch {
		case s.Advance != "" && s.Set == "":
			d, err := parseDuration("advance", s.Advance)
			if err != nil {
				return res, err
			}
			r.clock.Advance(d)
		case s.Set != "" && s.Advance == "":
			tm, err := parseTime("set", s.Set)
			if err != nil {
				return res, err
			}
			r.clock.Set(tm)
		default:
			return res, &stepError{"clock needs advance or set"}
		}
	case "history":
		if err := needJob(); err != nil {
			return res, err
		}
		res.history, res.err = eng.History(ctx, target)
		res.readHist = res.err == nil
		if res.readHist {
			res.execs, res.err = eng.Executions(ctx, target)
		}
	case "executions":
		if err := needJob(); err != nil {
			return res, err
		}
		res.execs, res.err = eng.Executions(ctx, target)
		res.readHist = res.err == nil
		if res.readHist {
			res.history, res.err = eng.History(ctx, target)
		}
	case "list":
		q, cursor, err := r.listQuery(s)
		if err != nil {
			return res, err
		}
		page, e := eng.List(ctx, q, cursor)
		res.err = e
		if e == nil {
			res.page = &page
		}
	default:
		return res, &stepError{fmt.Sprintf("unknown op %q", s.Op)}
	}
	return res, nil
}

// listQuery builds the query and the cursor of a list step.
func (r *runner) listQuery(s Step) (jobstate.ListQuery, string, *stepError) {
	q := jobstate.ListQuery{Owner: s.Owner, Key: s.Key, Order: jobstate.ListOrder(s.Order), Desc: s.Desc, Limit: s.Limit}
	if s.Machine != nil {
		q.Machine = *s.Machine
	}
	for _, st := range s.States {
		q.States = append(q.States, jobstate.State(st))
	}
	for _, k := range s.Kinds {
		kind, ok := parseKind(k)
		if !ok {
			return q, "", &stepError{fmt.Sprintf("kinds: unknown kind %q", k)}
		}
		q.Kinds = append(q.Kinds, kind)
	}
	for _, o := range s.Outcomes {
		q.Outcomes = append(q.Outcomes, jobstate.Outcome(o))
	}
	for _, b := range []struct {
		name string
		text string
		to   *time.Time
	}{
		{"created_from", s.CreatedFrom, &q.CreatedFrom}, {"created_to", s.CreatedTo, &q.CreatedTo},
		{"updated_from", s.UpdatedFrom, &q.UpdatedFrom}, {"updated_to", s.UpdatedTo, &q.UpdatedTo},
		{"completed_from", s.CompletedFrom, &q.CompletedFrom}, {"completed_to", s.CompletedTo, &q.CompletedTo},
	} {
		t, err := parseTime(b.name, b.text)
		if err != nil {
			return q, "", err
		}
		*b.to = t
	}
	cursor := s.CursorText
	if s.Cursor != "" && s.CursorText != "" {
		return q, "", &stepError{"cursor and cursor_text exclude each other"}
	}
	if s.Cursor != "" {
		next, ok := r.pages[s.Cursor]
		switch {
		case !ok:
			return q, "", &stepError{fmt.Sprintf("no page named %q", s.Cursor)}
		case next == "":
			return q, "", &stepError{fmt.Sprintf("page %q was the last: it has no next cursor", s.Cursor)}
		}
		cursor = next
	}
	return q, cursor, nil
}

// parseKind reads a kind by its name.
func parseKind(name string) (jobstate.Kind, bool) {
	for k := jobstate.KindInitial; k.Valid(); k++ {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

// checkPage compares a list's page with the expectation.
func (r *runner) checkPage(want Page, got jobstate.ListPage, bad func(string, ...any)) *stepError {
	ids := make([]uuid.UUID, len(want.Jobs))
	for i, a := range want.Jobs {
		id, ok := r.jobs[a]
		if !ok {
			return &stepError{fmt.Sprintf("page: no job named %q", a)}
		}
		ids[i] = id
	}
	gotIDs := make([]uuid.UUID, len(got.Jobs))
	names := make([]string, len(got.Jobs))
	states := make([]string, len(got.Jobs))
	for i, j := range got.Jobs {
		gotIDs[i], names[i], states[i] = j.ID, r.aliasOf(j.ID), string(j.State)
	}
	if !reflect.DeepEqual(ids, gotIDs) {
		bad("page: got jobs %s, want %q", strings.Join(names, ", "), want.Jobs)
	}
	if want.States != nil && !reflect.DeepEqual(want.States, states) {
		bad("page: got states %q, want %q", states, want.States)
	}
	if want.Next != nil && *want.Next != (got.Next != "") {
		bad("page: next cursor %v, want %v", got.Next != "", *want.Next)
	}
	return nil
}

// failure builds the error a fail step reports.
func failure(s Step) (error, *stepError) {
	if s.Error == "" {
		if s.Class != "" {
			return nil, &stepError{"class without an error message"}
		}
		return nil, nil // Fail(nil): invalid_argument
	}
	err := errors.New(s.Error)
	switch s.Class {
	case "":
		return err, nil
	case "retryable":
		return jobstate.Retryable(err), nil
	case "permanent":
		return jobstate.Permanent(err), nil
	case "retry_after":
		d, verr := parseDuration("after", s.After)
		if verr != nil {
			return nil, verr
		}
		return jobstate.RetryAfter(err, d), nil
	}
	return nil, &stepError{fmt.Sprintf("unknown class %q", s.Class)}
}

// bind records the aliases a successful step introduces.
func (r *runner) bind(s Step, res result) *stepError {
	switch s.Op {
	case "create":
		alias := s.As
		if alias == "" {
			if *res.existing {
				return nil
			}
			alias = fmt.Sprintf("#%d", len(r.order)+1)
		}
		if id, ok := r.jobs[alias]; ok {
			if id != res.job.ID {
				return &stepError{fmt.Sprintf("job alias %q is already bound to another job", alias)}
			}
			return nil
		}
		r.jobs[alias] = res.job.ID
		r.order = append(r.order, alias)
	case "redrive":
		alias := s.As
		if alias == "" {
			alias = fmt.Sprintf("#%d", len(r.order)+1)
		}
		if _, ok := r.jobs[alias]; ok {
			return &stepError{fmt.Sprintf("job alias %q is already bound", alias)}
		}
		r.jobs[alias] = res.job.ID
		r.order = append(r.order, alias)
	case "claim", "claim_job":
		if s.As != "" {
			if _, ok := r.leases[s.As]; ok {
				return &stepError{fmt.Sprintf("lease alias %q is already bound", s.As)}
			}
			r.leases[s.As] = *res.lease
		}
	case "heartbeat":
		if s.Token == nil {
			r.leases[s.Lease] = *res.lease
		}
	case "list":
		if s.As != "" {
			if _, ok := r.pages[s.As]; ok {
				return &stepError{fmt.Sprintf("page alias %q is already bound", s.As)}
			}
			r.pages[s.As] = res.page.Next
		}
	default:
		if s.As != "" {
			return &stepError{fmt.Sprintf("%q binds no alias", s.Op)}
		}
	}
	return nil
}

func needsJob(e Expect) bool {
	return e.Job != nil || e.State != nil || e.Kind != nil || e.Outcome != nil || e.Version != nil ||
		e.Attempt != nil || e.RetryCount != nil || e.MaxRetries != nil || e.Leases != nil ||
		e.NotBefore != nil || e.Deadline != nil || e.StartedAt != nil || e.CompletedAt != nil ||
		e.LeaseExpiresAt != nil || e.LastError != nil || e.ErrorClass != nil || e.Committed != nil ||
		e.Result != nil || e.EffectCount != nil || e.UpdatedAt != nil || e.WakeAt != nil ||
		e.SweepFailures != nil || e.SweepRetryAt != nil || e.CancelRequested != nil || e.HeartbeatAt != nil
}

// checkJob compares the job's fields with the expectation.
func (r *runner) checkJob(e Expect, j *jobstate.Job, bad func(string, ...any)) *stepError {
	str := func(name string, want *string, got string) {
		if want != nil && *want != got {
			bad("%s: got %q, want %q", name, got, *want)
		}
	}
	num := func(name string, want *int, got int) {
		if want != nil && *want != got {
			bad("%s: got %d, want %d", name, got, *want)
		}
	}
	var verr *stepError
	tm := func(name string, want *string, got time.Time) {
		if want == nil {
			return
		}
		w, err := parseTime(name, *want)
		if err != nil {
			verr = err
			return
		}
		if !w.Equal(got) {
			bad("%s: got %s, want %s", name, timeText(got), timeText(w))
		}
	}
	if e.Job != nil {
		id, ok := r.jobs[*e.Job]
		if !ok {
			return &stepError{fmt.Sprintf("no job named %q", *e.Job)}
		}
		if id != j.ID {
			bad("job: got %s, want %q (%s)", r.aliasOf(j.ID), *e.Job, id)
		}
	}
	str("state", e.State, string(j.State))
	kind := ""
	if j.Kind.Valid() {
		kind = j.Kind.String()
	}
	str("kind", e.Kind, kind)
	str("outcome", e.Outcome, string(j.Outcome))
	if e.Version != nil && *e.Version != j.Version {
		bad("version: got %d, want %d", j.Version, *e.Version)
	}
	num("attempt", e.Attempt, j.Attempt)
	num("retry_count", e.RetryCount, j.RetryCount)
	num("max_retries", e.MaxRetries, j.MaxRetries)
	num("leases", e.Leases, j.Leases)
	tm("not_before", e.NotBefore, j.NotBefore)
	tm("deadline", e.Deadline, j.Deadline)
	tm("started_at", e.StartedAt, j.StartedAt)
	tm("completed_at", e.CompletedAt, j.CompletedAt)
	tm("lease_expires_at", e.LeaseExpiresAt, j.LeaseExpiresAt)
	tm("heartbeat_at", e.HeartbeatAt, j.HeartbeatAt)
	str("last_error", e.LastError, j.LastError)
	str("error_class", e.ErrorClass, string(j.ErrorClass))
	if e.Committed != nil {
		want := uuid.Nil
		if *e.Committed != "" {
			l, ok := r.leases[*e.Committed]
			if !ok {
				return &stepError{fmt.Sprintf("committed: no lease named %q", *e.Committed)}
			}
			want = l.ExecID
		}
		if j.Committed != want {
			bad("committed: got %s, want %q", r.leaseOf(j.Committed), *e.Committed)
		}
	}
	str("result", e.Result, string(j.Result))
	tm("updated_at", e.UpdatedAt, j.UpdatedAt)
	tm("wake_at", e.WakeAt, j.WakeAt)
	num("sweep_failures", e.SweepFailures, j.SweepFailures)
	tm("sweep_retry_at", e.SweepRetryAt, j.SweepRetryAt)
	if e.CancelRequested != nil && *e.CancelRequested != j.CancelRequested {
		bad("cancel_requested: got %v, want %v", j.CancelRequested, *e.CancelRequested)
	}
	for name, want := range e.EffectCount {
		if got := r.counts.get(j.ID, name); got != want {
			bad("effect_count[%s]: got %d, want %d", name, got, want)
		}
	}
	return verr
}

func (r *runner) checkReport(want Report, got jobstate.SweepReport, bad func(string, ...any)) *stepError {
	check := func(name string, w *int, g int) {
		if w != nil && *w != g {
			bad("report.%s: got %d, want %d", name, g, *w)
		}
	}
	check("jobs", want.Jobs, got.Jobs)
	check("finalized", want.Finalized, got.Finalized)
	check("aborted", want.Aborted, got.Aborted)
	check("retried", want.Retried, got.Retried)
	check("failed", want.Failed, got.Failed)
	check("requeued", want.Requeued, got.Requeued)
	check("expired", want.Expired, got.Expired)
	if want.Failures == nil {
		return nil
	}
	// Compared by job id and code: a job may have several aliases.
	type failure struct {
		id   uuid.UUID
		code string
	}
	wantF := make([]failure, len(want.Failures))
	for i, f := range want.Failures {
		id, ok := r.jobs[f.Job]
		if !ok {
			return &stepError{fmt.Sprintf("report.failures: no job named %q", f.Job)}
		}
		wantF[i] = failure{id, f.Error}
	}
	gotF := make([]failure, len(got.Failures))
	for i, f := range got.Failures {
		gotF[i] = failure{f.JobID, jobstate.Code(f.Err)}
	}
	if !reflect.DeepEqual(wantF, gotF) {
		bad("report.failures: got %v, want %v", gotF, wantF)
	}
	return nil
}

func (r *runner) aliasOf(id uuid.UUID) string {
	for a, x := range r.jobs {
		if x == id {
			return fmt.Sprintf("%q (%s)", a, id)
		}
	}
	return id.String()
}

func (r *runner) leaseOf(exec uuid.UUID) string {
	if exec == uuid.Nil {
		return `""`
	}
	for a, l := range r.leases {
		if l.ExecID == exec {
			return fmt.Sprintf("%q (%s)", a, exec)
		}
	}
	return exec.String()
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

func decodeArgs(raw json.RawMessage) (any, *stepError) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &stepError{fmt.Sprintf("args: %v", err)}
	}
	return v, nil
}

// backoff converts a create step's backoff.
func (b *StepBackoff) backoff() (jobstate.Backoff, *stepError) {
	out := jobstate.Backoff{Kind: jobstate.BackoffKind(b.Kind), Factor: b.Factor, Jitter: jobstate.Jitter(b.Jitter)}
	var err *stepError
	if out.Initial, err = parseDuration("backoff.initial", b.Initial); err != nil {
		return out, err
	}
	if out.Max, err = parseDuration("backoff.max", b.Max); err != nil {
		return out, err
	}
	return out, nil
}

// aliasRef is an alias written {alias} in an expected text.
var aliasRef = regexp.MustCompile(`\{([^{}]+)\}`)

// expandAliases replaces each {alias} of text by the id of the job bound
// to alias, or else of the execution of the lease bound to it.
func (r *runner) expandAliases(text string) (string, *stepError) {
	var verr *stepError
	out := aliasRef.ReplaceAllStringFunc(text, func(m string) string {
		name := m[1 : len(m)-1]
		if id, ok := r.jobs[name]; ok {
			return id.String()
		}
		if l, ok := r.leases[name]; ok {
			return l.ExecID.String()
		}
		verr = &stepError{fmt.Sprintf("no job or lease named %q", name)}
		return m
	})
	return out, verr
}

func parseDuration(name, s string) (time.Duration, *stepError) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &stepError{fmt.Sprintf("%s: %v", name, err)}
	}
	return d, nil
}

func parseTime(name, s string) (time.Time, *stepError) {
	if s == "" {
		return time.Time{}, nil
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &stepError{fmt.Sprintf("%s: %v", name, err)}
	}
	return tm, nil
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return `""`
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func triples(list [][3]string) string {
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = fmt.Sprintf("[%q %q %q]", x[0], x[1], x[2])
	}
	return strings.Join(parts, " ")
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
