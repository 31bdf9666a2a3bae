package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// fuzzNow is the fixed "now" of the parsing tests.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// FuzzActionArgs feeds arbitrary command lines (arguments separated by
// NUL) to the parsing of cancel, redrive and retry: it never panics, never
// reaches a database, and either accepts the line or refuses it as a usage
// error (exit 2) in one line. An accepted filter is one the engine accepts.
func FuzzActionArgs(f *testing.F) {
	for _, seed := range []string{
		"--machine\x00queue\x00--state\x00QUEUED,RETRYING\x00--yes",
		"0190f5e4-8c3b-7a6e-9d1f-2b4c6d8e0f12\x00--actor\x00ops",
		"--state\x00FAILED\x00--created-from\x0024h\x00--created-to\x002026-02-01T00:00:00Z",
		"--kind\x00waiting\x00--outcome\x00failed\x00--owner\x00acme\x00--page\x0010",
		"--reason\x00--\x00--machine\x00queue",
		"--\x00--machine",
		"--machine=queue\x00--state=\x00--parallel=99",
		"--updated-from\x00-1h\x00--completed-to\x00999999h",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		for _, a := range args {
			// Paths are not the parser's to explore: reading arbitrary
			// files is not parsing.
			if strings.Contains(a, "definitions") {
				return
			}
		}
		args = append(args, "--database-url", "postgres://u@127.0.0.1:1/db", "--definitions", "testdata/queue.json")
		for _, act := range []action{cancelAction, redriveAction, retryAction} {
			a, _, _ := testApp(nil)
			o, err := a.parseAction(context.Background(), act, args, fuzzNow)
			if err != nil {
				var ee *exitError
				if errors.Is(err, flag.ErrHelp) {
					continue
				}
				if !errors.As(err, &ee) || ee.code != exitUsage {
					t.Fatalf("%s %q: error %v is not a usage error", act.name, args, err)
				}
				if strings.Contains(strings.TrimSpace(oneLine(err.Error())), "\n") {
					t.Fatalf("error of more than one line: %q", err)
				}
				continue
			}
			if o.id != (jobstate.Job{}).ID {
				continue
			}
			if err := checkQuery(context.Background(), o.defs, o.query, ""); err != nil {
				t.Fatalf("%s %q: accepted a query the engine refuses: %v", act.name, args, err)
			}
			if o.query.CreatedTo.After(fuzzNow) || o.query.CreatedTo.IsZero() {
				t.Fatalf("%s %q: selects jobs created after the command started (created-to %v)", act.name, args, o.query.CreatedTo)
			}
		}
	})
}

// FuzzParseWhen: a time flag never panics; what it accepts is within the
// engine's range of times, and an RFC 3339 time is read as written.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"", "24h", "1h30m", "-5m", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456789+02:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "10000-01-01T00:00:00Z", "1e9h", "yesterday"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseWhen(s, fuzzNow)
		if err != nil {
			if !got.IsZero() {
				t.Fatalf("%q: error %v with time %v", s, err, got)
			}
			return
		}
		if s == "" {
			if !got.IsZero() {
				t.Fatalf("empty flag gave %v", got)
			}
			return
		}
		if got.Before(jobstate.MinTime) || got.After(jobstate.MaxTime) {
			t.Fatalf("%q gave %v, outside the engine's range", s, got)
		}
		if want, err := time.Parse(time.RFC3339Nano, s); err == nil && !want.Equal(got) {
			t.Fatalf("%q read as %v", s, got)
		}
	})
}

// A filter written as flags parses back to the same query.
func TestFilterFlagsRoundTrip(t *testing.T) {
	df, err := parseDefinitionFile("testdata/queue.json")
	if err != nil {
		t.Fatal(err)
	}
	states := []string{}
	for _, s := range df.def.States() {
		states = append(states, string(s.Name))
	}
	kinds := []string{"initial", "ready", "active", "waiting", "terminal"}
	outcomes := []string{"succeeded", "failed", "cancelled", "expired", "rejected", "dead_lettered"}
	rapid.Check(t, func(t *rapid.T) {
		var args []string
		want := jobstate.ListQuery{Order: jobstate.OrderCreated}
		if rapid.Bool().Draw(t, "machine") {
			args = append(args, "--machine", "queue")
			want.Machine = "queue"
		}
		pick := func(label string, from []string) []string {
			return rapid.SliceOfNDistinct(rapid.SampledFrom(from), 0, 3, rapid.ID[string]).Draw(t, label)
		}
		for _, s := range pick("states", states) {
			args = append(args, "--state", s)
			want.States = append(want.States, jobstate.State(s))
		}
		if ks := pick("kinds", kinds); len(ks) > 0 {
			args = append(args, "--kind", strings.Join(ks, ","))
			for _, k := range ks {
				var kind jobstate.Kind
				if err := kind.UnmarshalText([]byte(k)); err != nil {
					t.Fatal(err)
				}
				want.Kinds = append(want.Kinds, kind)
			}
		}
		for _, o := range pick("outcomes", outcomes) {
			args = append(args, "--outcome="+o)
			want.Outcomes = append(want.Outcomes, jobstate.Outcome(o))
		}
		if owner := rapid.StringMatching(`[a-z]{0,8}`).Draw(t, "owner"); owner != "" {
			args = append(args, "--owner", owner)
			want.Owner = owner
		}
		ranges := []struct {
			name     string
			from, to *time.Time
		}{{"created", &want.CreatedFrom, &want.CreatedTo}, {"updated", &want.UpdatedFrom, &want.UpdatedTo}, {"completed", &want.CompletedFrom, &want.CompletedTo}}
		for _, r := range ranges {
			if !rapid.Bool().Draw(t, r.name) {
				continue
			}
			from := fuzzNow.Add(-time.Duration(rapid.Int64Range(1, 1e6).Draw(t, r.name+" from")) * time.Second)
			ago := time.Duration(rapid.IntRange(0, 1000).Draw(t, r.name+" to")) * time.Minute
			if ago >= fuzzNow.Sub(from) {
				ago = 0
			}
			args = append(args, "--"+r.name+"-from", from.Format(time.RFC3339Nano), "--"+r.name+"-to", ago.String())
			*r.from, *r.to = from, fuzzNow.Add(-ago)
		}
		if rapid.Bool().Draw(t, "updated order") {
			args = append(args, "--order", "updated")
			want.Order = jobstate.OrderUpdated
		}
		if rapid.Bool().Draw(t, "desc") {
			args = append(args, "--desc")
			want.Desc = true
		}

		a, _, _ := testApp(nil)
		fs := a.newFlags("list", "")
		var ff filterFlags
		ff.register(fs, true)
		if _, err := parse(fs, args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		got, err := ff.query(fuzzNow)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
			t.Fatalf("%q parsed to\n%#v\nwant\n%#v", args, got, want)
		}
		wantSet := want.Machine != "" || len(want.States)+len(want.Kinds)+len(want.Outcomes) > 0 || want.Owner != "" ||
			!want.CreatedFrom.IsZero() || !want.UpdatedFrom.IsZero() || !want.CompletedFrom.IsZero()
		if ff.set() != wantSet {
			t.Fatalf("%q: set() = %v, want %v", args, ff.set(), wantSet)
		}
	})
}
