-- The claim statements. Conventions: see reads.sql and writes.sql;
-- {j.snapshot_columns} is {snapshot_columns} with each column prefixed
-- by "j.".
--
-- A claim takes up to @n due ready jobs of @machine at @now (@now_at,
-- @now_ns) in claim order, but for the ids in @excluded (those a batch
-- already offered). Two walks, each a materialized CTE that locks what it
-- returns (FOR NO KEY UPDATE SKIP LOCKED; a lock is not allowed in a
-- branch of a UNION):
--   u: the first @n due ready jobs without a concurrency key, from
--      jobs_claim;
--   k: the first @n due heads from key_heads_claim, each joined to its
--      job by id. A head is a candidate only if its key's lock can be
--      taken at once (pg_try_advisory_xact_lock on @lock_prefix and the
--      key, evaluated before the row is locked: the claim changes the
--      key's heads, and the rows of a key are locked by claims only under
--      its lock).
-- c takes the first @n of the two in claim order. The rows u and k locked
-- and c did not take stay locked, and their keys' locks held, until the
-- transaction ends; the ids c took, and only those, are recorded in the
-- transaction-local setting jobstate.claimed, which claim_effects, sent
-- after it, reads. The rows come out in c's order, claim order. A key
-- whose head is not due costs the walk one key_heads entry, whatever its
-- backlog.

-- The walk u of the claims: the first @n due ready jobs of @machine
-- without a concurrency key, in claim order, locked.

-- fragment: claim_ready
u AS MATERIALIZED (
  SELECT {snapshot_columns}, due_at AS o_due, due_ns AS o_due_ns
    FROM {schema}.jobs
   WHERE machine = @machine AND kind = 'ready' AND concurrency_key = ''
     AND (not_before, not_before_ns) <= (@now_at, @now_ns) AND id <> ALL (@excluded)
   ORDER BY priority DESC, due_at, due_ns, created_at, created_ns, id
   LIMIT @n
     FOR NO KEY UPDATE SKIP LOCKED
)

-- The walk k of the claims without a limit per key: the first @n due
-- heads, each locked with its key's lock.

-- fragment: claim_heads
k AS MATERIALIZED (
  SELECT {j.snapshot_columns}, j.due_at AS o_due, j.due_ns AS o_due_ns
    FROM {schema}.key_heads h JOIN {schema}.jobs j ON j.id = h.job_id
   WHERE h.machine = @machine AND (h.not_before, h.not_before_ns) <= (@now_at, @now_ns)
     AND h.job_id <> ALL (@excluded)
     AND j.kind = 'ready' AND (j.not_before, j.not_before_ns) <= (@now_at, @now_ns)
     AND CASE WHEN (h.not_before, h.not_before_ns) > (@now_at, @now_ns) OR h.job_id = ANY (@excluded) THEN false
              ELSE pg_try_advisory_xact_lock(hashtextextended(@lock_prefix || h.concurrency_key, 0))
         END
   ORDER BY h.priority DESC, h.due_at, h.due_ns, h.created_at, h.created_ns, h.job_id
   LIMIT @n
     FOR NO KEY UPDATE OF j SKIP LOCKED
)

-- name: claim
WITH {claim_ready},
{claim_heads},
c AS MATERIALIZED (
  SELECT * FROM (SELECT * FROM u UNION ALL SELECT * FROM k) a
   ORDER BY priority DESC, o_due, o_due_ns, created_at, created_ns, id
   LIMIT @n
)
SELECT {snapshot_columns} FROM c
 WHERE (SELECT set_config('jobstate.claimed', array_agg(id)::text, true) FROM c) IS NOT NULL

