-- Version 7: a job's last execution in columns of its own.
--
-- A claim, a heartbeat and a commit change only the last execution of a
-- job (by attempt, in the Store contract's order). It is now kept in
-- typed columns of the job's row (exec_id to exec_error: NULL and the
-- columns' defaults for a job never claimed), which those writes set
-- like any other column, and the executions before it stay a JSON array,
-- renamed earlier_execs, in the format version 6 wrote: a job claimed
-- once keeps an empty array there, which its writes no longer send or
-- parse.
--
-- The commit boundary stays the database's: jobs_one_commit now refuses a
-- row whose last execution and earlier ones hold more than one execution
-- COMMITTED or DONE between them.
--
-- The table of jobs is locked against writes (SHARE) for the migration's
-- transaction, so that no execution is written meanwhile.
-- Runs with search_path set to the store's schema.

LOCK TABLE jobs IN SHARE MODE;

ALTER TABLE jobs RENAME COLUMN execs TO earlier_execs;
ALTER TABLE jobs
    ADD COLUMN exec_id               uuid,
    ADD COLUMN exec_attempt          bigint      NOT NULL DEFAULT 0,
    ADD COLUMN exec_owner            text        NOT NULL DEFAULT '',
    ADD COLUMN exec_status           text        NOT NULL DEFAULT '',
    ADD COLUMN exec_lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN exec_lease_expires_ns smallint    NOT NULL DEFAULT 0,
    ADD COLUMN exec_heartbeat_at     timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN exec_heartbeat_ns     smallint    NOT NULL DEFAULT 0,
    ADD COLUMN exec_claimed_at       timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN exec_claimed_ns       smallint    NOT NULL DEFAULT 0,
    ADD COLUMN exec_started_at       timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN exec_started_ns       smallint    NOT NULL DEFAULT 0,
    ADD COLUMN exec_finished_at      timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN exec_finished_ns      smallint    NOT NULL DEFAULT 0,
    ADD COLUMN exec_error            text        NOT NULL DEFAULT '';

-- An instant of the JSON list (RFC 3339 in UTC, up to nine fractional
-- digits; absent for the zero time) as the two columns store it: the
-- microseconds (digits past the sixth cut off, not rounded) and the
-- nanoseconds below them.
CREATE FUNCTION pg_temp.v7_at(s text) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE WHEN s IS NULL THEN '-infinity'::timestamptz
                      ELSE regexp_replace(s, '(\.[0-9]{6})[0-9]+', '\1')::timestamptz END $$;
CREATE FUNCTION pg_temp.v7_ns(s text) RETURNS smallint
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT coalesce(rpad(substring(s from '\.[0-9]{6}([0-9]{1,3})'), 3, '0')::smallint, 0::smallint) $$;

UPDATE jobs SET
    exec_id               = (x ->> 'id')::uuid,
    exec_attempt          = (x ->> 'attempt')::bigint,
    exec_owner            = coalesce(x ->> 'owner', ''),
    exec_status           = x ->> 'status',
    exec_lease_expires_at = pg_temp.v7_at(x ->> 'lease_expires_at'),
    exec_lease_expires_ns = pg_temp.v7_ns(x ->> 'lease_expires_at'),
    exec_heartbeat_at     = pg_temp.v7_at(x ->> 'heartbeat_at'),
    exec_heartbeat_ns     = pg_temp.v7_ns(x ->> 'heartbeat_at'),
    exec_claimed_at       = pg_temp.v7_at(x ->> 'claimed_at'),
    exec_claimed_ns       = pg_temp.v7_ns(x ->> 'claimed_at'),
    exec_started_at       = pg_temp.v7_at(x ->> 'started_at'),
    exec_started_ns       = pg_temp.v7_ns(x ->> 'started_at'),
    exec_finished_at      = pg_temp.v7_at(x ->> 'finished_at'),
    exec_finished_ns      = pg_temp.v7_ns(x ->> 'finished_at'),
    exec_error            = coalesce(x ->> 'error', ''),
    earlier_execs         = earlier_execs - (-1)
  FROM (SELECT id AS job_id, earlier_execs -> -1 AS x FROM jobs WHERE jsonb_array_length(earlier_execs) > 0) last
 WHERE jobs.id = last.job_id;

DROP FUNCTION pg_temp.v7_at(text);
DROP FUNCTION pg_temp.v7_ns(text);

ALTER TABLE jobs DROP CONSTRAINT jobs_one_commit;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_commit CHECK (
    (exec_status IN ('COMMITTED', 'DONE'))::int
    + jsonb_array_length(jsonb_path_query_array(earlier_execs, '$[*] ? (@.status == "COMMITTED" || @.status == "DONE")')) <= 1);
ALTER TABLE jobs ADD CONSTRAINT jobs_exec_ns CHECK (
    exec_lease_expires_ns BETWEEN 0 AND 999 AND exec_heartbeat_ns BETWEEN 0 AND 999
    AND exec_claimed_ns BETWEEN 0 AND 999 AND exec_started_ns BETWEEN 0 AND 999
    AND exec_finished_ns BETWEEN 0 AND 999);
