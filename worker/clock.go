package worker

import "time"

// Clock is the source of the runtime's own timers: heartbeats, polls,
// sweeps, handler timeouts and the shutdown grace period. It is separate
// from the engine's jobstate.Clock, which decides everything about job
// state (lease expiry, backoff, deadlines). Tests pass a manual clock (such
// as jobstatetest.Clock, which is both) so that they never sleep.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that calls f in its own goroutine once d
	// has passed. Its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel the time is sent on (nil for AfterFunc).
	C() <-chan time.Time
	// Reset makes the timer fire once d from now, whether or not it had
	// fired or been stopped; a value not yet received from C is
	// discarded.
	Reset(d time.Duration)
	// Stop prevents the timer from firing. It reports whether it stopped
	// it (false when it had fired already or was stopped).
	Stop() bool
}

// SystemClock is the Clock of the machine's real time (package time).
type SystemClock struct{}

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

// AfterFunc returns a time.AfterFunc timer.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time { return s.t.C }

func (s sysTimer) Reset(d time.Duration) {
	if !s.t.Stop() && s.t.C != nil {
		// Discard a value already sent (needed before Go 1.23's timers).
		select {
		case <-s.t.C:
		default:
		}
	}
	s.t.Reset(d)
}

func (s sysTimer) Stop() bool { return s.t.Stop() }
