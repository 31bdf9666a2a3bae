package sqlitestore

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

// instant decodes an instant in [jobstate.MinTime, jobstate.MaxTime], or
// the zero time, in a fixed zone, from the fuzz input in, and returns the
// bytes left: a tenth of the values of the first byte mean the zero time;
// then eight bytes of seconds, four of nanoseconds and four of the zone's
// offset, each reduced to its range (bytes the input lacks read as zeros).
func instant(in []byte) (time.Time, []byte) {
	take := func(n int) []byte {
		b := make([]byte, n)
		k := copy(b, in)
		in = in[k:]
		return b
	}
	if take(1)[0]%10 == 0 {
		return time.Time{}, in
	}
	lo, hi := jobstate.MinTime.Unix(), jobstate.MaxTime.Unix()
	sec := lo + int64(binary.BigEndian.Uint64(take(8))%uint64(hi-lo+1))
	ns := int64(binary.BigEndian.Uint32(take(4)) % 1_000_000_000)
	at := time.Unix(sec, ns)
	if at.Before(jobstate.MinTime) {
		at = jobstate.MinTime
	}
	if at.After(jobstate.MaxTime) {
		at = jobstate.MaxTime
	}
	offset := int(binary.BigEndian.Uint32(take(4))%(28*3600+1)) - 14*3600
	return at.In(time.FixedZone("z", offset)), in
}

// FuzzInstantsRoundTripAndOrder: every instant the contract accepts is
// stored as two integers that give it back exactly, and whose order (the
// seconds, then the nanoseconds, as the indexes compare them) is the
// instants' order.
func FuzzInstantsRoundTripAndOrder(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 34))
	f.Add(append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0))
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		in := make([]byte, 34)
		for i := range in {
			in[i] = byte(r.Uint32())
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, rest := instant(data)
		b, _ := instant(rest)
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
