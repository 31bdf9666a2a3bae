package worker

import (
	"sync"
	"time"
)

// pace bounds the writes in flight ahead of their handlers' slots
// (commits ahead) by how long such writes take, so that a write never
// waits behind so many others that its lease runs out first: the lease
// is not renewed once the handler has returned.
//
// Each write that ends an execution reports how long it took against the
// lease it had left when it began. A write that took more than a quarter
// of that halves the bound (once for the writes that began before the
// last halving); any other raises it by one, up to WithCommitsAhead. A
// handler that returns while the bound is reached makes its write
// itself, holding its slot, so the worker claims less until the writes
// catch up. On a near store writes take milliseconds and the bound soon
// reaches WithCommitsAhead; on a far one, where a write waits behind the
// others' round trips, it settles where writes take about a quarter of
// the lease. Durations are measured in real time, not on the worker's
// Clock: they are the store's latency, not job time.
type pace struct {
	max int

	mu    sync.Mutex
	limit int
	cut   time.Time // when the bound was last halved
}

// paceFraction is the share of its remaining lease a write may take
// before the bound is halved.
const paceFraction = 4

func newPace(max, start int) *pace {
	return &pace{max: max, limit: min(max, start)}
}

// room reports whether a write may go ahead with n in flight.
func (p *pace) room(n int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return n < int64(p.limit)
}

// took records a write that began at began with left of its lease, and
// took d.
func (p *pace) took(began time.Time, d, left time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d > left/paceFraction {
		if began.After(p.cut) {
			p.limit /= 2
			p.cut = time.Now()
		}
		return
	}
	p.limit = min(p.max, p.limit+1)
}
