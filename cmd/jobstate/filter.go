package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// listFlag is a flag that may be repeated and takes comma-separated
// values: --state QUEUED,RUNNING --state RETRYING.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return errors.New("empty value in list")
		}
		*l = append(*l, s)
	}
	return nil
}

// filterFlags are the filters of Engine.List, as flags.
type filterFlags struct {
	machine                    string
	states, kinds, outcomes    listFlag
	owner, key                 string
	createdFrom, createdTo     string
	updatedFrom, updatedTo     string
	completedFrom, completedTo string
	order                      string
	desc                       bool
}

// register adds the filter flags to fs; withOrder adds --order and --desc
// too (list: bulk actions take jobs in creation order).
func (f *filterFlags) register(fs *flag.FlagSet, withOrder bool) {
	f.order = "created"
	fs.StringVar(&f.machine, "machine", "", "only jobs of this machine")
	fs.Var(&f.states, "state", "only jobs in these states (comma-separated, repeatable)")
	fs.Var(&f.kinds, "kind", "only jobs whose state has these kinds: initial, ready, active, waiting, terminal")
	fs.Var(&f.outcomes, "outcome", "only jobs with these outcomes: succeeded, failed, cancelled, expired, rejected, dead_lettered")
	fs.StringVar(&f.owner, "owner", "", "only jobs of this owner")
	fs.StringVar(&f.key, "key", "", "only the job created with this idempotency key")
	for _, r := range []struct {
		name     string
		from, to *string
	}{{"created", &f.createdFrom, &f.createdTo}, {"updated", &f.updatedFrom, &f.updatedTo}, {"completed", &f.completedFrom, &f.completedTo}} {
		fs.StringVar(r.from, r.name+"-from", "", "only jobs "+r.name+" at or after this time (RFC 3339, or a duration ago such as 24h)")
		fs.StringVar(r.to, r.name+"-to", "", "only jobs "+r.name+" before this time (RFC 3339, or a duration ago)")
	}
	if withOrder {
		fs.StringVar(&f.order, "order", "created", "sort by creation (created) or last update (updated) time")
		fs.BoolVar(&f.desc, "desc", false, "newest first")
	}
}

// set reports whether any filter is set (the order is no filter).
func (f *filterFlags) set() bool {
	return f.machine != "" || len(f.states)+len(f.kinds)+len(f.outcomes) > 0 || f.owner != "" || f.key != "" ||
		f.createdFrom != "" || f.createdTo != "" || f.updatedFrom != "" || f.updatedTo != "" ||
		f.completedFrom != "" || f.completedTo != ""
}

// query builds the ListQuery of the flags, times relative to now.
func (f *filterFlags) query(now time.Time) (jobstate.ListQuery, error) {
	q := jobstate.ListQuery{Machine: f.machine, Owner: f.owner, Key: f.key, Desc: f.desc}
	for _, s := range f.states {
		q.States = append(q.States, jobstate.State(s))
	}
	for _, k := range f.kinds {
		var kind jobstate.Kind
		if err := kind.UnmarshalText([]byte(k)); err != nil {
			return q, usagef("--kind %q: want initial, ready, active, waiting or terminal", k)
		}
		q.Kinds = append(q.Kinds, kind)
	}
	for _, o := range f.outcomes {
		if !jobstate.Outcome(o).Valid() {
			return q, usagef("--outcome %q: want succeeded, failed, cancelled, expired, rejected or dead_lettered", o)
		}
		q.Outcomes = append(q.Outcomes, jobstate.Outcome(o))
	}
	switch f.order {
	case "created":
		q.Order = jobstate.OrderCreated
	case "updated":
		q.Order = jobstate.OrderUpdated
	default:
		return q, usagef("--order %q: want created or updated", f.order)
	}
	for _, t := range []struct {
		name string
		text string
		dst  *time.Time
	}{
		{"created-from", f.createdFrom, &q.CreatedFrom}, {"created-to", f.createdTo, &q.CreatedTo},
		{"updated-from", f.updatedFrom, &q.UpdatedFrom}, {"updated-to", f.updatedTo, &q.UpdatedTo},
		{"completed-from", f.completedFrom, &q.CompletedFrom}, {"completed-to", f.completedTo, &q.CompletedTo},
	} {
		v, err := parseWhen(t.text, now)
		if err != nil {
			return q, usagef("--%s: %v", t.name, err)
		}
		*t.dst = v
	}
	return q, nil
}

// absoluteTimes returns the time flags given as durations ago, as the
// flags of the times q resolved them to: a cursor is bound to its query's
// times, so the next page must be asked for with these, not with times
// that moved with the clock.
func (f *filterFlags) absoluteTimes(q jobstate.ListQuery) []string {
	var out []string
	for _, t := range []struct {
		name string
		text string
		at   time.Time
	}{
		{"created-from", f.createdFrom, q.CreatedFrom}, {"created-to", f.createdTo, q.CreatedTo},
		{"updated-from", f.updatedFrom, q.UpdatedFrom}, {"updated-to", f.updatedTo, q.UpdatedTo},
		{"completed-from", f.completedFrom, q.CompletedFrom}, {"completed-to", f.completedTo, q.CompletedTo},
	} {
		if t.text == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, t.text); err != nil {
			out = append(out, "--"+t.name, t.at.Format(time.RFC3339Nano))
		}
	}
	return out
}

// parseWhen reads a time flag: "" for none, an RFC 3339 time, or a
// duration meaning that long before now ("90m", "24h").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Before(jobstate.MinTime) || t.After(jobstate.MaxTime) {
			return time.Time{}, fmt.Errorf("%q is outside the years 1 to 9999", s)
		}
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a duration ago (24h)", s)
	}
	if d < 0 || d > jobstate.MaxDuration {
		return time.Time{}, fmt.Errorf("duration %s is outside 0 to %s", d, jobstate.MaxDuration)
	}
	return now.Add(-d).UTC(), nil
}

// checkQuery refuses, before any database is reached, a query the engine
// would refuse: it runs it, with cursor, on an engine with the same
// machines over an empty in-memory store. An unknown machine or state, a
// malformed filter or cursor is a usage error naming what is wrong.
func checkQuery(ctx context.Context, defs []definitionFile, q jobstate.ListQuery, cursor string) error {
	if q.Machine != "" {
		found := false
		for _, d := range defs {
			found = found || d.def.Name() == q.Machine
		}
		if !found {
			if len(defs) == 0 {
				return usagef("unknown machine %q: no definitions given (--definitions or JOBSTATE_DEFINITIONS)", q.Machine)
			}
			return usagef("unknown machine %q (the definitions hold %s)", q.Machine, strings.Join(quoteAll(machineNames(defs)), ", "))
		}
	}
	if len(q.States) > 0 && len(defs) == 0 {
		return usagef("unknown state %q: no definitions given (--definitions or JOBSTATE_DEFINITIONS)", q.States[0])
	}
	eng, err := newEngine(memstore.New(), defs)
	if err != nil {
		return usagef("%v", err)
	}
	if _, err := eng.List(ctx, q, cursor); err != nil {
		msg := strings.TrimPrefix(err.Error(), jobstate.ErrInvalidArgument.Error()+": ")
		return usagef("%s", msg)
	}
	return nil
}
