package ui

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
)

// errQuery marks a query string the job list refuses (a 400).
var errQuery = errors.New("ui: bad query")

// filter is the job list's query string, parsed: the form's values as
// given, and the listing query and cursor they make.
type filter struct {
	Machine string
	States  []string
	Owner   string
	Key     string
	// The time bounds as typed, for the form.
	CreatedFrom, CreatedTo string
	UpdatedFrom, UpdatedTo string
	Order                  string // "created" or "updated"
	Desc                   bool
	Cursor                 string

	query jobstate.ListQuery
}

// maxQueryValue bounds the length of one query-string value.
const maxQueryValue = 1024

// timeLayouts are the accepted forms of a time bound: RFC 3339, and the
// browser's datetime-local forms, read as UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %s %q is not a time (use 2006-01-02T15:04:05Z or 2006-01-02T15:04)", errQuery, name, s)
}

// parseFilter reads the job list's query string. machine looks a machine
// up by name; only the names in known are accepted. It refuses, with
// errQuery and one line saying why, an unknown machine, a state no listed
// machine has (or the chosen machine lacks), a time it cannot read, an
// unknown order or direction, a value not valid UTF-8 or longer than
// maxQueryValue bytes, and a repeated single-valued parameter. The cursor
// is checked by jobstate.Engine.List.
func parseFilter(v url.Values, known []*jobstate.Definition, limit int) (filter, error) {
	var f filter
	for name, vals := range v {
		switch name {
		case "machine", "owner", "key", "created_from", "created_to", "updated_from", "updated_to", "order", "dir", "cursor":
			if len(vals) > 1 {
				return f, fmt.Errorf("%w: %s is given %d times", errQuery, name, len(vals))
			}
		case "state":
		default:
			return f, fmt.Errorf("%w: unknown parameter %s", errQuery, strconv.Quote(clip(name)))
		}
		for _, s := range vals {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				return f, fmt.Errorf("%w: %s is not valid text", errQuery, name)
			}
			if len(s) > maxQueryValue {
				return f, fmt.Errorf("%w: %s is longer than %d bytes", errQuery, name, maxQueryValue)
			}
		}
	}
	f.Machine, f.Owner, f.Key, f.Cursor = v.Get("machine"), v.Get("owner"), v.Get("key"), v.Get("cursor")
	f.CreatedFrom, f.CreatedTo = v.Get("created_from"), v.Get("created_to")
	f.UpdatedFrom, f.UpdatedTo = v.Get("updated_from"), v.Get("updated_to")
	q := jobstate.ListQuery{Machine: f.Machine, Owner: f.Owner, Key: f.Key, Limit: limit}

	var defs []*jobstate.Definition
	if f.Machine != "" {
		for _, d := range known {
			if d.Name() == f.Machine {
				defs = []*jobstate.Definition{d}
			}
		}
		if defs == nil {
			return f, fmt.Errorf("%w: unknown machine %q", errQuery, f.Machine)
		}
	} else {
		defs = known
	}
	for _, s := range v["state"] {
		if s == "" {
			continue
		}
		found := false
		for _, d := range defs {
			if _, ok := d.State(jobstate.State(s)); ok {
				found = true
				break
			}
		}
		if !found {
			if f.Machine != "" {
				return f, fmt.Errorf("%w: machine %q has no state %q", errQuery, f.Machine, s)
			}
			return f, fmt.Errorf("%w: no machine has a state %q", errQuery, s)
		}
		f.States = append(f.States, s)
		q.States = append(q.States, jobstate.State(s))
	}
	if f.Machine == "" {
		// Without a machine, the listing keeps the shown machines' jobs
		// only when there is one; with several, every machine's jobs are
		// listed (a listing has one machine filter).
		if len(known) == 1 {
			q.Machine = known[0].Name()
		}
	}

	var err error
	for _, b := range []struct {
		name string
		s    string
		t    *time.Time
	}{
		{"created_from", f.CreatedFrom, &q.CreatedFrom}, {"created_to", f.CreatedTo, &q.CreatedTo},
		{"updated_from", f.UpdatedFrom, &q.UpdatedFrom}, {"updated_to", f.UpdatedTo, &q.UpdatedTo},
	} {
		if *b.t, err = parseTime(b.name, b.s); err != nil {
			return f, err
		}
	}
	switch o := v.Get("order"); o {
	case "", "created":
		f.Order, q.Order = "created", jobstate.OrderCreated
	case "updated":
		f.Order, q.Order = "updated", jobstate.OrderUpdated
	default:
		return f, fmt.Errorf("%w: unknown order %q (created or updated)", errQuery, o)
	}
	switch d := v.Get("dir"); d {
	case "", "desc":
		f.Desc = true
	case "asc":
	default:
		return f, fmt.Errorf("%w: unknown direction %q (asc or desc)", errQuery, d)
	}
	q.Desc = f.Desc
	f.query = q
	return f, nil
}

// clip shortens a value quoted in an error line.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}

// values returns the filter's query string without its cursor and order,
// with order and dir set as given.
func (f filter) values(order string, desc bool) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("machine", f.Machine)
	for _, s := range f.States {
		v.Add("state", s)
	}
	set("owner", f.Owner)
	set("key", f.Key)
	set("created_from", f.CreatedFrom)
	set("created_to", f.CreatedTo)
	set("updated_from", f.UpdatedFrom)
	set("updated_to", f.UpdatedTo)
	v.Set("order", order)
	if desc {
		v.Set("dir", "desc")
	} else {
		v.Set("dir", "asc")
	}
	return v
}
