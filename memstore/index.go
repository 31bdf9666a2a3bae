package memstore

import (
	"cmp"
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/google/btree"
	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// newBTree returns an empty tree ordered by less, of degree 16 (nodes of
// 15 to 31 items). It keeps no free list: a node a deletion empties is
// left to the garbage collector, so that a tree's memory follows its items.
func newBTree[T any](less btree.LessFunc[T]) *btree.BTreeG[T] {
	return btree.NewWithFreeListG(16, less, btree.NewFreeListG[T](0))
}

// instant is a time as seconds since the Unix epoch and nanoseconds
// within the second: it orders every time.Time exactly, whatever its
// location and monotonic reading. The zero time ("none" in a Job) comes
// before every instant the engine accepts.
type instant struct {
	sec  int64
	nsec int32
}

func instantOf(t time.Time) instant { return instant{sec: t.Unix(), nsec: int32(t.Nanosecond())} }

func (a instant) compare(b instant) int {
	if c := cmp.Compare(a.sec, b.sec); c != 0 {
		return c
	}
	return cmp.Compare(a.nsec, b.nsec)
}

// Bounds below and above every instant.
var (
	beforeAll = instant{sec: math.MinInt64}
	afterAll  = instant{sec: math.MaxInt64}
)

// jobID is a job's id as two integers, ordered as the id's bytes are (as
// PostgreSQL orders uuids), so that items are passed in registers and
// compared in two steps.
type jobID struct{ hi, lo uint64 }

func idOf(id uuid.UUID) jobID {
	return jobID{hi: binary.BigEndian.Uint64(id[:8]), lo: binary.BigEndian.Uint64(id[8:])}
}

func (a jobID) compare(b jobID) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

// uuid returns the id a's integers were taken from.
func (a jobID) uuid() uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], a.hi)
	binary.BigEndian.PutUint64(id[8:], a.lo)
	return id
}

// item is a job's place in an index ordered by time: the time, then the
// job's id, which makes items distinct. Items are copies taken when the
// job was indexed, so that the item can be found again once the job has
// changed; they hold no pointer, and the store finds the job by its id.
type item struct {
	at instant
	id jobID
}

// compareItems orders items by time, then id.
func compareItems(a, b item) int {
	if c := a.at.compare(b.at); c != 0 {
		return c
	}
	return a.id.compare(b.id)
}

func newTree() *btree.BTreeG[item] {
	return newBTree(func(a, b item) bool { return compareItems(a, b) < 0 })
}

// groupItem is a job's place in a listing index: a group (a state, an
// owner or an idempotency key), then an item.
type groupItem struct {
	group string
	item
}

// compareGroupItems orders items by group, then time, then id.
func compareGroupItems(a, b groupItem) int {
	if a.group != b.group {
		return strings.Compare(a.group, b.group)
	}
	return compareItems(a.item, b.item)
}

func newGroupTree() *btree.BTreeG[groupItem] {
	return newBTree(func(a, b groupItem) bool { return compareGroupItems(a, b) < 0 })
}

// claimItem is a ready job's place in claim order: priority (higher
// first), then due time (Job.DueAt), then creation time, then id.
type claimItem struct {
	priority     int
	due, created instant
	id           jobID
}

func claimLess(a, b claimItem) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if c := a.due.compare(b.due); c != 0 {
		return c < 0
	}
	if c := a.created.compare(b.created); c != 0 {
		return c < 0
	}
	return a.id.compare(b.id) < 0
}

func claimItemOf(j *jobstate.Job) claimItem {
	return claimItem{priority: j.Priority, due: instantOf(j.DueAt()), created: instantOf(j.CreatedAt), id: idOf(j.ID)}
}

// index names an index of items. Each holds a job where its current
// version places it (itemOf), and nothing else decides.
type index int

const (
	byCompletion   index = iota // terminal jobs, by completion time
	byWake                      // jobs with a wake time, by it
	byHeartbeat                 // jobs holding leases, by heartbeat
	byOwner                     // jobs with an owner, by owner, then creation time
	byKey                       // jobs created with a key, by key, then creation time
	byStateCreated              // every job, by state, then creation time
	byStateUpdated              // every job, by state, then update time
)

