-- Version 6: a job's executions are kept in its row.
--
-- jobs.execs holds the job's executions as a JSON array, in the order
-- the table of executions listed them (by attempt, then insertion), each
-- an object: "id", "attempt" and "status" always; "owner" and "error"
-- when not empty; "lease_expires_at", "heartbeat_at", "claimed_at",
-- "started_at" and "finished_at" when set, as RFC 3339 UTC times with
-- nine fractional digits, so that nanoseconds round-trip. A claim and a
-- commit rewrite the job's row anyway: its executions now go with it,
-- and the insert of an execution's row, its update, and the reads of a
-- claimed job's executions are no longer statements of their own.
--
-- The commit boundary stays the database's: jobs_one_commit refuses a
-- row holding more than one execution COMMITTED or DONE, as the unique
-- index executions_one_commit refused a second such row of a job. Every
-- write of a job rewrites its whole list, read under the row's lock at
-- the version the write is guarded by, so a second commit can only be
-- written beside the first.
--
-- The table of jobs is locked against writes (SHARE) for the migration's
-- transaction, so that no execution is written meanwhile.
-- Runs with search_path set to the store's schema.

LOCK TABLE jobs IN SHARE MODE;

ALTER TABLE jobs ADD COLUMN execs jsonb NOT NULL DEFAULT '[]';

-- An instant of the executions table as the new list writes it (NULL for
-- the zero time, which the list leaves out).
CREATE OR REPLACE FUNCTION pg_temp.v6_time(at timestamptz, ns smallint) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE WHEN isfinite(at) THEN to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || lpad(ns::text, 3, '0') || 'Z' END $$;

UPDATE jobs j SET execs = x.list
  FROM (SELECT job_id, jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'id', id,
               'attempt', attempt,
               'owner', nullif(owner, ''),
               'status', status,
               'lease_expires_at', pg_temp.v6_time(lease_expires_at, lease_expires_ns),
               'heartbeat_at', pg_temp.v6_time(heartbeat_at, heartbeat_ns),
               'claimed_at', pg_temp.v6_time(claimed_at, claimed_ns),
               'started_at', pg_temp.v6_time(started_at, started_ns),
               'finished_at', pg_temp.v6_time(finished_at, finished_ns),
               'error', nullif(error, '')))
               ORDER BY attempt, seq) AS list
          FROM executions
         GROUP BY job_id) x
 WHERE j.id = x.job_id;

DROP FUNCTION pg_temp.v6_time(timestamptz, smallint);
DROP TABLE executions;

ALTER TABLE jobs ADD CONSTRAINT jobs_execs CHECK (jsonb_typeof(execs) = 'array');
ALTER TABLE jobs ADD CONSTRAINT jobs_one_commit CHECK (
    jsonb_array_length(jsonb_path_query_array(execs, '$[*] ? (@.status == "COMMITTED" || @.status == "DONE")')) <= 1);
