package worker_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate/worker"
)

// Every's periods start at the whole multiples of its interval, the
// first strictly after the time given.
func TestEveryStartsAtMultiplesOfItsInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := time.Duration(rapid.Int64Range(1, int64(48*time.Hour)).Draw(t, "d"))
		at := time.Unix(0, rapid.Int64Range(-1<<62, 1<<62).Draw(t, "at"))
		next := worker.Every(d).Next(at)
		if !next.After(at) || next.Sub(at) > d {
			t.Fatalf("Next(%v) = %v with interval %v", at, next, d)
		}
		if next.UnixNano()%int64(d) != 0 {
			t.Fatalf("Next(%v) = %v is not a multiple of %v", at, next, d)
		}
	})
}