// itemOf returns the item of x where j, a version of a job, places it,
// and whether x holds it at all (never for a nil j). The group is empty
// in the indexes ordered by time alone.
func (x index) itemOf(j *jobstate.Job) (groupItem, bool) {
	if j == nil {
		return groupItem{}, false
	}
	it := groupItem{item: item{id: idOf(j.ID)}}
	in := true
	switch x {
	case byCompletion:
		it.at, in = instantOf(j.CompletedAt), j.Kind == jobstate.KindTerminal
	case byWake:
		it.at, in = instantOf(j.WakeAt), !j.WakeAt.IsZero()
	case byHeartbeat:
		it.at, in = instantOf(j.HeartbeatAt), j.Leases > 0
	case byOwner:
		it.group, it.at, in = j.Owner, instantOf(j.CreatedAt), j.Owner != ""
	case byKey:
		it.group, it.at, in = j.IdempotencyKey, instantOf(j.CreatedAt), j.IdempotencyKey != ""
	case byStateCreated:
		it.group, it.at = string(j.State), instantOf(j.CreatedAt)
	case byStateUpdated:
		it.group, it.at = string(j.State), instantOf(j.UpdatedAt)
	}
	return it, in
}

// move takes a job out of tree, index x, where its version old placed it
// and puts it where cur places it, unless both place it alike; as makes
// the tree's item of a groupItem.
func move[T any](tree *btree.BTreeG[T], x index, old, cur *jobstate.Job, as func(groupItem) T) {
	was, wasIn := x.itemOf(old)
	is, isIn := x.itemOf(cur)
	if wasIn && isIn && compareGroupItems(was, is) == 0 {
		return
	}
	if wasIn {
		tree.Delete(as(was))
	}
	if isIn {
		tree.ReplaceOrInsert(as(is))
	}
}

// timeItem and asGroupItem make a tree's item of a groupItem.
func timeItem(it groupItem) item         { return it.item }
func asGroupItem(it groupItem) groupItem { return it }

// machine holds the indexes of one machine's jobs. Guarded by the store's
// mu.
type machine struct {
	// counts is the number of the machine's jobs in each state (states
	// with none are absent).
	counts map[jobstate.State]int
	// created and updated hold every job of the machine, grouped by state,
	// by creation and by update time: listing indexes.
	created, updated *btree.BTreeG[groupItem]
	// wake holds the jobs with a wake time, by wake time: the index of Due.
	wake *btree.BTreeG[item]
	// The ready jobs are scheduled or available: scheduled holds those
	// whose not-before is after horizon, by not-before; the others are
	// available. A claim at a time after horizon first makes the jobs due
	// at its time available, then makes its time the horizon. A claim at
	// an earlier time (another engine's clock, a clock set back) passes
	// over the available jobs not due at its time.
	//
	// available holds, in claim order, the available jobs without a
	// concurrency key and, of each key's available jobs, the first in
	// claim order (its head); byKey holds each key's available jobs, in
	// claim order. A claim thus passes over a key at its limit once, not
	// once per job of the key.
	scheduled *btree.BTreeG[item]
	available *btree.BTreeG[claimItem]
	byKey     map[string]*btree.BTreeG[claimItem]
	horizon   instant
	// live is the number of live executions (Job.Leases) of the machine's
	// jobs per concurrency key (keys with none are absent).
	live map[string]int
}

func newMachine() *machine {
	return &machine{
		counts:    make(map[jobstate.State]int),
		created:   newGroupTree(),
		updated:   newGroupTree(),
		wake:      newTree(),
		scheduled: newTree(),
		available: newBTree(claimLess),
		horizon:   instantOf(time.Time{}), // a job with no not-before is due at once
		live:      make(map[string]int),
		byKey:     make(map[string]*btree.BTreeG[claimItem]),
	}
}

// reindex moves e in every index from where its job's version old put it
// to where cur puts it: old is nil for a new job, cur nil for a deleted
// one. Caller holds mu.
func (s *Store) reindex(e *entry, old, cur *jobstate.Job) {
	if old != nil && cur != nil && old.Machine != cur.Machine {
		s.reindex(e, old, nil)
		s.reindex(e, nil, cur)
		return
	}
	name := ""
	if cur != nil {
		name = cur.Machine
	} else if old != nil {
		name = old.Machine
	}
	m := s.machines[name]
	if m == nil {
		m = newMachine()
		s.machines[name] = m
	}
	move(s.done, byCompletion, old, cur, timeItem)
	move(s.leased, byHeartbeat, old, cur, timeItem)
	move(m.wake, byWake, old, cur, timeItem)
	m.moveReady(e, old, cur)
	m.moveLive(old, cur)
	if old == nil || cur == nil || old.State != cur.State {
		if old != nil {
			if m.counts[old.State]--; m.counts[old.State] == 0 {
				delete(m.counts, old.State)
			}
		}
		if cur != nil {
			m.counts[cur.State]++
		}
	}
	if s.listing {
		s.relist(m, old, cur)
	}
}

