-- The statements of a write: the lock and snapshot of the jobs it
-- changes, and what it writes. Conventions: see reads.sql;
-- {snapshot_columns} is {job_columns} and {exec_columns}.

-- Update's lock: the job with its executions. Its effects are read by
-- snapshot_effects, a later statement of the same batch, so after the
-- lock was granted.

-- name: lock
SELECT {snapshot_columns} FROM {schema}.jobs WHERE id = @id FOR NO KEY UPDATE

-- name: snapshot_effects
SELECT job_id, name, exec_id, actor, at, at_ns
  FROM {schema}.effects
 WHERE job_id = @job_id
 ORDER BY seq

-- A commit group's lock: the jobs of @ids it can lock at once, never
-- waiting (a job it cannot lock is handed back to its caller). The ids
-- locked are recorded in the transaction-local setting jobstate.claimed,
-- from which claim_effects (claims.sql) reads their effects.

-- name: lock_many
WITH c AS MATERIALIZED (
  SELECT {snapshot_columns} FROM {schema}.jobs WHERE id = ANY (@ids) FOR NO KEY UPDATE SKIP LOCKED
)
SELECT c.* FROM c
 WHERE (SELECT set_config('jobstate.claimed', array_agg(id)::text, true) FROM c) IS NOT NULL

-- A job created. A duplicate id fails on jobs_pkey. It returns the row
-- without its payload and result, which are the ones sent.

-- name: insert_job
INSERT INTO {schema}.jobs (
  id, machine, state, kind, outcome, payload, result, version, attempt,
  retry_count, max_retries, backoff_kind, backoff_initial, backoff_factor, backoff_max,
  backoff_jitter, own_backoff, last_error, error_class, idempotency_key, fingerprint, owner,
  priority, created_at, created_ns, updated_at, updated_ns, started_at, started_ns,
  completed_at, completed_ns, not_before, not_before_ns, deadline, deadline_ns, leases,
  lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns, committed,
  cancel_requested, wake_at, wake_ns, sweep_failures, sweep_retry_at, sweep_retry_ns,
  concurrency_key, due_at, due_ns, {exec_columns}
) VALUES (
  @id, @machine, @state, @kind, @outcome, @payload, @result, @version, @attempt,
  @retry_count, @max_retries, @backoff_kind, @backoff_initial, @backoff_factor, @backoff_max,
  @backoff_jitter, @own_backoff, @last_error, @error_class, @idempotency_key, @fingerprint, @owner,
  @priority, @created_at, @created_ns, @updated_at, @updated_ns, @started_at, @started_ns,
  @completed_at, @completed_ns, @not_before, @not_before_ns, @deadline, @deadline_ns, @leases,
  @lease_expires_at, @lease_expires_ns, @heartbeat_at, @heartbeat_ns, @committed,
  @cancel_requested, @wake_at, @wake_ns, @sweep_failures, @sweep_retry_at, @sweep_retry_ns,
  @concurrency_key, @due_at, @due_ns, @earlier_execs::text::jsonb,
  @exec_id, @exec_attempt, @exec_owner, @exec_status, @exec_lease_expires_at, @exec_lease_expires_ns,
  @exec_heartbeat_at, @exec_heartbeat_ns, @exec_claimed_at, @exec_claimed_ns,
  @exec_started_at, @exec_started_ns, @exec_finished_at, @exec_finished_ns, @exec_error
)
RETURNING
  id, machine, state, kind, outcome, NULL::bytea, NULL::bytea, version, attempt,
  retry_count, max_retries, backoff_kind, backoff_initial, backoff_factor, backoff_max,
  backoff_jitter, own_backoff, last_error, error_class, idempotency_key, fingerprint, owner,
  priority, created_at, created_ns, updated_at, updated_ns, started_at, started_ns,
  completed_at, completed_ns, not_before, not_before_ns, deadline, deadline_ns, leases,
  lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns, committed,
  cancel_requested, wake_at, wake_ns, sweep_failures, sweep_retry_at, sweep_retry_ns,
  concurrency_key

-- A job written at the version read (@old_version). The payload and
-- result are set only when they changed (@payload_changed,
-- @result_changed), so that a large payload crosses the network once.
-- The concurrency key is set at creation and never changed
-- (jobstate.CheckWrite refuses a write changing it): it is compared, not
-- written. The statement goes to the server with the COMMIT, so a
-- refusal must be the server's: a job not found at that version fails it
-- with a division by zero.

