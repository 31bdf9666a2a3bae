-- The statements of idempotency keys and concurrency keys. Conventions:
-- see reads.sql.

-- The advisory locks of a creation's idempotency keys (@names: their
-- lock names), taken in the order of the locks' numbers, so that two
-- batches sharing keys (or locks, when names collide) take them in one
-- order.

-- name: key_locks
SELECT count(pg_advisory_xact_lock(h))
  FROM (SELECT DISTINCT hashtextextended(n, 0) AS h FROM unnest(@names::text[]) AS v(n) ORDER BY h) AS l

-- The holders of idempotency keys (@machines and @keys, pairwise), read
-- after their locks: each key looked up by its primary key.

-- name: holders
SELECT j.*
  FROM unnest(@machines::text[], @keys::text[]) AS v(machine, key)
 CROSS JOIN LATERAL (
   SELECT {job_columns} FROM {schema}.jobs
    WHERE id = (SELECT job_id FROM {schema}.idempotency_keys k WHERE k.machine = v.machine AND k.key = v.key)
 ) AS j

-- name: take_keys
INSERT INTO {schema}.idempotency_keys (machine, key, job_id)
SELECT * FROM unnest(@machines::text[], @keys::text[], @job_ids::uuid[])
    ON CONFLICT (machine, key) DO UPDATE SET job_id = EXCLUDED.job_id

-- The locks of concurrency keys (@names, sorted by the store), one after
-- another, waiting for each: two transactions waiting for several keys
-- take them in the same order.

-- name: key_wait
SELECT count(pg_advisory_xact_lock(hashtextextended(n, 0)))
  FROM unnest(@names::text[]) WITH ORDINALITY AS v(n, i)

-- The live executions of @machine's concurrency keys @keys.

-- name: key_live
SELECT concurrency_key, sum(leases)::int8
  FROM {schema}.jobs
 WHERE machine = @machine AND concurrency_key = ANY (@keys) AND leases > 0 AND concurrency_key <> ''
 GROUP BY concurrency_key

-- The recomputation of key_heads: for each triple of @machines, @keys and
-- @priorities, the row of the first ready job of the triple in claim
-- order (one lookup in jobs_key_ready), inserted or updated, or the
-- triple's row deleted when it has none.

-- name: key_heads
WITH t AS MATERIALIZED (
  SELECT DISTINCT machine, concurrency_key, priority
    FROM unnest(@machines::text[], @keys::text[], @priorities::int8[]) AS t(machine, concurrency_key, priority)
),
f AS MATERIALIZED (
  SELECT t.machine, t.concurrency_key, t.priority, p.id, p.due_at, p.due_ns,
         p.created_at, p.created_ns, p.not_before, p.not_before_ns
    FROM t LEFT JOIN LATERAL (
      SELECT id, due_at, due_ns, created_at, created_ns, not_before, not_before_ns
        FROM {schema}.jobs j
       WHERE j.machine = t.machine AND j.concurrency_key = t.concurrency_key AND j.concurrency_key <> ''
         AND j.kind = 'ready' AND j.priority = t.priority
       ORDER BY j.priority DESC, j.due_at, j.due_ns, j.created_at, j.created_ns, j.id
       LIMIT 1
    ) p ON true
),
d AS (
  DELETE FROM {schema}.key_heads h USING f
   WHERE f.id IS NULL AND h.machine = f.machine AND h.concurrency_key = f.concurrency_key AND h.priority = f.priority
),
i AS (
  INSERT INTO {schema}.key_heads (machine, concurrency_key, priority, job_id, due_at, due_ns,
                                  created_at, created_ns, not_before, not_before_ns)
  SELECT machine, concurrency_key, priority, id, due_at, due_ns, created_at, created_ns, not_before, not_before_ns
    FROM f WHERE f.id IS NOT NULL
      ON CONFLICT (machine, concurrency_key, priority) DO UPDATE SET
         job_id = EXCLUDED.job_id, due_at = EXCLUDED.due_at, due_ns = EXCLUDED.due_ns,
         created_at = EXCLUDED.created_at, created_ns = EXCLUDED.created_ns,
         not_before = EXCLUDED.not_before, not_before_ns = EXCLUDED.not_before_ns
)
SELECT count(*) FROM f
