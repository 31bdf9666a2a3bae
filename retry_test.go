package jobstate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"

	"github.com/jobstate/jobstate"
)

func TestBackoffSchedules(t *testing.T) {
	s := time.Second
	cases := []struct {
		name string
		b    jobstate.Backoff
		r    float64
		want []time.Duration // delays before retries 1, 2, 3, ...
	}{
		{"none", jobstate.Backoff{}, 0.5, []time.Duration{0, 0, 0}},
		{"fixed 1s (document processing)", jobstate.FixedBackoff(s), 0.5, []time.Duration{s, s, s, s}},
		{"exponential x2", jobstate.ExponentialBackoff(s, 2, 0), 0.5, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s}},
		{"exponential default factor", jobstate.Backoff{Kind: jobstate.BackoffExponential, Initial: s}, 0, []time.Duration{s, 2 * s, 4 * s}},
		{"exponential x3 capped at 20s", jobstate.ExponentialBackoff(s, 3, 20*s), 0.5, []time.Duration{s, 3 * s, 9 * s, 20 * s, 20 * s}},
		{"full jitter", jobstate.ExponentialBackoff(s, 2, 0).WithJitter(jobstate.JitterFull), 0.25, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, s, 2 * s}},
		{"full jitter, zero draw", jobstate.FixedBackoff(s).WithJitter(jobstate.JitterFull), 0, []time.Duration{0, 0}},
		{"equal jitter", jobstate.ExponentialBackoff(s, 2, 0).WithJitter(jobstate.JitterEqual), 0.5, []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * s}},
		{"equal jitter, zero draw", jobstate.FixedBackoff(4 * s).WithJitter(jobstate.JitterEqual), 0, []time.Duration{2 * s, 2 * s}},
		{"equal jitter capped", jobstate.ExponentialBackoff(s, 10, 50*s).WithJitter(jobstate.JitterEqual), 0.5, []time.Duration{750 * time.Millisecond, 7500 * time.Millisecond, 37500 * time.Millisecond, 37500 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				assert.Equal(t, want, tc.b.Delay(i+1, tc.r), "retry %d", i+1)
			}
		})
	}
}

func TestBackoffSaturates(t *testing.T) {
	b := jobstate.ExponentialBackoff(time.Second, 10, 0)
	assert.Equal(t, jobstate.DefaultMaxBackoff, b.Delay(1000, 0), "an uncapped exponential backoff saturates at DefaultMaxBackoff")
	assert.Equal(t, jobstate.MaxDuration, jobstate.ExponentialBackoff(time.Second, 10, jobstate.MaxDuration).Delay(math.MaxInt, 0))
	assert.Equal(t, time.Hour, jobstate.ExponentialBackoff(time.Second, 10, time.Hour).Delay(1000, 0))
	assert.Equal(t, time.Second, b.Delay(0, 0), "retry numbers below 1 count as 1")
	d := jobstate.FixedBackoff(time.Second).WithJitter(jobstate.JitterFull).Delay(1, 7)
	assert.Less(t, d, time.Second, "draws outside [0,1) are clamped")
}

