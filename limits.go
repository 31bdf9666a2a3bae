package jobstate

import (
	"fmt"
	"time"
)

// The range of instants and durations the engine accepts. Outside it,
// times stop being comparable in every store (memstore orders by them,
// PostgreSQL's timestamptz and JSON's RFC 3339 have bounds) and sums of
// times and durations could overflow, so an operation given, or a clock
// reading, an instant or duration outside it is refused with
// ErrInvalidArgument and changes nothing. Instants the engine computes
// itself (a backoff's end, a lease's expiry) saturate at MaxTime.
var (
	// MinTime is the earliest instant accepted: the first nanosecond after
	// the zero time, which means "none" in every time field of a Job.
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 1, time.UTC)
	// MaxTime is the latest instant accepted: the last nanosecond of year
	// 9999, the last RFC 3339 can write.
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// MaxDuration is the longest duration accepted anywhere a duration is
// given (lease TTLs, job TTLs, snoozes, backoff delays, retention): 100
// years of 365 days.
const MaxDuration = 100 * 365 * 24 * time.Hour

// DefaultMaxBackoff caps an exponential backoff that sets no Max: its
// delays grow until they reach one day and stay there.
const DefaultMaxBackoff = 24 * time.Hour

// checkTime refuses an instant outside [MinTime, MaxTime]; the zero time
// (none) is accepted.
func checkTime(what string, t time.Time) error {
	if t.IsZero() || (!t.Before(MinTime) && !t.After(MaxTime)) {
		return nil
	}
	return fmt.Errorf("%w: %s %s is outside the accepted range [%s, %s]", ErrInvalidArgument, what,
		t.Format(time.RFC3339Nano), MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
}

// checkDuration refuses a negative duration or one above MaxDuration.
func checkDuration(what string, d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("%w: negative %s %s", ErrInvalidArgument, what, d)
	case d > MaxDuration:
		return fmt.Errorf("%w: %s %s is above the maximum %s", ErrInvalidArgument, what, d, MaxDuration)
	}
	return nil
}

// checkNow refuses a clock reading outside the accepted range, so that no
// operation records an instant a store cannot order.
func checkNow(now time.Time) error {
	if now.Before(MinTime) || now.After(MaxTime) {
		return fmt.Errorf("%w: the clock reads %s, outside the accepted range [%s, %s]", ErrInvalidArgument,
			now.Format(time.RFC3339Nano), MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
	}
	return nil
}

// after returns t + d, saturating at MaxTime.
func after(t time.Time, d time.Duration) time.Time {
	if u := t.Add(d); !u.After(MaxTime) && !u.Before(t) {
		return u
	}
	return MaxTime
}
