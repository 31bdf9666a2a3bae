package jobstatetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jobstate/jobstate/worker"
)

// Clock is a manual clock for both sides of a test: it is the engine's
// jobstate.Clock (lease expiry, backoff, deadlines) and the worker's
// worker.Clock (heartbeats, polls, sweeps, timeouts, grace periods). Time
// moves only by Advance or Set, which fire the timers that have come due,
// so a test never sleeps. It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*timer
	// changed is closed and replaced whenever pending changes.
	changed chan struct{}
}

var (
	_ worker.Clock = (*Clock)(nil)
	_ worker.Timer = (*timer)(nil)
)

// NewClock returns a clock reading start, with no timers.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires, in time order, every
// timer due at the new reading: a channel timer gets the new reading on
// its channel, an AfterFunc timer's function starts in a goroutine of its
// own. Each timer fires at most once per Advance, even if its function
// re-arms it within d. It returns the new reading.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	return c.fire()
}

// Set moves the clock to t (backwards too) and fires the timers due then,
// as Advance does.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fire()
}

// fire fires the due timers and unlocks c. Timers fire while c is locked
// (a send never blocks; a function starts in a goroutine), so a timer
// Reset or Stopped after fire returns holds no stale reading.
func (c *Clock) fire() time.Time {
	now := c.now
	var due []*timer
	kept := c.pending[:0]
	for _, t := range c.pending {
		if t.at.After(now) {
			kept = append(kept, t)
		} else {
			t.armed = false
			due = append(due, t)
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	if len(due) > 0 {
		c.signal()
	}
	slices.SortStableFunc(due, func(a, b *timer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.send(now)
	}
	c.mu.Unlock()
	return now
}

// Pending returns the number of timers armed and not yet fired: the
// runtime's poll and sweep timers, one heartbeat per running handler, ...
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Next returns the time the earliest armed timer fires at, and false when
// none is armed.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return time.Time{}, false
	}
	at := c.pending[0].at
	for _, t := range c.pending[1:] {
		if t.at.Before(at) {
			at = t.at
		}
	}
	return at, true
}

// WaitPending blocks until at least n timers are armed, or ctx ends. A
// test uses it to know that the worker has settled, waiting on its timers,
// before it moves the clock (a worker at rest has its poll and sweep
// timers armed, plus a heartbeat per running handler).
func (c *Clock) WaitPending(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitTimer blocks until a timer is armed to fire at exactly at, or ctx
// ends: for instance a worker's grace timer once its shutdown began.
func (c *Clock) WaitTimer(ctx context.Context, at time.Time) error {
	for {
		c.mu.Lock()
		for _, t := range c.pending {
			if t.at.Equal(at) {
				c.mu.Unlock()
				return nil
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NewTimer implements worker.Clock.
func (c *Clock) NewTimer(d time.Duration) worker.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc implements worker.Clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) worker.Timer {
	t := &timer{c: c, f: f}
	t.Reset(d)
	return t
}

// signal wakes WaitPending. Caller holds mu.
func (c *Clock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type timer struct {
	c     *Clock
	ch    chan time.Time
	f     func()
	at    time.Time
	armed bool
}

func (t *timer) C() <-chan time.Time { return t.ch }

// send fires t: a channel timer gets now unless a reading is waiting
// already; a function starts in a goroutine of its own. It never blocks.
func (t *timer) send(now time.Time) {
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

// Reset arms the timer d from now; d <= 0 fires it at once.
func (t *timer) Reset(d time.Duration) {
	c := t.c
	c.mu.Lock()
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.remove()
	if d <= 0 {
		t.send(c.now)
		c.mu.Unlock()
		return
	}
	t.at, t.armed = c.now.Add(d), true
	c.pending = append(c.pending, t)
	c.signal()
	c.mu.Unlock()
}

// Stop disarms the timer.
func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.remove()
}

// remove disarms t and reports whether it was armed. Caller holds mu.
func (t *timer) remove() bool {
	if !t.armed {
		return false
	}
	t.armed = false
	if i := slices.Index(t.c.pending, t); i >= 0 {
		t.c.pending = slices.Delete(t.c.pending, i, i+1)
	}
	t.c.signal()
	return true
}
