package pgstore

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// The column counts the arrays of jobArgs and transitionArgs are sized by
// are those of the column lists.
func TestColumnCounts(t *testing.T) {
	for _, c := range []struct {
		list string
		want int
	}{
		{jobColumns, jobColumnCount}, {execColumns, execColumnCount},
		{jobWriteColumns, jobWriteCount}, {transitionColumns, transitionCount},
	} {
		if got := len(columnNames(c.list)); got != c.want {
			t.Errorf("%d columns in %q, counted %d", got, c.list, c.want)
		}
	}
}

// sqlTypeOf is the SQL type a value of deref's is sent as.
func sqlTypeOf(v any) string {
	switch v.(type) {
	case pgtype.UUID:
		return "uuid"
	case pgtype.Timestamptz:
		return "timestamptz"
	case string:
		return "text"
	case []byte:
		return "bytea"
	case int64:
		return "int8"
	case int16:
		return "int2"
	case float64:
		return "float8"
	case bool:
		return "bool"
	}
	return "?"
}

// Each address appendPtrs returns is one deref reads, of the Go type the
// column's SQL type is sent from (jobWriteTypes, transitionTypes), and
// each field of the row is one of them.
func TestDerefCoversEveryField(t *testing.T) {
	check := func(name string, row any, ptrs []any, types []string) {
		t.Helper()
		if len(ptrs) != len(types) {
			t.Fatalf("%s: %d addresses for %d columns", name, len(ptrs), len(types))
		}
		for i, p := range ptrs {
			if got := sqlTypeOf(deref(p)); got != types[i] {
				t.Errorf("%s: column %d is sent as %s, want %s", name, i, got, types[i])
			}
		}
		fields := map[uintptr]bool{}
		var walk func(v reflect.Value)
		walk = func(v reflect.Value) {
			if v.Kind() == reflect.Struct && v.Type().PkgPath() == "github.com/jobstate/jobstate/pgstore" {
				for i := 0; i < v.NumField(); i++ {
					walk(v.Field(i))
				}
				return
			}
			fields[v.Addr().Pointer()] = true
		}
		walk(reflect.ValueOf(row).Elem())
		for _, p := range ptrs {
			delete(fields, reflect.ValueOf(p).Pointer())
		}
		if len(fields) > 0 {
			t.Errorf("%s: %d fields have no column", name, len(fields))
		}
	}
	var v rowValues
	check("job", &v, v.appendPtrs(nil), jobWriteTypes)
	var tv transitionValues
	check("transition", &tv, tv.appendPtrs(nil), transitionTypes)
}

// FuzzJobRowRoundTrip: a job's row as a write sets it reads back as the
// job, at the precision the store keeps (asStored), every field set.
func FuzzJobRowRoundTrip(f *testing.F) {
	f.Add("m", "s", "ünïcode ☃", []byte("payload"), int64(3), 2, int64(1<<40), 999_999_999, 0.5, true)
	f.Add("", "", "", []byte(nil), int64(-1), -7, int64(0), 0, -0.0, false)
	span := jobstate.MaxTime.Unix() - jobstate.MinTime.Unix()
	f.Fuzz(func(t *testing.T, machine, state, text string, blob []byte, version int64, n int, sec int64, nsec int, factor float64, flag bool) {
		if sec < 0 {
			sec = -sec
		}
		if nsec < 0 {
			nsec = -nsec
		}
		at := time.Unix(jobstate.MinTime.Unix()+sec%span, int64(nsec%1e9)).In(time.FixedZone("x", 3600))
		if at.Before(jobstate.MinTime) {
			at = jobstate.MinTime
		}
		j := jobstate.Job{
			ID: uuid.New(), Machine: machine, State: jobstate.State(state), Kind: jobstate.Kind(uint(n)%5 + 1),
			Outcome: jobstate.Outcome(text), Payload: blob, Result: blob, Version: version, Attempt: n,
			RetryCount: n + 1, MaxRetries: n + 2,
			Backoff: jobstate.Backoff{Kind: jobstate.BackoffKind(text), Initial: time.Duration(sec), Factor: factor,
				Max: time.Duration(version), Jitter: jobstate.Jitter(state)},
			OwnBackoff: flag, LastError: text, ErrorClass: jobstate.ErrorClass(machine), IdempotencyKey: text,
			Fingerprint: state, Owner: machine, Priority: -n, CreatedAt: at, UpdatedAt: at.Add(1),
			StartedAt: at.Add(2), CompletedAt: at.Add(3), NotBefore: at.Add(-1), Deadline: at.Add(time.Hour),
			Leases: n, LeaseExpiresAt: at.Add(4), HeartbeatAt: at.Add(5), Committed: uuid.New(),
			CancelRequested: !flag, WakeAt: at.Add(6), SweepFailures: n + 3, SweepRetryAt: at.Add(7),
			ConcurrencyKey: text,
		}
		if flag {
			j.WakeAt, j.Committed, j.StartedAt = time.Time{}, uuid.Nil, time.Time{}
		}
		var v rowValues
		if err := v.set(&j, nil); err != nil {
			t.Fatal(err)
		}
		got, err := v.job.job()
		if err != nil {
			t.Fatal(err)
		}
		if want := asStored(j); !reflect.DeepEqual(got, want) {
			t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
		}
		if due := v.due.time(); !due.Equal(j.DueAt()) {
			t.Fatalf("due %v, want %v", due, j.DueAt())
		}
		if v.exec.earlier != noExecs || v.exec.id.Valid {
			t.Fatalf("executions of a job without any: %+v", v.exec)
		}
	})
}

// A kind the row cannot name is refused (ErrInvalidArgument).
func TestRowRefusesUnknownKind(t *testing.T) {
	var v rowValues
	err := v.set(&jobstate.Job{ID: uuid.New(), Kind: jobstate.Kind(200)}, nil)
	if !errors.Is(err, jobstate.ErrInvalidArgument) {
		t.Fatalf("error %v, want ErrInvalidArgument", err)
	}
}