-- name: update_job
WITH u AS (
  UPDATE {schema}.jobs SET
    machine = @machine, state = @state, kind = @kind, outcome = @outcome,
    payload = CASE WHEN @payload_changed THEN @payload ELSE payload END,
    result = CASE WHEN @result_changed THEN @result ELSE result END,
    version = @version, attempt = @attempt, retry_count = @retry_count, max_retries = @max_retries,
    backoff_kind = @backoff_kind, backoff_initial = @backoff_initial, backoff_factor = @backoff_factor,
    backoff_max = @backoff_max, backoff_jitter = @backoff_jitter, own_backoff = @own_backoff,
    last_error = @last_error, error_class = @error_class, idempotency_key = @idempotency_key,
    fingerprint = @fingerprint, owner = @owner, priority = @priority,
    created_at = @created_at, created_ns = @created_ns, updated_at = @updated_at, updated_ns = @updated_ns,
    started_at = @started_at, started_ns = @started_ns, completed_at = @completed_at, completed_ns = @completed_ns,
    not_before = @not_before, not_before_ns = @not_before_ns, deadline = @deadline, deadline_ns = @deadline_ns,
    leases = @leases, lease_expires_at = @lease_expires_at, lease_expires_ns = @lease_expires_ns,
    heartbeat_at = @heartbeat_at, heartbeat_ns = @heartbeat_ns, committed = @committed,
    cancel_requested = @cancel_requested, wake_at = @wake_at, wake_ns = @wake_ns,
    sweep_failures = @sweep_failures, sweep_retry_at = @sweep_retry_at, sweep_retry_ns = @sweep_retry_ns,
    due_at = @due_at, due_ns = @due_ns, earlier_execs = @earlier_execs::text::jsonb,
    exec_id = @exec_id, exec_attempt = @exec_attempt, exec_owner = @exec_owner, exec_status = @exec_status,
    exec_lease_expires_at = @exec_lease_expires_at, exec_lease_expires_ns = @exec_lease_expires_ns,
    exec_heartbeat_at = @exec_heartbeat_at, exec_heartbeat_ns = @exec_heartbeat_ns,
    exec_claimed_at = @exec_claimed_at, exec_claimed_ns = @exec_claimed_ns,
    exec_started_at = @exec_started_at, exec_started_ns = @exec_started_ns,
    exec_finished_at = @exec_finished_at, exec_finished_ns = @exec_finished_ns, exec_error = @exec_error
  WHERE id = @id AND version = @old_version AND concurrency_key = @concurrency_key
  RETURNING 1
)
SELECT 1 / count(*) FROM u

-- name: insert_transition
INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns)
VALUES (@job_id, @version, @from_state, @event, @to_state, @actor, @reason, @exec_id, @at, @at_ns)

-- name: insert_effect
INSERT INTO {schema}.effects (job_id, name, exec_id, actor, at, at_ns)
VALUES (@job_id, @name, @exec_id, @actor, @at, @at_ns)

-- The writes of many jobs at once (a claim batch, a commit group), one
-- array per column: every job's update in one statement, as update_job
-- writes one, guarded by the count of rows updated (@rows); every
-- transition in one insert; every effect in one insert.

