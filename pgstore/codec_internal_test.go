package pgstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// FuzzExecsRoundTrip: the executions kept in a job's row (the last in
// its columns, those before it as JSON) read back as written, every
// instant of [MinTime, MaxTime] to the nanosecond and every text as
// given; a text the row cannot keep (not UTF-8, or with a NUL) is refused
// with ErrInvalidArgument.
func FuzzExecsRoundTrip(f *testing.F) {
	f.Add("worker-1", "", int64(0), 0, 1)
	f.Add("", "lease expired", int64(1<<40), 999_999_999, 7)
	f.Add("w\x00", "bad \xff", int64(-1), 1, 0)
	f.Add("ünïcode ☃", "🙂 error\nwith lines \"quoted\" \\", int64(253402300799), 123, 3)
	span := jobstate.MaxTime.Unix() - jobstate.MinTime.Unix()
	f.Fuzz(func(t *testing.T, owner, errText string, sec int64, nsec, attempt int) {
		if sec < 0 {
			sec = -sec
		}
		if nsec < 0 {
			nsec = -nsec
		}
		at := time.Unix(jobstate.MinTime.Unix()+sec%span, int64(nsec%1e9)).UTC()
		if at.Before(jobstate.MinTime) {
			at = jobstate.MinTime
		}
		job := uuid.New()
		xs := []jobstate.Execution{
			{ID: uuid.New(), JobID: job, Attempt: attempt, Owner: owner, Status: jobstate.ExecAborted,
				LeaseExpiresAt: at, HeartbeatAt: at.In(time.FixedZone("x", 3600)), ClaimedAt: jobstate.MinTime,
				StartedAt: jobstate.MaxTime, FinishedAt: at, Error: errText},
			{ID: uuid.New(), JobID: job, Attempt: attempt + 1, Status: jobstate.ExecLeased, ClaimedAt: at},
		}
		// One, two and three executions: the last alone, then with one
		// and two before it in the JSON.
		xs = append(xs, jobstate.Execution{ID: uuid.New(), JobID: job, Attempt: attempt + 2, Owner: errText, Status: jobstate.ExecCommitted,
			HeartbeatAt: at, StartedAt: at.Add(time.Nanosecond), Error: owner})
		for n := 1; n <= len(xs); n++ {
			execsRoundTrip(t, job, xs[:n], owner, errText)
		}
	})
}

// execsRoundTrip writes xs as a write does (execRow.set), reads them back
// as a row holding those values would, and compares.
func execsRoundTrip(t *testing.T, job uuid.UUID, xs []jobstate.Execution, owner, errText string) {
	t.Helper()
	var w execRow
	err := w.set(xs)
	bad := func(s string) bool { return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 }
	if bad(owner) || bad(errText) {
		if !errors.Is(err, jobstate.ErrInvalidArgument) {
			t.Fatalf("texts %q, %q: error %v, want ErrInvalidArgument", owner, errText, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	args := derefAll(nil, w.dest())
	var r execRow
	for i, p := range r.dest() {
		stored(t, p, args[i])
	}
	got, err := r.executions(job)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]jobstate.Execution, len(xs))
	for i, x := range xs {
		x.LeaseExpiresAt, x.HeartbeatAt, x.ClaimedAt = x.LeaseExpiresAt.UTC(), x.HeartbeatAt.UTC(), x.ClaimedAt.UTC()
		x.StartedAt, x.FinishedAt = x.StartedAt.UTC(), x.FinishedAt.UTC()
		want[i] = x
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v\nfrom %v", got, want, args)
	}
}

// stored sets *dest to v as a column written with v reads back: the
// microseconds of an instant in UTC.
func stored(t *testing.T, dest, v any) {
	t.Helper()
	switch d := dest.(type) {
	case *pgtype.UUID:
		*d = v.(pgtype.UUID)
	case *int64:
		*d = v.(int64)
	case *string:
		*d = v.(string)
	case *int16:
		*d = v.(int16)
	case *pgtype.Timestamptz:
		ts := v.(pgtype.Timestamptz)
		if ts.InfinityModifier == pgtype.Finite {
			if ts.Time.Nanosecond()%1000 != 0 {
				t.Fatalf("instant %v sent with nanoseconds", ts.Time)
			}
			ts.Time = ts.Time.UTC()
		}
		*d = ts
	default:
		t.Fatalf("no reading of %T", dest)
	}
}

// A write's executions replace the job's by id, keep their places, and
// are ordered by attempt.
func TestMergeExecs(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	known := []jobstate.Execution{{ID: a, Attempt: 1, Status: jobstate.ExecAborted}, {ID: b, Attempt: 2, Status: jobstate.ExecLeased}}
	got := mergeExecs(known, []jobstate.Execution{{ID: c, Attempt: 3, Status: jobstate.ExecLeased}, {ID: b, Attempt: 2, Status: jobstate.ExecCommitted}})
	want := []jobstate.Execution{known[0], {ID: b, Attempt: 2, Status: jobstate.ExecCommitted}, {ID: c, Attempt: 3, Status: jobstate.ExecLeased}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %+v, want %+v", got, want)
	}
	if known[1].Status != jobstate.ExecLeased {
		t.Fatal("the merge changed the snapshot's executions")
	}
	// Added out of attempt order, they are sorted; one attempt keeps the
	// order of insertion.
	d := uuid.New()
	got = mergeExecs(nil, []jobstate.Execution{{ID: c, Attempt: 2}, {ID: a, Attempt: 1}, {ID: d, Attempt: 1}})
	if got[0].ID != a || got[1].ID != d || got[2].ID != c {
		t.Fatalf("order %v %v %v, want a d c", got[0].ID, got[1].ID, got[2].ID)
	}
}

// An execution whose status is none of the five is refused, as the
// table's CHECK refused it, not stored.
func TestExecsRefuseUnknownStatus(t *testing.T) {
	for _, status := range []jobstate.ExecStatus{"", "leased", "RUNNING"} {
		var r execRow
		err := r.set([]jobstate.Execution{{ID: uuid.New(), Attempt: 1, Status: status}})
		if !errors.Is(err, jobstate.ErrInvalidArgument) {
			t.Errorf("status %q: error %v, want ErrInvalidArgument", status, err)
		}
	}
}
