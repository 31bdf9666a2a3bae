package pgstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Group commit (Options.GroupCommit): concurrent Updates are coalesced
// into shared transactions, one COMMIT (one WAL flush) for many jobs.
//
// A group takes the waiting Updates (distinct jobs, up to GroupCommit of
// them) and, in one round trip, begins a transaction and locks their
// rows with FOR NO KEY UPDATE SKIP LOCKED, reading their snapshots after
// the lock. A job it could not lock (held by another transaction, or
// unknown) is handed back to its caller, which runs its Update alone as
// without group commit: waiting for the lock, or returning ErrNotFound.
// Then each member's function runs, one after another, in its caller's
// goroutine, with the group's transaction in its context; its write is
// checked as by Update and queued in a savepoint of its own. The queued
// writes are sent with the COMMIT in one round trip; a statement a
// function runs through Tx goes with what is queued before it and the
// member's savepoint, in one round trip. A member whose function failed,
// or whose write the server refused, is rolled back to its savepoint (the
// statements after it, never run, are sent again), without undoing the
// others; its caller gets the error at once. The others are answered
// after the COMMIT.
//
// Groups in flight: a group starts at once when an Update waits and none
// is in flight; another starts, up to GroupCommitters, when more Updates
// wait than the groups in flight can take and they have waited longer
// than two of the groups' recent round trips. A group takes as many
// members as run within a few of its round trips (fits): on a near
// server, members whose functions send nothing cost microseconds and a
// few large groups share each WAL flush; on a far one, members that
// write through Tx cost a round trip each, groups are small, and several
// overlap their round trips.

// errGroupRolledBack ends a group whose only member failed.
var errGroupRolledBack = errors.New("pgstore: group rolled back")

// minSpread is the least wait of an Update before another group starts
// for it while groups are in flight: below it, one group more costs the
// server more than the wait costs the caller.
const minSpread = 5 * time.Millisecond

// grouper queues the Updates of a store with group commit and runs their
// groups.
type grouper struct {
	s         *Store
	max       int // members of a group, at most
	maxGroups int // groups in flight, at most
	// rtt is a moving average of the groups' COMMIT round trips, and
	// fnTime of the time a member holds its group (its function and the
	// statements it sends through Tx), in nanoseconds.
	rtt, fnTime atomic.Int64

	mu      sync.Mutex
	q       []*member
	running int // groups in flight
	timer   *time.Timer
	done    bool
	wg      sync.WaitGroup
}

// member is one Update waiting for, or in, a group. A member with a
// commit plan (UpdatePlanned) has plan, and effect to run on its job as
// the plan writes it.
type member struct {
	ctx    context.Context
	id     uuid.UUID
	queued time.Time
	turn   chan turn
	ret    chan fnReturn
	res    chan result
	plan   *jobstate.CommitPlan
	effect jobstate.EffectFunc
}

// turn tells a member's caller what to do: run alone, fail at once, run
// its function on snap with the context fctx, or run its effect on
// planned, its job as its plan wrote it, with fctx and its savepoints sp.
type turn struct {
	alone   bool
	err     error
	snap    *jobstate.Snapshot
	fctx    context.Context
	planned *jobstate.Job
	sp      jobstate.Savepointer
}

// fnReturn is what the member's function returned.
type fnReturn struct {
	w   jobstate.Write
	err error
}

// result is a member's outcome: with its plan applied, the transitions
// the plan wrote.
type result struct {
	job  jobstate.Job
	recs []jobstate.Transition
	err  error
}

func newGrouper(s *Store, max, maxGroups int) *grouper {
	return &grouper{s: s, max: max, maxGroups: maxGroups}
}

// close waits for the groups in flight; Updates still waiting, and later
// ones, run alone.
func (g *grouper) close() {
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		return
	}
	g.done = true
	q := g.q
	g.q = nil
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	for _, m := range q {
		m.turn <- turn{alone: true}
	}
	g.wg.Wait()
}

// update is Store.Update through a group.
func (g *grouper) update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	m := &member{ctx: ctx, id: id, queued: time.Now(), turn: make(chan turn, 1), ret: make(chan fnReturn, 1), res: make(chan result, 1)}
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		return g.s.updateAlone(ctx, id, fn)
	}
	g.q = append(g.q, m)
	g.kick()
	g.mu.Unlock()
	t := <-m.turn
	if t.alone {
		return g.s.updateAlone(ctx, id, fn)
	}
	return g.runTurn(m, t, fn)
}

// updatePlanned is Store.UpdatePlanned through a group: the group applies
// the plan, and hands the member a turn to run its effect on the job as
// written; if the plan does not cover the job, or an effect of the
// group's planned members fails, the member takes a turn as an Update's,
// with fn.
func (g *grouper) updatePlanned(ctx context.Context, id uuid.UUID, p *jobstate.CommitPlan, effect jobstate.EffectFunc, fn jobstate.UpdateFunc) (jobstate.Job, []jobstate.Transition, error) {
	m := &member{ctx: ctx, id: id, queued: time.Now(), turn: make(chan turn, 1), ret: make(chan fnReturn, 1), res: make(chan result, 1),
		plan: p, effect: effect}
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		j, err := g.s.updateAlone(ctx, id, fn)
		return j, nil, err
	}
	g.q = append(g.q, m)
	g.kick()
	g.mu.Unlock()
	for {
		select {
		case r := <-m.res:
			return r.job, r.recs, r.err
		case t := <-m.turn:
			switch {
			case t.alone:
				j, err := g.s.updateAlone(ctx, id, fn)
				return j, nil, err
			case t.planned != nil:
				sent := false
				func() {
					defer func() {
						if !sent {
							// The effect panicked: the group undoes its
							// plans; the panic goes on in the caller.
							m.ret <- fnReturn{err: errors.New("pgstore: commit effect panicked")}
						}
					}()
					err := runPlannedEffect(t, effect)
					sent = true
					m.ret <- fnReturn{err: err}
				}()
			default:
				j, err := g.runTurn(m, t, fn)
				return j, nil, err
			}
		}
	}
}