-- The claim of a machine with a limit of @key_limit live executions per
-- concurrency key (ClaimQuery.MaxPerKey above zero): claim, where a head
-- is a candidate only if, in the statement's snapshot, its key is not at
-- the limit nor among the keys the transaction passed over (@passed),
-- and its job is among the first @key_limit due ready jobs of its key
-- (each key's jobs are taken in claim order). A key at its limit thus
-- costs the walk one key_heads entry, whatever its backlog.

-- name: claim_keyed
WITH {claim_ready},
k AS MATERIALIZED (
  SELECT {j.snapshot_columns}, j.due_at AS o_due, j.due_ns AS o_due_ns
    FROM {schema}.key_heads h JOIN {schema}.jobs j ON j.id = h.job_id
   WHERE h.machine = @machine AND (h.not_before, h.not_before_ns) <= (@now_at, @now_ns)
     AND h.job_id <> ALL (@excluded)
     AND j.kind = 'ready' AND (j.not_before, j.not_before_ns) <= (@now_at, @now_ns)
     AND CASE WHEN (h.not_before, h.not_before_ns) > (@now_at, @now_ns) OR h.job_id = ANY (@excluded) THEN false
              WHEN h.concurrency_key = ANY (@passed) OR h.concurrency_key IN (
                SELECT concurrency_key FROM {schema}.jobs
                 WHERE machine = @machine AND leases > 0 AND concurrency_key <> ''
                 GROUP BY concurrency_key
                HAVING sum(leases) >= @key_limit) THEN false
              WHEN h.job_id <> ALL (ARRAY(
                SELECT p.id FROM {schema}.jobs p
                 WHERE p.machine = @machine AND p.concurrency_key = h.concurrency_key
                   AND p.concurrency_key <> '' AND p.kind = 'ready'
                   AND (p.not_before, p.not_before_ns) <= (@now_at, @now_ns)
                 ORDER BY p.priority DESC, p.due_at, p.due_ns, p.created_at, p.created_ns, p.id
                 LIMIT @key_limit)) THEN false
              ELSE pg_try_advisory_xact_lock(hashtextextended(@lock_prefix || h.concurrency_key, 0))
         END
   ORDER BY h.priority DESC, h.due_at, h.due_ns, h.created_at, h.created_ns, h.job_id
   LIMIT @n
     FOR NO KEY UPDATE OF j SKIP LOCKED
),
c AS MATERIALIZED (
  SELECT * FROM (SELECT * FROM u UNION ALL SELECT * FROM k) a
   ORDER BY priority DESC, o_due, o_due_ns, created_at, created_ns, id
   LIMIT @n
)
SELECT {snapshot_columns} FROM c
 WHERE (SELECT set_config('jobstate.claimed', array_agg(id)::text, true) FROM c) IS NOT NULL

-- The effects of the jobs a claim or a group's lock took, whose ids are
-- in the transaction-local setting named @setting. One index lookup per
-- id (a nested loop over the ids): a plan that depends neither on the
-- table's size nor on its statistics, which right after a bulk load or a
-- truncation would make the planner prefer a sequential scan, whose
-- visibility checks then cost milliseconds under concurrent writes.

-- name: claim_effects
SELECT e.*
  FROM unnest(nullif(current_setting(@setting, true), '')::uuid[]) AS c(id)
 CROSS JOIN LATERAL (
   SELECT job_id, name, exec_id, actor, at, at_ns
     FROM {schema}.effects f
    WHERE f.job_id = c.id
    ORDER BY seq
 ) e

-- The claim of a batch with a plan (jobstate.ClaimPlan): claim's walks
-- and order, then, in the same statement, the plan applied to the
-- candidates it covers whose last execution, if any, is not in the row
-- (p: a ready state with a move of @from_states to @to_states and
-- @outcomes, no live execution, nothing committed, no execution yet, and
-- no deadline acting at @now: @expiring are the states with an expire
-- rule), each given the next of @exec_ids in claim order: the update of
-- the job as ClaimPlan writes it (w) and its history row (h). The rows
-- come out in claim order: those written, as written, with planned set
-- and the state they left; the others, locked, as they are, for the
-- claim function, their ids recorded in the transaction-local setting
-- jobstate.claimed for claim_effects.

-- name: claim_planned
WITH {claim_ready},
{claim_heads},
c AS MATERIALIZED (
  SELECT a.*, row_number() OVER (ORDER BY priority DESC, o_due, o_due_ns, created_at, created_ns, id) AS ord
    FROM (SELECT * FROM u UNION ALL SELECT * FROM k) a
   ORDER BY priority DESC, o_due, o_due_ns, created_at, created_ns, id
   LIMIT @n
),
p AS MATERIALIZED (
  SELECT c.id, c.ord, c.state AS from_state, m.to_state, m.outcome,
         (@exec_ids::uuid[])[row_number() OVER (ORDER BY c.ord)] AS exec_id
    FROM c JOIN unnest(@from_states::text[], @to_states::text[], @outcomes::text[]) AS m (from_state, to_state, outcome)
      ON m.from_state = c.state
   WHERE c.leases = 0 AND c.committed IS NULL AND c.exec_id IS NULL
     AND NOT ((c.deadline, c.deadline_ns) <= (@now_at, @now_ns) AND isfinite(c.deadline) AND c.state = ANY (@expiring))
),
w AS (
  UPDATE {schema}.jobs j SET
    state = p.to_state, kind = 'active', outcome = p.outcome, version = j.version + 1, attempt = j.attempt + 1,
    updated_at = @now_at, updated_ns = @now_ns,
    started_at = CASE WHEN isfinite(j.started_at) THEN j.started_at ELSE @now_at END,
    started_ns = CASE WHEN isfinite(j.started_at) THEN j.started_ns ELSE @now_ns END,
    leases = 1, lease_expires_at = @lease_at, lease_expires_ns = @lease_ns,
    heartbeat_at = @now_at, heartbeat_ns = @now_ns, cancel_requested = false,
    sweep_failures = 0, sweep_retry_at = '-infinity', sweep_retry_ns = 0,
    wake_at = CASE WHEN isfinite(j.deadline) AND (j.deadline, j.deadline_ns) < (@lease_at, @lease_ns)
                    AND p.to_state = ANY (@expiring) THEN j.deadline ELSE @lease_at END,
    wake_ns = CASE WHEN isfinite(j.deadline) AND (j.deadline, j.deadline_ns) < (@lease_at, @lease_ns)
                    AND p.to_state = ANY (@expiring) THEN j.deadline_ns ELSE @lease_ns END,
    exec_id = p.exec_id, exec_attempt = j.attempt + 1, exec_owner = @worker, exec_status = 'LEASED',
    exec_lease_expires_at = @lease_at, exec_lease_expires_ns = @lease_ns,
    exec_heartbeat_at = @now_at, exec_heartbeat_ns = @now_ns, exec_claimed_at = @now_at, exec_claimed_ns = @now_ns,
    exec_started_at = '-infinity', exec_started_ns = 0, exec_finished_at = '-infinity', exec_finished_ns = 0,
    exec_error = ''
    FROM p
   WHERE j.id = p.id
  RETURNING {j.snapshot_columns}, p.ord, p.from_state
),
h AS (
  INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns)
  SELECT id, version, from_state, 'claim', state, @worker, '', exec_id, @now_at, @now_ns FROM w
),
s AS (
  SELECT set_config('jobstate.claimed', coalesce(array_agg(id), '{}')::text, true) AS v
    FROM c WHERE id NOT IN (SELECT id FROM p)
)
SELECT r.* FROM (
  SELECT {snapshot_columns}, true AS planned, from_state, ord FROM w
  UNION ALL
  SELECT {snapshot_columns}, false, '', ord FROM c WHERE id NOT IN (SELECT id FROM p)
) r CROSS JOIN s
 ORDER BY r.ord
