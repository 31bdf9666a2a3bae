package jobstate

import (
	"bytes"
	"testing"
	"time"
)

// TestV7SourceMonotonic: within one millisecond, and when the machine's
// clock steps back, the ids still increase strictly.
func TestV7SourceMonotonic(t *testing.T) {
	s := newV7Source()
	at := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return at }
	prev, err := s.next()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10_000; i++ { // many buffer refills, all in one instant
		if i == 5000 {
			at = at.Add(-time.Hour) // the clock steps back
		}
		id, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("id %d: %s is not after %s", i, id, prev)
		}
		if id.Version() != 7 {
			t.Fatalf("version %d", id.Version())
		}
		prev = id
	}
}
