package jobstate_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// genTime draws the zero time (none) or an instant of [MinTime, MaxTime]
// in a random zone.
func genTime(t *rapid.T, label string) time.Time {
	if rapid.Bool().Draw(t, label+" zero") {
		return time.Time{}
	}
	lo, hi := jobstate.MinTime.Unix(), jobstate.MaxTime.Unix()
	sec := rapid.OneOf(
		rapid.Int64Range(lo, hi),
		rapid.SampledFrom([]int64{lo, hi}),
		rapid.Int64Range(1_700_000_000, 1_900_000_000),
	).Draw(t, label+" sec")
	nsec := rapid.Int64Range(0, 999_999_999).Draw(t, label+" nsec")
	tm := time.Unix(sec, nsec).UTC()
	if tm.Before(jobstate.MinTime) {
		tm = jobstate.MinTime
	}
	offset := rapid.IntRange(-14*3600, 14*3600).Draw(t, label+" offset")
	return tm.In(time.FixedZone("Z", offset))
}

// genText draws a valid UTF-8 text, often empty.
func genText(t *rapid.T, label string) string {
	return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[A-Za-z_<>&"\\]{1,12}`)).Draw(t, label)
}

// genBytes draws bytes: nil, empty, text, or arbitrary.
func genBytes(t *rapid.T, label string) []byte {
	return rapid.OneOf(
		rapid.Just([]byte(nil)),
		rapid.Just([]byte{}),
		rapid.Map(rapid.String(), func(s string) []byte { return []byte(s) }),
		rapid.SliceOf(rapid.Byte()),
	).Draw(t, label)
}

// genBackoff draws a backoff NewJob.Retry accepts.
func genBackoff(t *rapid.T) jobstate.Backoff {
	dur := rapid.Int64Range(1, int64(jobstate.MaxDuration))
	jitter := rapid.SampledFrom([]jobstate.Jitter{jobstate.JitterNone, jobstate.JitterFull, jobstate.JitterEqual}).Draw(t, "jitter")
	switch rapid.IntRange(0, 2).Draw(t, "backoff kind") {
	case 0:
		return jobstate.Backoff{Jitter: jitter}
	case 1:
		return jobstate.FixedBackoff(time.Duration(dur.Draw(t, "initial"))).WithJitter(jitter)
	}
	factor := rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(1, 1e300)).Draw(t, "factor")
	max := time.Duration(rapid.Int64Range(0, int64(jobstate.MaxDuration)).Draw(t, "max"))
	return jobstate.ExponentialBackoff(time.Duration(dur.Draw(t, "initial")), factor, max).WithJitter(jitter)
}

func genUUID(t *rapid.T, label string) uuid.UUID {
	var id uuid.UUID
	if rapid.Bool().Draw(t, label+" zero") {
		return id
	}
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
	return id
}

// genJob draws a valid job: valid kinds, outcomes, classes, texts, times
// and backoffs; counters anywhere in their types.
func genJob(t *rapid.T) jobstate.Job {
	return jobstate.Job{
		ID:      genUUID(t, "id"),
		Machine: genText(t, "machine"),
		State:   jobstate.State(genText(t, "state")),
		Kind: rapid.SampledFrom([]jobstate.Kind{jobstate.KindInitial, jobstate.KindReady, jobstate.KindActive,
			jobstate.KindWaiting, jobstate.KindTerminal}).Draw(t, "kind"),
		Outcome: rapid.SampledFrom([]jobstate.Outcome{"", jobstate.OutcomeSucceeded, jobstate.OutcomeFailed,
			jobstate.OutcomeCancelled, jobstate.OutcomeExpired, jobstate.OutcomeRejected, jobstate.OutcomeDeadLettered}).Draw(t, "outcome"),
		Payload:         genBytes(t, "payload"),
		Result:          genBytes(t, "result"),
		Version:         rapid.Int64().Draw(t, "version"),
		Attempt:         rapid.Int().Draw(t, "attempt"),
		RetryCount:      rapid.Int().Draw(t, "retry_count"),
		MaxRetries:      rapid.Int().Draw(t, "max_retries"),
		Backoff:         genBackoff(t),
		OwnBackoff:      rapid.Bool().Draw(t, "own_backoff"),
		LastError:       genText(t, "last_error"),
		ErrorClass:      rapid.SampledFrom([]jobstate.ErrorClass{jobstate.ClassNone, jobstate.ClassRetryable, jobstate.ClassPermanent}).Draw(t, "error_class"),
		IdempotencyKey:  genText(t, "idempotency_key"),
		Fingerprint:     genText(t, "fingerprint"),
		Owner:           genText(t, "owner"),
		Priority:        rapid.Int().Draw(t, "priority"),
		CreatedAt:       genTime(t, "created_at"),
		UpdatedAt:       genTime(t, "updated_at"),
		StartedAt:       genTime(t, "started_at"),
		CompletedAt:     genTime(t, "completed_at"),
		NotBefore:       genTime(t, "not_before"),
		Deadline:        genTime(t, "deadline"),
		Leases:          rapid.Int().Draw(t, "leases"),
		LeaseExpiresAt:  genTime(t, "lease_expires_at"),
		HeartbeatAt:     genTime(t, "heartbeat_at"),
		Committed:       genUUID(t, "committed"),
		CancelRequested: rapid.Bool().Draw(t, "cancel_requested"),
		WakeAt:          genTime(t, "wake_at"),
		SweepFailures:   rapid.Int().Draw(t, "sweep_failures"),
		SweepRetryAt:    genTime(t, "sweep_retry_at"),
	}
}

// TestJobJSONRoundTripProperty checks that every valid job decodes back
// from its JSON to itself, with times in UTC and empty bytes nil, and that
// its JSON is canonical: the decoded job is written to the same bytes.
func TestJobJSONRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		j := genJob(t)
		data, err := json.Marshal(j)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var back jobstate.Job
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", data, err)
		}
		if want := normalJob(j); !reflect.DeepEqual(back, want) {
			t.Fatalf("round trip of %s:\n got %#v\nwant %#v", data, back, want)
		}
		again, err := back.MarshalJSON()
		if err != nil {
			t.Fatalf("Marshal of the decoded job: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("not canonical:\n first %s\nsecond %s", data, again)
		}
	})
}
