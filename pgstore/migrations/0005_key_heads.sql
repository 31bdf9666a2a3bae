-- Version 5: each concurrency key's first ready job, kept in a table.
--
-- key_heads holds, for each (machine, concurrency_key, priority) that has
-- ready jobs with a key, one row naming the first of them in claim order
-- (priority DESC, due_at, due_ns, created_at, created_ns, id), with its
-- claim-order columns and its not-before; there is no row for a triple
-- without ready jobs. Within one priority the first ready job in claim
-- order is also the first due one (due_at is the later of not_before and
-- created_at), so a key's first due job is always among its heads.
-- Every transaction that makes a job with a key ready, stops it being
-- ready, or changes a ready keyed job's claim-order columns, recomputes
-- the rows of the triples it touched from jobs_key_ready, under the
-- key's advisory lock.
--
-- jobs_claim becomes partial on the jobs without a key. A claim merges
-- two walks in claim order: jobs_claim (jobs without a key) and
-- key_heads_claim (one entry per key and priority, joined to jobs by id),
-- so that a key at its limit costs a claim one key_heads entry, not its
-- backlog of ready jobs. Jobs with a key stay in jobs_key_ready.
--
-- The table of jobs is locked against writes (SHARE) for the migration's
-- transaction, so that key_heads is filled from a state no write changes
-- meanwhile; writers wait until it commits.
-- Runs with search_path set to the store's schema.

LOCK TABLE jobs IN SHARE MODE;

CREATE TABLE key_heads (
    machine          text        NOT NULL,
    concurrency_key  text        NOT NULL,
    priority         bigint      NOT NULL,
    job_id           uuid        NOT NULL,
    due_at           timestamptz NOT NULL,
    due_ns           smallint    NOT NULL,
    created_at       timestamptz NOT NULL,
    created_ns       smallint    NOT NULL,
    not_before       timestamptz NOT NULL,
    not_before_ns    smallint    NOT NULL,

    PRIMARY KEY (machine, concurrency_key, priority)
);

-- Claims: the heads of a machine's keys in claim order.
CREATE INDEX key_heads_claim ON key_heads (machine, priority DESC, due_at, due_ns, created_at, created_ns, job_id);

INSERT INTO key_heads (machine, concurrency_key, priority, job_id, due_at, due_ns, created_at, created_ns, not_before, not_before_ns)
SELECT DISTINCT ON (machine, concurrency_key, priority)
       machine, concurrency_key, priority, id, due_at, due_ns, created_at, created_ns, not_before, not_before_ns
  FROM jobs
 WHERE kind = 'ready' AND concurrency_key <> ''
 ORDER BY machine, concurrency_key, priority, due_at, due_ns, created_at, created_ns, id;

CREATE INDEX jobs_claim_free ON jobs (machine, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready' AND concurrency_key = '';
DROP INDEX jobs_claim;
ALTER INDEX jobs_claim_free RENAME TO jobs_claim;