-- name: update_many
WITH u AS (
  UPDATE {schema}.jobs j SET
    machine = v.machine, state = v.state, kind = v.kind, outcome = v.outcome,
    payload = CASE WHEN v.payload_changed THEN v.payload ELSE j.payload END,
    result = CASE WHEN v.result_changed THEN v.result ELSE j.result END,
    version = v.version, attempt = v.attempt, retry_count = v.retry_count, max_retries = v.max_retries,
    backoff_kind = v.backoff_kind, backoff_initial = v.backoff_initial, backoff_factor = v.backoff_factor,
    backoff_max = v.backoff_max, backoff_jitter = v.backoff_jitter, own_backoff = v.own_backoff,
    last_error = v.last_error, error_class = v.error_class, idempotency_key = v.idempotency_key,
    fingerprint = v.fingerprint, owner = v.owner, priority = v.priority,
    created_at = v.created_at, created_ns = v.created_ns, updated_at = v.updated_at, updated_ns = v.updated_ns,
    started_at = v.started_at, started_ns = v.started_ns, completed_at = v.completed_at, completed_ns = v.completed_ns,
    not_before = v.not_before, not_before_ns = v.not_before_ns, deadline = v.deadline, deadline_ns = v.deadline_ns,
    leases = v.leases, lease_expires_at = v.lease_expires_at, lease_expires_ns = v.lease_expires_ns,
    heartbeat_at = v.heartbeat_at, heartbeat_ns = v.heartbeat_ns, committed = v.committed,
    cancel_requested = v.cancel_requested, wake_at = v.wake_at, wake_ns = v.wake_ns,
    sweep_failures = v.sweep_failures, sweep_retry_at = v.sweep_retry_at, sweep_retry_ns = v.sweep_retry_ns,
    due_at = v.due_at, due_ns = v.due_ns, earlier_execs = v.earlier_execs::jsonb,
    exec_id = v.exec_id, exec_attempt = v.exec_attempt, exec_owner = v.exec_owner, exec_status = v.exec_status,
    exec_lease_expires_at = v.exec_lease_expires_at, exec_lease_expires_ns = v.exec_lease_expires_ns,
    exec_heartbeat_at = v.exec_heartbeat_at, exec_heartbeat_ns = v.exec_heartbeat_ns,
    exec_claimed_at = v.exec_claimed_at, exec_claimed_ns = v.exec_claimed_ns,
    exec_started_at = v.exec_started_at, exec_started_ns = v.exec_started_ns,
    exec_finished_at = v.exec_finished_at, exec_finished_ns = v.exec_finished_ns, exec_error = v.exec_error
  FROM unnest(
    @id::uuid[], @machine::text[], @state::text[], @kind::text[], @outcome::text[],
    @payload::bytea[], @result::bytea[], @version::int8[], @attempt::int8[],
    @retry_count::int8[], @max_retries::int8[], @backoff_kind::text[], @backoff_initial::int8[],
    @backoff_factor::float8[], @backoff_max::int8[], @backoff_jitter::text[], @own_backoff::bool[],
    @last_error::text[], @error_class::text[], @idempotency_key::text[], @fingerprint::text[], @owner::text[],
    @priority::int8[], @created_at::timestamptz[], @created_ns::int2[], @updated_at::timestamptz[], @updated_ns::int2[],
    @started_at::timestamptz[], @started_ns::int2[], @completed_at::timestamptz[], @completed_ns::int2[],
    @not_before::timestamptz[], @not_before_ns::int2[], @deadline::timestamptz[], @deadline_ns::int2[],
    @leases::int8[], @lease_expires_at::timestamptz[], @lease_expires_ns::int2[],
    @heartbeat_at::timestamptz[], @heartbeat_ns::int2[], @committed::uuid[], @cancel_requested::bool[],
    @wake_at::timestamptz[], @wake_ns::int2[], @sweep_failures::int8[],
    @sweep_retry_at::timestamptz[], @sweep_retry_ns::int2[], @concurrency_key::text[],
    @due_at::timestamptz[], @due_ns::int2[], @earlier_execs::text[],
    @exec_id::uuid[], @exec_attempt::int8[], @exec_owner::text[], @exec_status::text[],
    @exec_lease_expires_at::timestamptz[], @exec_lease_expires_ns::int2[],
    @exec_heartbeat_at::timestamptz[], @exec_heartbeat_ns::int2[],
    @exec_claimed_at::timestamptz[], @exec_claimed_ns::int2[],
    @exec_started_at::timestamptz[], @exec_started_ns::int2[],
    @exec_finished_at::timestamptz[], @exec_finished_ns::int2[], @exec_error::text[],
    @old_version::int8[], @payload_changed::bool[], @result_changed::bool[]
  ) AS v(
    id, machine, state, kind, outcome, payload, result, version, attempt,
    retry_count, max_retries, backoff_kind, backoff_initial, backoff_factor, backoff_max,
    backoff_jitter, own_backoff, last_error, error_class, idempotency_key, fingerprint, owner,
    priority, created_at, created_ns, updated_at, updated_ns, started_at, started_ns,
    completed_at, completed_ns, not_before, not_before_ns, deadline, deadline_ns, leases,
    lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns, committed,
    cancel_requested, wake_at, wake_ns, sweep_failures, sweep_retry_at, sweep_retry_ns,
    concurrency_key, due_at, due_ns, earlier_execs,
    exec_id, exec_attempt, exec_owner, exec_status, exec_lease_expires_at, exec_lease_expires_ns,
    exec_heartbeat_at, exec_heartbeat_ns, exec_claimed_at, exec_claimed_ns, exec_started_at, exec_started_ns,
    exec_finished_at, exec_finished_ns, exec_error,
    old_version, payload_changed, result_changed
  )
  WHERE j.id = v.id AND j.version = v.old_version
  RETURNING 1
)
SELECT 1 / (count(*) = @rows)::int FROM u

