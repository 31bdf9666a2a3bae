package ui

import (
	"errors"
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

func TestParseFilter(t *testing.T) {
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := url.ParseQuery("machine=queue&state=QUEUED&state=FAILED&owner=a&key=k&created_from=2026-01-02T03:04&updated_to=2026-01-02T03:04:05Z&order=updated&dir=asc&cursor=c")
	f, err := parseFilter(v, []*jobstate.Definition{def}, 7)
	if err != nil {
		t.Fatal(err)
	}
	q := f.query
	if q.Machine != "queue" || len(q.States) != 2 || q.Owner != "a" || q.Key != "k" || q.Order != jobstate.OrderUpdated || q.Desc || q.Limit != 7 || f.Cursor != "c" {
		t.Fatalf("%+v", q)
	}
	if got := q.CreatedFrom.Format("2006-01-02T15:04:05Z07:00"); got != "2026-01-02T03:04:00Z" {
		t.Fatalf("created_from %s", got)
	}
	if got := q.UpdatedTo.Format("2006-01-02T15:04:05Z07:00"); got != "2026-01-02T03:04:05Z" {
		t.Fatalf("updated_to %s", got)
	}
	// The defaults: newest first by creation; one machine shown filters on it.
	f, err = parseFilter(url.Values{}, []*jobstate.Definition{def}, 50)
	if err != nil || f.query.Order != jobstate.OrderCreated || !f.query.Desc || f.query.Machine != "queue" {
		t.Fatalf("defaults: %+v %v", f.query, err)
	}
}

// FuzzParseFilter checks that no query string makes the parser panic, that
// every refusal is errQuery with one line of valid text, and that an
// accepted query holds only valid text and a known order.
func FuzzParseFilter(f *testing.F) {
	def, err := uitest.Machine()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"", "machine=queue&state=QUEUED", "state=%ff", "owner=%00", "created_from=2026-13-45",
		"order=updated&dir=asc&cursor=AQ", "a=b&a=c", "owner=1&owner=2", "state=&state=FAILED",
		"updated_from=2026-01-02T03:04:05.999999999%2B14:00", "key=%3Cscript%3E",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := parseFilter(v, []*jobstate.Definition{def}, 50)
		if err != nil {
			if !errors.Is(err, errQuery) {
				t.Fatalf("%q: error %v is not errQuery", raw, err)
			}
			msg := err.Error()
			if !utf8.ValidString(msg) {
				t.Fatalf("%q: error line is not valid text: %q", raw, msg)
			}
			for _, r := range msg {
				if r == '\n' {
					t.Fatalf("%q: error is not one line: %q", raw, msg)
				}
			}
			return
		}
		q := got.query
		if q.Order != jobstate.OrderCreated && q.Order != jobstate.OrderUpdated {
			t.Fatalf("%q: order %q", raw, q.Order)
		}
		for _, s := range []string{q.Machine, q.Owner, q.Key, got.Cursor} {
			if !utf8.ValidString(s) || len(s) > maxQueryValue {
				t.Fatalf("%q: accepted value %q", raw, s)
			}
		}
		for _, s := range q.States {
			if _, ok := def.State(s); !ok {
				t.Fatalf("%q: accepted unknown state %q", raw, s)
			}
		}
	})
}