// relist is reindex for the listing indexes of a job of m. Caller
// holds mu.
func (s *Store) relist(m *machine, old, cur *jobstate.Job) {
	move(s.owners, byOwner, old, cur, asGroupItem)
	move(s.keyed, byKey, old, cur, asGroupItem)
	move(m.created, byStateCreated, old, cur, asGroupItem)
	move(m.updated, byStateUpdated, old, cur, asGroupItem)
}

// startListing fills the listing indexes and has every write keep them
// from then on: a store that is never listed does not pay for them. It
// holds the store's lock while it indexes every job.
func (s *Store) startListing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listing {
		return
	}
	for _, e := range s.jobs {
		s.relist(s.machines[e.job.Machine], nil, &e.job)
	}
	s.listing = true
}

// moveReady takes e out of the claim tree that holds it if old was ready,
// and puts it in the one it belongs in if cur is.
func (m *machine) moveReady(e *entry, old, cur *jobstate.Job) {
	if old != nil && old.Kind == jobstate.KindReady {
		if e.available {
			m.unavail(claimItemOf(old), old.ConcurrencyKey)
		} else {
			m.scheduled.Delete(item{at: instantOf(old.NotBefore), id: idOf(old.ID)})
		}
	}
	if cur != nil && cur.Kind == jobstate.KindReady {
		nb := instantOf(cur.NotBefore)
		e.available = nb.compare(m.horizon) <= 0
		if e.available {
			m.avail(claimItemOf(cur), cur.ConcurrencyKey)
		} else {
			m.scheduled.ReplaceOrInsert(item{at: nb, id: idOf(cur.ID)})
		}
	}
}

// avail makes the job of it, whose concurrency key is k, available.
// Caller holds mu.
func (m *machine) avail(it claimItem, k string) {
	if k == "" {
		m.available.ReplaceOrInsert(it)
		return
	}
	jobs := m.byKey[k]
	if jobs == nil {
		jobs = newBTree(claimLess)
		m.byKey[k] = jobs
	}
	head, had := jobs.Min()
	jobs.ReplaceOrInsert(it)
	if !had || claimLess(it, head) {
		if had {
			m.available.Delete(head)
		}
		m.available.ReplaceOrInsert(it)
	}
}

// unavail makes the job of it, whose concurrency key is k, unavailable.
// Caller holds mu.
func (m *machine) unavail(it claimItem, k string) {
	if k == "" {
		m.available.Delete(it)
		return
	}
	jobs := m.byKey[k]
	if jobs == nil {
		return
	}
	head, _ := jobs.Min()
	jobs.Delete(it)
	if head.id != it.id {
		return
	}
	m.available.Delete(it)
	if next, ok := jobs.Min(); ok {
		m.available.ReplaceOrInsert(next)
	} else {
		delete(m.byKey, k)
	}
}

// promoteBatch bounds how many jobs one hold of the store's lock moves
// from scheduled to available.
const promoteBatch = 1000

// promote moves up to promoteBatch jobs of m due at now from scheduled to
// available, and makes now the horizon once none is left. Caller holds mu.
func (s *Store) promote(m *machine, now instant) {
	var due []item
	m.scheduled.Ascend(func(it item) bool {
		if it.at.compare(now) > 0 || len(due) == promoteBatch {
			return false
		}
		due = append(due, it)
		return true
	})
	for _, it := range due {
		m.scheduled.Delete(it)
		e := s.entry(it.id)
		e.available = true
		m.avail(claimItemOf(&e.job), e.job.ConcurrencyKey)
	}
	if len(due) < promoteBatch && now.compare(m.horizon) > 0 {
		m.horizon = now
	}
}

// needsPromotion reports whether a job of scheduled is due at now. Caller
// holds mu.
func (m *machine) needsPromotion(now instant) bool {
	first, ok := m.scheduled.Min()
	return ok && first.at.compare(now) <= 0
}
