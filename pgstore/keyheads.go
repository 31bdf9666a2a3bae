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

// headColumns are key_heads' columns after the triple, as jobs names
// them but for job_id.
const headColumns = `due_at, due_ns, created_at, created_ns, not_before, not_before_ns`

// headStatement returns the recomputation of key_heads: for each triple
// of the arrays $1 (machines), $2 (keys) and $3 (priorities), the row of
// the first ready job of the triple in claim order (one lookup in
// jobs_key_ready), inserted or updated, or the triple's row deleted when
// it has none.
func headStatement(r *strings.Replacer) string {
	return r.Replace(`WITH t AS MATERIALIZED (SELECT DISTINCT machine, concurrency_key, priority
   FROM unnest($1::text[], $2::text[], $3::int8[]) AS t(machine, concurrency_key, priority)),
 f AS MATERIALIZED (SELECT t.machine, t.concurrency_key, t.priority, p.id, p.due_at, p.due_ns,
   p.created_at, p.created_ns, p.not_before, p.not_before_ns
   FROM t LEFT JOIN LATERAL (SELECT id, ` + headColumns + ` FROM {jobs} j
     WHERE j.machine = t.machine AND j.concurrency_key = t.concurrency_key AND j.concurrency_key <> ''
       AND j.kind = 'ready' AND j.priority = t.priority
     ORDER BY j.priority DESC, j.due_at, j.due_ns, j.created_at, j.created_ns, j.id LIMIT 1) p ON true),
 d AS (DELETE FROM {heads} h USING f
   WHERE f.id IS NULL AND h.machine = f.machine AND h.concurrency_key = f.concurrency_key AND h.priority = f.priority),
 i AS (INSERT INTO {heads} (machine, concurrency_key, priority, job_id, ` + headColumns + `)
   SELECT machine, concurrency_key, priority, id, ` + headColumns + ` FROM f WHERE f.id IS NOT NULL
   ON CONFLICT (machine, concurrency_key, priority) DO UPDATE SET job_id = EXCLUDED.job_id,
     due_at = EXCLUDED.due_at, due_ns = EXCLUDED.due_ns, created_at = EXCLUDED.created_at,
     created_ns = EXCLUDED.created_ns, not_before = EXCLUDED.not_before, not_before_ns = EXCLUDED.not_before_ns)
SELECT count(*) FROM f`)
}

// claimStatement returns the claim statement: limited is a claim with a
// limit per key (ClaimQuery.MaxPerKey above zero). Its parameters are the
// machine ($1), the claim's now ($2, $3), the ids excluded ($4), how many
// jobs ($5), and, limited, the limit ($6) and the keys the transaction
// passed over ($7); the prefix of the key locks' names (keyLockPrefix) is
// $6 without a limit, $8 with.
//
// Two walks, each a materialized CTE that locks what it returns (FOR NO
// KEY UPDATE SKIP LOCKED; a lock is not allowed in a branch of a UNION):
// u, the first $5 due ready jobs without a key from jobs_claim; k, the
// first $5 due heads from key_heads_claim, each joined to its job by id.
// A head is a candidate only if its key's lock can be taken at once
// (pg_try_advisory_xact_lock, evaluated before the row is locked: the
// claim changes the key's heads, and the rows of a key are locked by
// claims only under its lock) and, limited, if in the statement's
// snapshot its key is not at the limit nor passed over, and its job is
// among the first $6 due ready jobs of its key (each key's jobs are taken
// in claim order). c takes the first $5 of the two in claim order: the
// rows u and k locked and c did not take stay locked, and the locks of
// their keys held, until the transaction ends; the ids c took, and only
// them, are recorded in the transaction-local setting jobstate.claimed,
// which the snapshot reads sent after it use. The rows come out of c in
// c's order, claim order. A key at its limit thus costs the walk one
// key_heads entry, whatever its backlog.
func claimStatement(r *strings.Replacer, limited bool) string {
	lockPrefix, gate := "$6", ""
	if limited {
		lockPrefix = "$8"
		gate = `
            WHEN h.concurrency_key = ANY ($7) OR h.concurrency_key IN (
              SELECT concurrency_key FROM {jobs} WHERE machine = $1 AND leases > 0 AND concurrency_key <> ''
               GROUP BY concurrency_key HAVING sum(leases) >= $6) THEN false
            WHEN h.job_id <> ALL (ARRAY(SELECT p.id FROM {jobs} p
              WHERE p.machine = $1 AND p.concurrency_key = h.concurrency_key AND p.concurrency_key <> ''
                AND p.kind = 'ready' AND (p.not_before, p.not_before_ns) <= ($2, $3)
              ORDER BY p.priority DESC, p.due_at, p.due_ns, p.created_at, p.created_ns, p.id LIMIT $6)) THEN false`
	}
	return r.Replace(`WITH u AS MATERIALIZED (SELECT {snap}, due_at AS o_due, due_ns AS o_due_ns FROM {jobs}
 WHERE machine = $1 AND kind = 'ready' AND concurrency_key = '' AND (not_before, not_before_ns) <= ($2, $3) AND id <> ALL ($4)
 ORDER BY priority DESC, due_at, due_ns, created_at, created_ns, id
 LIMIT $5 FOR NO KEY UPDATE SKIP LOCKED),
 k AS MATERIALIZED (SELECT {jsnap}, j.due_at AS o_due, j.due_ns AS o_due_ns FROM {heads} h JOIN {jobs} j ON j.id = h.job_id
 WHERE h.machine = $1 AND (h.not_before, h.not_before_ns) <= ($2, $3) AND h.job_id <> ALL ($4)
   AND j.kind = 'ready' AND (j.not_before, j.not_before_ns) <= ($2, $3)
   AND CASE WHEN (h.not_before, h.not_before_ns) > ($2, $3) OR h.job_id = ANY ($4) THEN false` + gate + `
            ELSE pg_try_advisory_xact_lock(hashtextextended(` + lockPrefix + ` || h.concurrency_key, 0)) END
 ORDER BY h.priority DESC, h.due_at, h.due_ns, h.created_at, h.created_ns, h.job_id
 LIMIT $5 FOR NO KEY UPDATE OF j SKIP LOCKED),
 c AS MATERIALIZED (SELECT * FROM (SELECT * FROM u UNION ALL SELECT * FROM k) a
 ORDER BY priority DESC, o_due, o_due_ns, created_at, created_ns, id LIMIT $5)
SELECT {snap} FROM c WHERE (SELECT set_config('jobstate.claimed', array_agg(id)::text, true) FROM c) IS NOT NULL`)
}

// qualified returns the column list cols with each column prefixed by
// alias and a dot.
func qualified(alias, cols string) string {
	names := columnNames(cols)
	for i := range names {
		names[i] = alias + "." + names[i]
	}
	return strings.Join(names, ", ")
}
