package pgstore

import (
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// The heads of the concurrency keys (schema version 5). The table
// key_heads holds, for each (machine, concurrency_key, priority) that has
// ready jobs with that key, one row naming the first of them in claim
// order, with its claim-order columns; no row otherwise. A claim merges
// two walks in claim order: the claim index of the jobs without a key
// (jobs_claim) and the index of the heads (key_heads_claim), so that a
// key at its limit costs a claim one entry of key_heads, not its backlog.
//
// Every transaction that makes a job with a key ready, stops it being
// ready, or changes the claim-order columns of a ready job with a key,
// recomputes the heads of the triples it touched (headKeys), in two
// statements sent with its writes, after them: the first takes the keys'
// locks (keyLockName), waiting for each in sorted order, and the second,
// whose READ COMMITTED snapshot is therefore taken once every earlier
// holder of those locks has committed, sets each triple's row to the
// first ready job of the triple (jobs_key_ready), or deletes it. The rows
// of key_heads are written only under their key's lock, so the statement
// never waits for one. Lock order is always: job rows, then key locks
// (sorted), then key_heads rows. Claims take key locks without waiting,
// before the rows (pg_try_advisory_xact_lock); Update waits for its key
// after its job's row; a group takes the locks of all its members' keys
// in one sorted statement after its rows and before any function runs
// (lockGroupKeys); CreateBatch and Create hold no job row of another
// transaction. No transaction thus waits for a key while holding a key
// that sorts after it, nor for a row while holding a key.

// headKey is one (machine, concurrency_key, priority) of key_heads.
type headKey struct {
	machine, key string
	priority     int64
}

// touchedHeads returns the triples of key_heads that a write of a job
// from cur (nil: a new job) to next may change: none for a job without a
// key, or that is ready neither before nor after, or whose claim-order
// columns a ready job keeps; else the triple of each side that is ready.
func touchedHeads(cur, next *jobstate.Job) []headKey {
	if next.ConcurrencyKey == "" {
		return nil
	}
	curReady := cur != nil && cur.Kind == jobstate.KindReady
	nextReady := next.Kind == jobstate.KindReady
	switch {
	case !curReady && !nextReady:
		return nil
	case curReady && nextReady && cur.Priority == next.Priority &&
		cur.NotBefore.Equal(next.NotBefore) && cur.CreatedAt.Equal(next.CreatedAt):
		return nil
	}
	var out []headKey
	if curReady {
		out = append(out, headKey{machine: cur.Machine, key: cur.ConcurrencyKey, priority: int64(cur.Priority)})
	}
	if nextReady {
		out = append(out, headKey{machine: next.Machine, key: next.ConcurrencyKey, priority: int64(next.Priority)})
	}
	return out
}

// queueHeads queues on b the recomputation of the heads of the triples
// in heads (nothing when it is empty): the keys' locks, waiting for each
// in sorted order, then the statement that sets each triple's row. When
// pinned is false (the batch has not pinned its plans), the two are
// planned after pinPlans as p tells (plans.pin, plans.unpin).
func (s *Store) queueHeads(b *pgx.Batch, p *plans, heads []headKey, pinned bool) {
	if len(heads) == 0 {
		return
	}
	heads = slices.Clone(heads)
	slices.SortFunc(heads, func(a, b headKey) int {
		if c := strings.Compare(a.machine, b.machine); c != 0 {
			return c
		}
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(min(max(a.priority-b.priority, -1), 1))
	})
	heads = slices.Compact(heads)
	names := make([]string, 0, len(heads))
	machines := make([]string, len(heads))
	keys := make([]string, len(heads))
	prios := make([]int64, len(heads))
	for i, h := range heads {
		names = append(names, s.keyLockName(h.machine, h.key))
		machines[i], keys[i], prios[i] = h.machine, h.key, h.priority
	}
	slices.Sort(names)
	names = slices.Compact(names)
	pin := false
	if !pinned {
		pin = p.pin(b)
	}
	b.Queue(s.sql.keyWait, names)
	b.Queue(s.sql.heads, machines, keys, prios)
	p.unpin(b, pin)
}
