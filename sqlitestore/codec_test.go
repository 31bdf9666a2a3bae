package sqlitestore

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// instant draws an instant in [jobstate.MinTime, jobstate.MaxTime], or
// the zero time, in a random location.
func instant(t *rapid.T, label string) time.Time {
	if rapid.IntRange(0, 9).Draw(t, label+"_zero") == 0 {
		return time.Time{}
	}
	lo, hi := jobstate.MinTime.Unix(), jobstate.MaxTime.Unix()
	sec := rapid.Int64Range(lo, hi).Draw(t, label+"_s")
	ns := rapid.Int64Range(0, 999_999_999).Draw(t, label+"_ns")
	at := time.Unix(sec, ns)
	if at.Before(jobstate.MinTime) {
		at = jobstate.MinTime
	}
	if at.After(jobstate.MaxTime) {
		at = jobstate.MaxTime
	}
	zone := time.FixedZone("z", rapid.IntRange(-14*3600, 14*3600).Draw(t, label+"_zone"))
	return at.In(zone)
}

// TestInstantsRoundTripAndOrder: every instant the contract accepts is
// stored as two integers that give it back exactly, and whose order (the
// seconds, then the nanoseconds, as the indexes compare them) is the
// instants' order.
func TestInstantsRoundTripAndOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := instant(t, "a"), instant(t, "b")
		as, ans := encTime(a)
		bs, bns := encTime(b)
		if got := decTime(as, ans); !got.Equal(a) || got.IsZero() != a.IsZero() {
			t.Fatalf("%v stored as (%d, %d) reads back as %v", a, as, ans, got)
		}
		if ans < 0 || ans > 999_999_999 {
			t.Fatalf("nanoseconds %d out of range", ans)
		}
		stored := as < bs || (as == bs && ans < bns)
		if stored != a.Before(b) {
			t.Fatalf("%v before %v is %v, stored order says %v", a, b, a.Before(b), stored)
		}
	})
}

// TestWakeNeverIsNull: the zero wake time is stored as NULL seconds (out
// of the wake index), any other as its seconds.
func TestWakeNeverIsNull(t *testing.T) {
	if s, _ := encWake(time.Time{}); s != nil {
		t.Fatalf("zero wake stored as %v", s)
	}
	if s, ns := encWake(jobstate.MinTime); s != jobstate.MinTime.Unix() || ns != 1 {
		t.Fatalf("MinTime stored as (%v, %d)", s, ns)
	}
}