func TestClassOf(t *testing.T) {
	base := errors.New("boom")
	classify := func(err error) (jobstate.ErrorClass, time.Duration) {
		switch err.Error() {
		case "403":
			return jobstate.ClassPermanent, 0
		case "429":
			return jobstate.ClassRetryable, time.Minute
		}
		return jobstate.ClassNone, 0
	}
	cases := []struct {
		err   error
		class jobstate.ErrorClass
		after time.Duration
	}{
		{base, jobstate.ClassRetryable, 0},
		{jobstate.Permanent(base), jobstate.ClassPermanent, 0},
		{jobstate.Retryable(base), jobstate.ClassRetryable, 0},
		{jobstate.RetryAfter(base, 5*time.Second), jobstate.ClassRetryable, 5 * time.Second},
		{fmt.Errorf("wrapped: %w", jobstate.Permanent(base)), jobstate.ClassPermanent, 0},
		{jobstate.Retryable(jobstate.Permanent(base)), jobstate.ClassRetryable, 0},
		{errors.New("403"), jobstate.ClassPermanent, 0},
		{errors.New("429"), jobstate.ClassRetryable, time.Minute},
		{jobstate.Retryable(errors.New("403")), jobstate.ClassRetryable, 0},
		{context.DeadlineExceeded, jobstate.ClassRetryable, 0},
	}
	for _, tc := range cases {
		c, after := jobstate.ClassOf(tc.err, classify)
		assert.Equal(t, tc.class, c, "%v", tc.err)
		assert.Equal(t, tc.after, after, "%v", tc.err)
	}
	assert.ErrorIs(t, jobstate.Permanent(base), base, "a class wrapper keeps the error visible")
	assert.Nil(t, jobstate.Permanent(nil))
	assert.Nil(t, jobstate.RetryAfter(nil, time.Second))
}

func TestKeys(t *testing.T) {
	assert.NotEqual(t, jobstate.Key("ab", "c"), jobstate.Key("a", "bc"), "parts are length-prefixed")
	assert.NotEqual(t, jobstate.Key("a"), jobstate.Key("a", ""))
	assert.Equal(t, jobstate.Key("u", "f", "n"), jobstate.Key("u", "f", "n"))
	assert.Len(t, jobstate.Key(), 64)

	t0 := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	k := jobstate.KeyAt(t0, time.Minute, "user", "prompt")
	assert.Equal(t, k, jobstate.KeyAt(t0.Add(59*time.Second), time.Minute, "user", "prompt"), "same minute, same key")
	assert.NotEqual(t, k, jobstate.KeyAt(t0.Add(time.Minute), time.Minute, "user", "prompt"), "next minute, new key")
	assert.NotEqual(t, k, jobstate.KeyAt(t0.Add(-time.Nanosecond), time.Minute, "user", "prompt"), "previous minute, other key")
	assert.Equal(t, jobstate.Key("user", "prompt"), jobstate.KeyAt(t0, 0, "user", "prompt"), "no bucket, no time")
	old := time.Date(1960, 1, 1, 0, 0, 30, 0, time.UTC)
	assert.Equal(t, jobstate.KeyAt(old, time.Minute, "x"), jobstate.KeyAt(old.Add(29*time.Second), time.Minute, "x"), "buckets before 1970 are whole minutes too")
	assert.NotEqual(t, jobstate.KeyAt(old, time.Minute, "x"), jobstate.KeyAt(old.Add(-31*time.Second), time.Minute, "x"))
	assert.NotEqual(t, jobstate.Fingerprint([]byte("a")), jobstate.Fingerprint([]byte("b")))
}

func TestCode(t *testing.T) {
	assert.Equal(t, "", jobstate.Code(nil))
	assert.Equal(t, "unknown", jobstate.Code(errors.New("x")))
	assert.Equal(t, "invalid_transition", jobstate.Code(&jobstate.TransitionError{Err: jobstate.ErrInvalidTransition}))
	assert.Equal(t, "guard_refused", jobstate.Code(&jobstate.TransitionError{Err: jobstate.ErrGuardRefused, Cause: errors.New("no")}))
	assert.Equal(t, "cancelled", jobstate.Code(&jobstate.LeaseError{Cancelled: true}))
	assert.Equal(t, "lease_lost", jobstate.Code(&jobstate.LeaseError{}))
	assert.Equal(t, "already_committed", jobstate.Code(&jobstate.CommitError{}))
	assert.Equal(t, "unknown_effect", jobstate.Code(fmt.Errorf("%w: x", jobstate.ErrUnknownEffect)))
	assert.Equal(t, "invalid_argument", jobstate.Code(fmt.Errorf("%w: x", jobstate.ErrInvalidArgument)))
	assert.Equal(t, "key_conflict", jobstate.Code(&jobstate.KeyConflictError{}))
}