// runPlannedEffect runs effect on the job t.planned in a savepoint of
// t.sp, as the engine runs an effect: a failure undoes what it wrote.
func runPlannedEffect(t turn, effect jobstate.EffectFunc) error {
	if effect == nil {
		return nil
	}
	end, err := t.sp.Savepoint(t.fctx)
	if err != nil {
		return err
	}
	if err := effect(t.fctx, *t.planned); err != nil {
		if rerr := end(false); rerr != nil {
			return rerr
		}
		return err
	}
	return end(true)
}

// runTurn runs member m's function fn in its turn t and waits for the
// group's answer.
func (g *grouper) runTurn(m *member, t turn, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	// Whatever happens, the job stays locked by the group until it ends:
	// the caller waits for that, so that what it does next finds the
	// job unlocked, as after an Update of its own.
	if t.err != nil {
		<-m.res
		return jobstate.Job{}, t.err
	}
	var r fnReturn
	func() {
		ok := false
		defer func() {
			if !ok {
				// fn panicked: the group rolls the member back and goes
				// on; the panic goes on in the caller.
				m.ret <- fnReturn{err: errors.New("pgstore: update function panicked")}
			}
		}()
		r.w, r.err = fn(t.fctx, *t.snap)
		ok = true
	}()
	m.ret <- r
	res := <-m.res
	if r.err != nil {
		if res.err != nil {
			// The function met the loss of the group's connection.
			return jobstate.Job{}, res.err
		}
		return jobstate.Job{}, r.err
	}
	return res.job, res.err
}

// spread is how long Updates wait before another group starts for them
// while groups are in flight: two of the groups' recent round trips, at
// least minSpread.
func (g *grouper) spread() time.Duration {
	return max(2*time.Duration(g.rtt.Load()), minSpread)
}

// kick starts a group for the waiting Updates if one may start: none is
// in flight; or fewer than maxGroups are, more Updates wait than the
// groups in flight can take (fits each), and the oldest has waited
// longer than spread. While only the wait is short, it arms a timer for
// when it will not be. g.mu is held.
func (g *grouper) kick() {
	if g.done || len(g.q) == 0 || g.running >= g.maxGroups {
		return
	}
	if g.running > 0 {
		if len(g.q) <= g.running*g.fits() {
			return
		}
		if wait := g.spread() - time.Since(g.q[0].queued); wait > 0 {
			if g.timer == nil {
				g.timer = time.AfterFunc(wait, func() {
					g.mu.Lock()
					g.timer = nil
					g.kick()
					g.mu.Unlock()
				})
			}
			return
		}
	}
	g.running++
	g.wg.Add(1)
	go g.run()
}

// run runs groups while Updates wait, then ends.
func (g *grouper) run() {
	defer g.wg.Done()
	for {
		ms := g.take()
		if ms == nil {
			return
		}
		g.runGroup(ms)
	}
}

// take returns the next group's Updates, up to max and to what fits,
// of distinct jobs, in arrival order, and starts a further group if one
// may start; nil (the group runner ending) when none waits or the store
// is closed.
func (g *grouper) take() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || len(g.q) == 0 {
		g.running--
		return nil
	}
	n := min(g.max, g.fits())
	seen := make(map[uuid.UUID]bool, min(len(g.q), n))
	var ms, rest []*member
	for _, m := range g.q {
		if len(ms) < n && !seen[m.id] {
			seen[m.id] = true
			ms = append(ms, m)
		} else {
			rest = append(rest, m)
		}
	}
	g.q = rest
	g.kick()
	return ms
}

// fitRoundTrips is how many round trips the members of a group may take
// in all: a group lasts about that many and two more (its lock and its
// COMMIT), which bounds what its members wait.
const fitRoundTrips = 4

// fits is how many members a group takes at most, from what they have
// cost: as many as run within fitRoundTrips of the groups' round trips
// (at least one). Members whose functions send nothing cost little, and
// a group takes GroupCommit of them; members that write through Tx on a
// far server cost a round trip each, and groups take a few.
func (g *grouper) fits() int {
	rtt, fn := g.rtt.Load(), g.fnTime.Load()
	if rtt == 0 || fn == 0 {
		return g.max
	}
	return int(max(1, fitRoundTrips*rtt/fn))
}

// average folds d into the moving average v.
func average(v *atomic.Int64, d time.Duration) {
	old := v.Load()
	if old == 0 {
		v.Store(int64(d))
		return
	}
	v.Store(old + (int64(d)-old)/8)
}
