package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// This file holds the runner's operations (docs/conformance.md §2.3):
// each step's engine call, built from the step's arguments, and the
// aliases it binds.

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
			Machine: machine, Owner: s.Owner, Key: s.Key, ConcurrencyKey: s.ConcurrencyKey, Priority: s.Priority,
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
		if s.TTL != "" {
			if l.TTL, err = parseDuration("ttl", s.TTL); err != nil {
				return res, err
			}
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
	case "redefine":
		def, err := jobstate.ParseDefinition(s.Definition, NewRegistry())
		if err != nil {
			return res, &stepError{fmt.Sprintf("redefine: the definition does not load: %v", err)}
		}
		if def.Name() != r.def.Name() {
			return res, &stepError{fmt.Sprintf("redefine: machine %q, want the vector's %q", def.Name(), r.def.Name())}
		}
		e, err := r.engine(def)
		if err != nil {
			return res, &stepError{fmt.Sprintf("redefine: %v", err)}
		}
		r.def, r.eng = def, e
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
