-- The statements that read jobs without locking them.
--
-- Each statement begins with a "-- name:" line. {schema} is the store's
-- schema, quoted; {job_columns} is the list of a job's columns in the
-- order the store scans them (jobColumns in codec.go), {exec_columns}
-- that of its executions' (execColumns). @name is a
-- parameter: the store sends the parameters in the order it declares for
-- the statement (statements.go), whatever the order they appear in.

-- name: get
SELECT {job_columns} FROM {schema}.jobs WHERE id = @id

-- name: exists
SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE id = @id)

-- name: executions
SELECT {exec_columns} FROM {schema}.jobs WHERE id = @id

-- name: history
SELECT job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns
  FROM {schema}.transitions
 WHERE job_id = @job_id
 ORDER BY version

-- name: effects
SELECT name, exec_id, actor, at, at_ns
  FROM {schema}.effects
 WHERE job_id = @job_id
 ORDER BY seq

-- name: count
SELECT state, count(*) FROM {schema}.jobs WHERE machine = @machine GROUP BY state

-- Stale: the jobs holding leases whose last heartbeat is before @cut, of
-- any machine or of one.

-- name: stale
SELECT {job_columns}
  FROM {schema}.jobs
 WHERE leases > 0 AND (heartbeat_at, heartbeat_ns) < (@cut_at, @cut_ns)
 ORDER BY heartbeat_at, heartbeat_ns, id
 LIMIT @lim

-- name: stale_machine
SELECT {job_columns}
  FROM {schema}.jobs
 WHERE leases > 0 AND (heartbeat_at, heartbeat_ns) < (@cut_at, @cut_ns) AND machine = @machine
 ORDER BY heartbeat_at, heartbeat_ns, id
 LIMIT @lim

-- Due: the jobs whose wake-up time has come by @now, after the cursor
-- (@after_at, @after_ns, @after_id), in wake-up order, of any machine or
-- of those named.

-- name: due
SELECT id, wake_at, wake_ns
  FROM {schema}.jobs
 WHERE wake_at IS NOT NULL AND (wake_at, wake_ns) <= (@now_at, @now_ns)
   AND (wake_at, wake_ns, id) > (@after_at, @after_ns, @after_id)
 ORDER BY wake_at, wake_ns, id
 LIMIT @lim

-- name: due_machines
SELECT id, wake_at, wake_ns
  FROM {schema}.jobs
 WHERE wake_at IS NOT NULL AND (wake_at, wake_ns) <= (@now_at, @now_ns)
   AND (wake_at, wake_ns, id) > (@after_at, @after_ns, @after_id)
   AND machine = ANY (@machines)
 ORDER BY wake_at, wake_ns, id
 LIMIT @lim

-- The head of a listing: List adds its filters, order and limit
-- (list.go), which depend on the query.

-- name: list
SELECT {job_columns} FROM {schema}.jobs
