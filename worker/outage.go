package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobstate/jobstate"
)

// outage follows whether the store can be reached, from the results of
// the runtime's own store calls, so that an outage is logged once rather
// than once per job: one WARN record "store unreachable" when a call
// first finds the store unreachable (jobstate.ErrUnavailable) after a
// healthy period, DEBUG records for the calls that fail during the
// outage, and one INFO record "store reachable again", with the outage's
// duration and counts, at the first call that reaches the store after it.
//
// A call takes a mark before it starts and reports its result with that
// mark. A result that straddles a change of state is stale and changes
// nothing: a success of a call that started before the outage began does
// not end it, and a failure of a call that started before the outage
// ended does not begin another one. So the calls in flight when an outage
// begins or ends do not make it flap.
type outage struct {
	log *slog.Logger
	// now reads the engine's clock: an outage is measured in job time,
	// like the leases it threatens.
	now func() time.Time

	// state counts the changes between reachable and unreachable: the
	// store is unreachable when it is odd.
	state atomic.Uint64

	mu sync.Mutex
	// since is when the current outage began.
	since time.Time
	// calls counts the calls that found the store unreachable during the
	// current outage; retried those the runtime tries again (a write with
	// backoff, a heartbeat at its next interval, a claim or sweep at its
	// next round); lapsed the leases left to lapse, their jobs to the
	// sweep.
	calls, retried, lapsed int
}

// unavailable reports whether err says the store could not be reached.
func unavailable(err error) bool { return errors.Is(err, jobstate.ErrUnavailable) }

// mark returns the mark a call takes before it starts.
func (o *outage) mark() uint64 { return o.state.Load() }

// answered records the result of a call started at mark m that did not
// find the store unreachable (err is not jobstate.ErrUnavailable): a
// success, or a refusal of the engine, shows the store reachable and ends
// an outage; other errors (a cancelled context, an error of the user's
// code) tell nothing about the store and change nothing.
func (o *outage) answered(ctx context.Context, m uint64, err error) {
	if err == nil || jobstate.Code(err) != "unknown" {
		o.reached(ctx, m)
	}
}

// reached records a call started at mark m that reached the store.
func (o *outage) reached(ctx context.Context, m uint64) {
	s := o.state.Load()
	if s&1 == 0 || s != m {
		return // no outage, or the call started before it began
	}
	o.mu.Lock()
	if o.state.Load() != m {
		o.mu.Unlock()
		return // another call ended it
	}
	o.state.Add(1)
	d := o.now().Sub(o.since)
	calls, retried, lapsed := o.calls, o.retried, o.lapsed
	o.mu.Unlock()
	if o.log.Enabled(ctx, slog.LevelInfo) {
		o.log.LogAttrs(ctx, slog.LevelInfo, "store reachable again", slog.Duration("duration", d),
			slog.Int("failed_calls", calls), slog.Int("retried", retried), slog.Int("leases_lapsed", lapsed))
	}
}

// failed records a call started at mark m, named op, that found the
// store unreachable: it begins an outage (one WARN record) unless one is
// under way or the call started before the last one ended (a DEBUG
// record). args are logged with it.
func (o *outage) failed(ctx context.Context, m uint64, op string, err error, args ...any) {
	o.mu.Lock()
	s := o.state.Load()
	begins := s&1 == 0 && s == m
	if begins {
		o.state.Add(1)
		o.since = o.now()
		o.calls, o.retried, o.lapsed = 0, 0, 0
	}
	if s&1 == 1 || begins {
		o.calls++
	}
	o.mu.Unlock()
	level, msg := slog.LevelDebug, "store still unreachable"
	if begins {
		level, msg = slog.LevelWarn, "store unreachable"
	}
	if o.log.Enabled(ctx, level) {
		o.log.Log(ctx, level, msg, append([]any{slog.String("op", op), slog.Any("error", err)}, args...)...)
	}
}

// retry counts a call the runtime makes again after it found the store
// unreachable, when an outage is under way.
func (o *outage) retry() {
	o.mu.Lock()
	if o.state.Load()&1 == 1 {
		o.retried++
	}
	o.mu.Unlock()
}

// lapse counts a lease the runtime let lapse because the store could not
// be reached, when an outage is under way.
func (o *outage) lapse() {
	o.mu.Lock()
	if o.state.Load()&1 == 1 {
		o.lapsed++
	}
	o.mu.Unlock()
}
