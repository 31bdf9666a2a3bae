package jobstate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ListPage is one page of Engine.List.
type ListPage struct {
	// Jobs are the page's jobs, in the listing's order.
	Jobs []Job
	// Next is the cursor of the following page, to pass to Engine.List
	// with the same query; empty when this page is the last.
	Next string
}

// List finds jobs by the filters of q, in q's order, a page of q.Limit
// at a time (50 when zero), if the store offers the Lister capability
// (ErrUnsupported otherwise). cursor is "" for the first page and then
// the previous page's Next: an opaque string, safe to hand to HTTP
// clients, bound to the query's filters and order. On a machine with lazy
// expiry, a listed job past its deadline is expired first, and returned
// as expired (it may then no longer match a state filter).
//
// Errors: ErrInvalidArgument for a malformed query (a limit above
// MaxListLimit, an unknown order or kind, a time outside the accepted
// range, a range whose end is not after its start) or a cursor not made by
// List for the same filters and order; ErrUnsupported.
func (e *Engine) List(ctx context.Context, q ListQuery, cursor string) (ListPage, error) {
	if err := e.ready(); err != nil {
		return ListPage{}, err
	}
	l, ok := e.store.(Lister)
	if !ok {
		return ListPage{}, ErrUnsupported
	}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if err := q.validate(); err != nil {
		return ListPage{}, err
	}
	if err := e.checkListStates(&q); err != nil {
		return ListPage{}, err
	}
	q.After = ListCursor{}
	tag := q.fingerprint()
	if cursor != "" {
		after, err := decodeCursor(cursor, tag)
		if err != nil {
			return ListPage{}, err
		}
		q.After = after
	}
	want := q.Limit
	q.Limit++ // one more, to know whether a next page exists
	jobs, err := l.List(ctx, q)
	if err != nil {
		return ListPage{}, err
	}
	var page ListPage
	if len(jobs) > want {
		jobs = jobs[:want]
		last := jobs[want-1]
		at := last.CreatedAt
		if q.Order == OrderUpdated {
			at = last.UpdatedAt
		}
		page.Next = encodeCursor(ListCursor{At: at, ID: last.ID}, tag)
	}
	for i := range jobs {
		if jobs[i], err = e.expireOnRead(ctx, jobs[i]); err != nil {
			return ListPage{}, err
		}
	}
	page.Jobs = jobs
	return page, nil
}

// validate refuses a malformed query.
func (q *ListQuery) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: list: "+format, append([]any{ErrInvalidArgument}, args...)...)
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return bad("limit %d is outside 1..%d", q.Limit, MaxListLimit)
	case q.Order != "" && q.Order != OrderCreated && q.Order != OrderUpdated:
		return bad("unknown order %q", q.Order)
	}
	if err := checkText("list: owner", q.Owner, MaxKeyBytes); err != nil {
		return err
	}
	if err := checkText("list: key", q.Key, MaxKeyBytes); err != nil {
		return err
	}
	for _, k := range q.Kinds {
		if !k.Valid() {
			return bad("invalid kind %d", uint8(k))
		}
	}
	for _, o := range q.Outcomes {
		if !o.Valid() {
			return bad("unknown outcome %q", o)
		}
	}
	for _, r := range []struct {
		name     string
		from, to time.Time
	}{{"created", q.CreatedFrom, q.CreatedTo}, {"updated", q.UpdatedFrom, q.UpdatedTo}, {"completed", q.CompletedFrom, q.CompletedTo}} {
		if err := checkTime(r.name+" from", r.from); err != nil {
			return err
		}
		if err := checkTime(r.name+" to", r.to); err != nil {
			return err
		}
		if !r.from.IsZero() && !r.to.IsZero() && !r.to.After(r.from) {
			return bad("%s range ends (%s) before it starts (%s)", r.name, r.to.Format(time.RFC3339Nano), r.from.Format(time.RFC3339Nano))
		}
	}
	if q.Order == "" {
		q.Order = OrderCreated
	}
	return nil
}

// fingerprint identifies the query's filters and order, so that a cursor
// is not used with another query.
// asSet returns the distinct values of xs, sorted.
func asSet[T cmp.Ordered](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func (q *ListQuery) fingerprint() [8]byte {
	var b strings.Builder
	str := func(s string) { fmt.Fprintf(&b, "%d:%s;", len(s), s) }
	tm := func(t time.Time) { fmt.Fprintf(&b, "%d.%d;", t.Unix(), t.Nanosecond()) }
	str(q.Machine)
	// States, kinds and outcomes are sets: each is written sorted, once.
	for _, s := range asSet(q.States) {
		str(string(s))
	}
	b.WriteString("|")
	for _, k := range asSet(q.Kinds) {
		fmt.Fprintf(&b, "%d;", k)
	}
	for _, o := range asSet(q.Outcomes) {
		str(string(o))
	}
	str(q.Owner)
	str(q.Key)
	for _, t := range []time.Time{q.CreatedFrom, q.CreatedTo, q.UpdatedFrom, q.UpdatedTo, q.CompletedFrom, q.CompletedTo} {
		tm(t)
	}
	str(string(q.Order))
	fmt.Fprintf(&b, "%v", q.Desc)
	sum := sha256.Sum256([]byte(b.String()))
	var tag [8]byte
	copy(tag[:], sum[:8])
	return tag
}

// A cursor is version(1) | tag(8) | seconds(8) | nanos(4) | id(16),
// base64url without padding.
const cursorVersion = 1

func encodeCursor(c ListCursor, tag [8]byte) string {
	buf := make([]byte, 0, 37)
	buf = append(buf, cursorVersion)
	buf = append(buf, tag[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.At.Unix()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(c.At.Nanosecond()))
	buf = append(buf, c.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

func decodeCursor(s string, tag [8]byte) (ListCursor, error) {
	bad := fmt.Errorf("%w: list: the cursor was not made by List for this query", ErrInvalidArgument)
	buf, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(buf) != 37 || buf[0] != cursorVersion || [8]byte(buf[1:9]) != tag {
		return ListCursor{}, bad
	}
	sec := int64(binary.BigEndian.Uint64(buf[9:17]))
	nsec := binary.BigEndian.Uint32(buf[17:21])
	if nsec >= 1e9 {
		return ListCursor{}, bad
	}
	at := time.Unix(sec, int64(nsec)).UTC()
	if checkTime("cursor", at) != nil || at.IsZero() {
		return ListCursor{}, bad
	}
	return ListCursor{At: at, ID: uuid.UUID(buf[21:37])}, nil
}

// checkListStates refuses a query about a machine the engine does not
// know (ErrUnknownMachine), or with a state that its machine, or when the
// query names none any registered machine, does not declare
// (ErrInvalidArgument): such a query is a mistake, not an empty page.
func (e *Engine) checkListStates(q *ListQuery) error {
	if q.Machine != "" {
		def, err := e.machine(q.Machine)
		if err != nil {
			return err
		}
		for _, s := range q.States {
			if _, ok := def.State(s); !ok {
				return fmt.Errorf("%w: list: machine %q has no state %q", ErrInvalidArgument, q.Machine, s)
			}
		}
		return nil
	}
	for _, s := range q.States {
		known := false
		for _, def := range e.machines {
			if _, ok := def.State(s); ok {
				known = true
				break
			}
		}
		if !known {
			return fmt.Errorf("%w: list: no registered machine has a state %q", ErrInvalidArgument, s)
		}
	}
	return nil
}