-- update_many for a batch whose writes leave every column it does not
-- set as it was (hotwrite.go): a claim's, a heartbeat's, a commit's.
-- It writes a job's last execution, not those before it.

-- name: update_many_hot
WITH u AS (
  UPDATE {schema}.jobs j SET
    state = v.state, kind = v.kind, outcome = v.outcome,
    result = CASE WHEN v.result_changed THEN v.result ELSE j.result END,
    version = v.version, attempt = v.attempt,
    updated_at = v.updated_at, updated_ns = v.updated_ns, started_at = v.started_at, started_ns = v.started_ns,
    completed_at = v.completed_at, completed_ns = v.completed_ns, leases = v.leases,
    lease_expires_at = v.lease_expires_at, lease_expires_ns = v.lease_expires_ns,
    heartbeat_at = v.heartbeat_at, heartbeat_ns = v.heartbeat_ns, committed = v.committed,
    wake_at = v.wake_at, wake_ns = v.wake_ns, due_at = v.due_at, due_ns = v.due_ns,
    exec_id = v.exec_id, exec_attempt = v.exec_attempt, exec_owner = v.exec_owner, exec_status = v.exec_status,
    exec_lease_expires_at = v.exec_lease_expires_at, exec_lease_expires_ns = v.exec_lease_expires_ns,
    exec_heartbeat_at = v.exec_heartbeat_at, exec_heartbeat_ns = v.exec_heartbeat_ns,
    exec_claimed_at = v.exec_claimed_at, exec_claimed_ns = v.exec_claimed_ns,
    exec_started_at = v.exec_started_at, exec_started_ns = v.exec_started_ns,
    exec_finished_at = v.exec_finished_at, exec_finished_ns = v.exec_finished_ns, exec_error = v.exec_error
  FROM unnest(
    @id::uuid[], @state::text[], @kind::text[], @outcome::text[], @result::bytea[], @version::int8[], @attempt::int8[],
    @updated_at::timestamptz[], @updated_ns::int2[], @started_at::timestamptz[], @started_ns::int2[],
    @completed_at::timestamptz[], @completed_ns::int2[], @leases::int8[],
    @lease_expires_at::timestamptz[], @lease_expires_ns::int2[], @heartbeat_at::timestamptz[], @heartbeat_ns::int2[],
    @committed::uuid[], @wake_at::timestamptz[], @wake_ns::int2[], @due_at::timestamptz[], @due_ns::int2[],
    @exec_id::uuid[], @exec_attempt::int8[], @exec_owner::text[], @exec_status::text[],
    @exec_lease_expires_at::timestamptz[], @exec_lease_expires_ns::int2[],
    @exec_heartbeat_at::timestamptz[], @exec_heartbeat_ns::int2[],
    @exec_claimed_at::timestamptz[], @exec_claimed_ns::int2[],
    @exec_started_at::timestamptz[], @exec_started_ns::int2[],
    @exec_finished_at::timestamptz[], @exec_finished_ns::int2[], @exec_error::text[],
    @old_version::int8[], @result_changed::bool[]
  ) AS v(
    id, state, kind, outcome, result, version, attempt, updated_at, updated_ns, started_at, started_ns,
    completed_at, completed_ns, leases, lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns,
    committed, wake_at, wake_ns, due_at, due_ns,
    exec_id, exec_attempt, exec_owner, exec_status, exec_lease_expires_at, exec_lease_expires_ns,
    exec_heartbeat_at, exec_heartbeat_ns, exec_claimed_at, exec_claimed_ns, exec_started_at, exec_started_ns,
    exec_finished_at, exec_finished_ns, exec_error,
    old_version, result_changed
  )
  WHERE j.id = v.id AND j.version = v.old_version
  RETURNING 1
)
SELECT 1 / (count(*) = @rows)::int FROM u

-- name: insert_transitions
INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns)
SELECT * FROM unnest(
  @job_id::uuid[], @version::int8[], @from_state::text[], @event::text[], @to_state::text[],
  @actor::text[], @reason::text[], @exec_id::uuid[], @at::timestamptz[], @at_ns::int2[]
)

-- name: insert_effects
INSERT INTO {schema}.effects (job_id, name, exec_id, actor, at, at_ns)
SELECT * FROM unnest(
  @job_id::uuid[], @name::text[], @exec_id::uuid[], @actor::text[], @at::timestamptz[], @at_ns::int2[]
)

