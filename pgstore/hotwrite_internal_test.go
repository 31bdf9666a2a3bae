package pgstore

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// hotFields are the fields of jobstate.Job that update_many_hot sets,
// each with the columns that keep it.
var hotFields = map[string][]string{
	"ID":             {"id"},
	"State":          {"state"},
	"Kind":           {"kind"},
	"Outcome":        {"outcome"},
	"Result":         {"result"},
	"Version":        {"version"},
	"Attempt":        {"attempt"},
	"UpdatedAt":      {"updated_at", "updated_ns"},
	"StartedAt":      {"started_at", "started_ns"},
	"CompletedAt":    {"completed_at", "completed_ns"},
	"Leases":         {"leases"},
	"LeaseExpiresAt": {"lease_expires_at", "lease_expires_ns"},
	"HeartbeatAt":    {"heartbeat_at", "heartbeat_ns"},
	"Committed":      {"committed"},
	"WakeAt":         {"wake_at", "wake_ns"},
}

// differentJobs returns two jobs that differ in every field.
func differentJobs() (a, b jobstate.Job) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	t1 := t0.Add(time.Hour + time.Nanosecond)
	a = jobstate.Job{
		ID: uuid.New(), Machine: "m1", State: "s1", Kind: jobstate.KindReady, Outcome: "",
		Payload: []byte("p1"), Result: []byte("r1"), Version: 1, Attempt: 1, RetryCount: 1, MaxRetries: 1,
		Backoff:    jobstate.Backoff{Kind: jobstate.BackoffFixed, Initial: time.Second},
		OwnBackoff: false, LastError: "e1", ErrorClass: jobstate.ClassRetryable,
		IdempotencyKey: "k1", Fingerprint: "f1", Owner: "o1", ConcurrencyKey: "c1", Priority: 1,
		CreatedAt: t0, UpdatedAt: t0, StartedAt: t0, CompletedAt: t0, NotBefore: t0, Deadline: t0,
		Leases: 1, LeaseExpiresAt: t0, HeartbeatAt: t0, Committed: uuid.New(), CancelRequested: false,
		WakeAt: t0, SweepFailures: 1, SweepRetryAt: t0,
	}
	b = jobstate.Job{
		ID: uuid.New(), Machine: "m2", State: "s2", Kind: jobstate.KindActive, Outcome: jobstate.OutcomeSucceeded,
		Payload: []byte("p2"), Result: []byte("r2"), Version: 2, Attempt: 2, RetryCount: 2, MaxRetries: 2,
		Backoff:    jobstate.Backoff{Kind: jobstate.BackoffExponential, Initial: time.Minute},
		OwnBackoff: true, LastError: "e2", ErrorClass: jobstate.ClassPermanent,
		IdempotencyKey: "k2", Fingerprint: "f2", Owner: "o2", ConcurrencyKey: "c2", Priority: 2,
		CreatedAt: t1, UpdatedAt: t1, StartedAt: t1, CompletedAt: t1, NotBefore: t1, Deadline: t1,
		Leases: 2, LeaseExpiresAt: t1, HeartbeatAt: t1, Committed: uuid.New(), CancelRequested: true,
		WakeAt: t1, SweepFailures: 2, SweepRetryAt: t1,
	}
	return a, b
}

// TestHotUpdateLeavesOnlyComparedFields: every field of a job is either
// set by update_many_hot (hotFields, whose columns are among its
// parameters) or compared by coldSame, so that a batch is sent as
// update_many_hot only when every column it leaves alone is unchanged.
// The payload is compared by unchangedBlobs. A field added to Job fails
// here until it is given a place.
func TestHotUpdateLeavesOnlyComparedFields(t *testing.T) {
	a, b := differentJobs()
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	typ := va.Type()
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Name
		if reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			t.Fatalf("differentJobs gives both jobs the same %s: give each a value of its own", name)
		}
		next := a
		reflect.ValueOf(&next).Elem().Field(i).Set(vb.Field(i))
		cols, hot := hotFields[name]
		switch {
		case name == "Payload":
			if !coldSame(&a, &next) {
				t.Errorf("coldSame compares the payload, which unchangedBlobs compares")
			}
		case hot:
			if !coldSame(&a, &next) {
				t.Errorf("coldSame compares %s, which update_many_hot sets", name)
			}
			for _, c := range cols {
				if !slices.Contains(hotColumns, c) {
					t.Errorf("%s: column %s is not among update_many_hot's", name, c)
				}
			}
		default:
			if coldSame(&a, &next) {
				t.Errorf("a write changing %s would be sent as update_many_hot, which leaves it as it was: compare it in coldSame or set it in update_many_hot", name)
			}
		}
	}
}