-- name: notify
SELECT pg_notify(@channel, @payload)

-- Prune: up to @lim terminal jobs completed before @cut, oldest first,
-- with their rows in the other tables (the schema has no foreign keys to
-- cascade). The jobs are chosen once, in a materialized CTE: a subquery
-- under IN may be run again by the plan, each run locking and returning
-- further rows past the limit.

-- name: prune
WITH s AS MATERIALIZED (
  SELECT id FROM {schema}.jobs
   WHERE kind = 'terminal' AND (completed_at, completed_ns) < (@cut_at, @cut_ns)
   ORDER BY completed_at, completed_ns, id
   LIMIT @lim
     FOR UPDATE SKIP LOCKED
),
d AS (DELETE FROM {schema}.jobs j USING s WHERE j.id = s.id RETURNING j.id),
t AS (DELETE FROM {schema}.transitions x USING d WHERE x.job_id = d.id),
f AS (DELETE FROM {schema}.effects x USING d WHERE x.job_id = d.id),
k AS (DELETE FROM {schema}.idempotency_keys x USING d WHERE x.job_id = d.id)
SELECT count(*) FROM d

-- A commit group's planned members (jobstate.CommitPlan, one per
-- member: @ords its place in the group, the job @ids, the lease's
-- execution @exec_ids and token @tokens, its owner @actors, the result
-- @results, the time @now_at, @now_ns, and @sets the set of moves its
-- plan covers, each move a row of @m_sets to @m_require_starts): each job
-- its plan covers whose execution is its last, finished as CommitPlan
-- writes it, with its history row. A job another transaction holds is
-- passed over (left to the member's function), never waited for.
--
-- Each member's job is locked by its id in a subquery of its own (a
-- subquery that locks rows is never merged into the query around it),
-- and the lease count is tested as an expression: a test of the bare
-- column would let the planner prove the predicate of the stale-lease
-- index (leases > 0) and walk that index for each member. The job's
-- machine and state are matched to the moves outside the subquery, so
-- that the listing index by machine and state is not walked either. The
-- rows come out in the members' order, as written, with the state each
-- left and the values the write replaced (old_*), from which
-- uncommit_planned puts a job back if its member's effect fails.

-- name: commit_planned
WITH d AS (
  SELECT * FROM unnest(@ords::int8[], @ids::uuid[], @exec_ids::uuid[], @tokens::int8[], @actors::text[],
                       @results::bytea[], @now_at::timestamptz[], @now_ns::int2[], @sets::int8[])
    AS d (ord, id, exec_id, token, actor, result, now_at, now_ns, set)
),
m AS (
  SELECT * FROM unnest(@m_sets::int8[], @m_machines::text[], @m_froms::text[], @m_tos::text[],
                       @m_outcomes::text[], @m_require_starts::bool[])
    AS m (set, machine, from_state, to_state, outcome, require_start)
),
c AS MATERIALIZED (
  SELECT d.*, m.from_state, m.to_state, m.outcome, j.exec_status AS old_exec_status, j.old_kind,
         j.old_outcome, j.old_updated_at, j.old_updated_ns, j.old_completed_at, j.old_completed_ns, j.old_result,
         j.old_last_error, j.old_error_class, j.old_lease_expires_at, j.old_lease_expires_ns,
         j.old_heartbeat_at, j.old_heartbeat_ns, j.old_sweep_failures, j.old_sweep_retry_at, j.old_sweep_retry_ns,
         j.old_wake_at, j.old_wake_ns, j.old_exec_started_at, j.old_exec_started_ns,
         j.old_exec_finished_at, j.old_exec_finished_ns
    FROM d
   CROSS JOIN LATERAL (
     SELECT j.machine, j.state, j.exec_status, j.kind AS old_kind,
            j.outcome AS old_outcome, j.updated_at AS old_updated_at, j.updated_ns AS old_updated_ns,
            j.completed_at AS old_completed_at, j.completed_ns AS old_completed_ns, j.result AS old_result,
            j.last_error AS old_last_error, j.error_class AS old_error_class,
            j.lease_expires_at AS old_lease_expires_at, j.lease_expires_ns AS old_lease_expires_ns,
            j.heartbeat_at AS old_heartbeat_at, j.heartbeat_ns AS old_heartbeat_ns,
            j.sweep_failures AS old_sweep_failures, j.sweep_retry_at AS old_sweep_retry_at,
            j.sweep_retry_ns AS old_sweep_retry_ns, j.wake_at AS old_wake_at, j.wake_ns AS old_wake_ns,
            j.exec_started_at AS old_exec_started_at, j.exec_started_ns AS old_exec_started_ns,
            j.exec_finished_at AS old_exec_finished_at, j.exec_finished_ns AS old_exec_finished_ns
       FROM {schema}.jobs j
      WHERE j.id = d.id AND j.committed IS NULL AND j.leases - 1 = 0
        AND j.exec_id = d.exec_id AND j.exec_attempt = d.token
        AND (j.exec_lease_expires_at, j.exec_lease_expires_ns) > (d.now_at, d.now_ns)
        FOR NO KEY UPDATE SKIP LOCKED
   ) j
    JOIN m ON m.set = d.set AND m.machine = j.machine AND m.from_state = j.state
   WHERE j.exec_status = 'IN_PROGRESS' OR (j.exec_status = 'LEASED' AND NOT m.require_start)
),
w AS (
  UPDATE {schema}.jobs j SET
    state = c.to_state, kind = 'terminal', outcome = c.outcome, version = j.version + 1,
    updated_at = c.now_at, updated_ns = c.now_ns, completed_at = c.now_at, completed_ns = c.now_ns,
    committed = c.exec_id, result = c.result, last_error = '', error_class = '',
    leases = 0, lease_expires_at = '-infinity', lease_expires_ns = 0, heartbeat_at = '-infinity', heartbeat_ns = 0,
    sweep_failures = 0, sweep_retry_at = '-infinity', sweep_retry_ns = 0, wake_at = NULL, wake_ns = 0,
    exec_status = 'DONE', exec_finished_at = c.now_at, exec_finished_ns = c.now_ns,
    exec_started_at = CASE WHEN isfinite(j.exec_started_at) THEN j.exec_started_at ELSE c.now_at END,
    exec_started_ns = CASE WHEN isfinite(j.exec_started_at) THEN j.exec_started_ns ELSE c.now_ns END
    FROM c
   WHERE j.id = c.id
  RETURNING {j.snapshot_columns}, c.ord, c.from_state, c.actor, c.old_exec_status, c.old_kind,
         c.old_outcome, c.old_updated_at, c.old_updated_ns, c.old_completed_at, c.old_completed_ns, c.old_result,
         c.old_last_error, c.old_error_class, c.old_lease_expires_at, c.old_lease_expires_ns,
         c.old_heartbeat_at, c.old_heartbeat_ns, c.old_sweep_failures, c.old_sweep_retry_at, c.old_sweep_retry_ns,
         c.old_wake_at, c.old_wake_ns, c.old_exec_started_at, c.old_exec_started_ns,
         c.old_exec_finished_at, c.old_exec_finished_ns
),
h AS (
  INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns)
  SELECT id, version, from_state, 'succeed', state, actor, '', exec_id, exec_finished_at, exec_finished_ns FROM w
)
SELECT * FROM w ORDER BY ord

-- A planned member's job put back as it was before commit_planned wrote
-- it at the version @written (its member's effect failed): the columns
-- that statement set get the values it replaced, the version is one
-- less, the job is in @from_state with one live execution and nothing
-- committed, and the history row it inserted is deleted.

-- name: uncommit_planned
WITH u AS (
  UPDATE {schema}.jobs SET
    state = @from_state, kind = @kind, outcome = @outcome, version = @written::int8 - 1,
    updated_at = @updated_at, updated_ns = @updated_ns, completed_at = @completed_at, completed_ns = @completed_ns,
    committed = NULL, result = @result, last_error = @last_error, error_class = @error_class, leases = 1,
    lease_expires_at = @lease_expires_at, lease_expires_ns = @lease_expires_ns,
    heartbeat_at = @heartbeat_at, heartbeat_ns = @heartbeat_ns, sweep_failures = @sweep_failures,
    sweep_retry_at = @sweep_retry_at, sweep_retry_ns = @sweep_retry_ns, wake_at = @wake_at, wake_ns = @wake_ns,
    exec_status = @exec_status, exec_started_at = @exec_started_at, exec_started_ns = @exec_started_ns,
    exec_finished_at = @exec_finished_at, exec_finished_ns = @exec_finished_ns
  WHERE id = @id AND version = @written
  RETURNING id
),
t AS (
  DELETE FROM {schema}.transitions WHERE job_id = @id AND version = @written
)
SELECT 1 / count(*) FROM u
