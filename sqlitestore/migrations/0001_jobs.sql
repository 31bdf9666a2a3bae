-- Version 1: jobs, executions, history, effects and idempotency keys.
--
-- Every instant is two integer columns: x_s, the Unix seconds (negative
-- before 1970), and x_ns, the nanoseconds within that second (0 to
-- 999999999), so that Go's nanosecond times round-trip and order exactly
-- from year 1 to year 9999, which a single 64-bit count of nanoseconds
-- cannot hold. The zero time ("none") is year 1 (-62135596800, 0) and
-- orders first, as in Go, except for wake, where "never" is NULL and keeps
-- the job out of the wake index. Ids are 16-byte blobs, which order as
-- uuid.UUID's bytes do.

CREATE TABLE jobs (
    id               BLOB    NOT NULL PRIMARY KEY CHECK (length(id) = 16 AND id <> zeroblob(16)),
    machine          TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    kind             INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 5),
    outcome          TEXT    NOT NULL DEFAULT '',
    payload          BLOB,
    result           BLOB,
    version          INTEGER NOT NULL CHECK (version >= 1),
    attempt          INTEGER NOT NULL DEFAULT 0,
    retry_count      INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 0,
    backoff_kind     TEXT    NOT NULL DEFAULT '',
    backoff_initial  INTEGER NOT NULL DEFAULT 0,    -- nanoseconds
    backoff_factor   REAL    NOT NULL DEFAULT 0,
    backoff_max      INTEGER NOT NULL DEFAULT 0,    -- nanoseconds
    backoff_jitter   TEXT    NOT NULL DEFAULT '',
    own_backoff      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    error_class      TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT    NOT NULL DEFAULT '',
    fingerprint      TEXT    NOT NULL DEFAULT '',
    owner            TEXT    NOT NULL DEFAULT '',
    priority         INTEGER NOT NULL DEFAULT 0,
    created_s        INTEGER NOT NULL,
    created_ns       INTEGER NOT NULL,
    updated_s        INTEGER NOT NULL,
    updated_ns       INTEGER NOT NULL,
    started_s        INTEGER NOT NULL,
    started_ns       INTEGER NOT NULL,
    completed_s      INTEGER NOT NULL,
    completed_ns     INTEGER NOT NULL,
    not_before_s     INTEGER NOT NULL,
    not_before_ns    INTEGER NOT NULL,
    deadline_s       INTEGER NOT NULL,
    deadline_ns      INTEGER NOT NULL,
    leases           INTEGER NOT NULL DEFAULT 0,
    lease_expires_s  INTEGER NOT NULL,
    lease_expires_ns INTEGER NOT NULL,
    heartbeat_s      INTEGER NOT NULL,
    heartbeat_ns     INTEGER NOT NULL,
    committed        BLOB,                          -- NULL: no execution committed
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    wake_s           INTEGER,                       -- NULL: the sweep has nothing to do
    wake_ns          INTEGER NOT NULL,
    sweep_failures   INTEGER NOT NULL DEFAULT 0,
    sweep_retry_s    INTEGER NOT NULL,
    sweep_retry_ns   INTEGER NOT NULL,
    -- The claim order's due time, Job.DueAt (the later of not_before and
    -- created), kept by the store for the claim index.
    due_s            INTEGER NOT NULL,
    due_ns           INTEGER NOT NULL
);

-- ClaimNext and ClaimBatch: the ready jobs of a machine in claim order.
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_s, due_ns, created_s, created_ns, id)
    WHERE kind = 2;

-- ClaimNext and ClaimBatch, before the claim: whether a machine has a
-- ready job due, looked up on a reader, so that a claim with nothing to
-- take never waits for the writer.
CREATE INDEX jobs_ready_at ON jobs (machine, not_before_s, not_before_ns) WHERE kind = 2;

-- Due: the jobs the sweep has work with, earliest wake first.
CREATE INDEX jobs_wake ON jobs (wake_s, wake_ns, id) WHERE wake_s IS NOT NULL;

-- Stale: the jobs holding live leases, oldest heartbeat first.
CREATE INDEX jobs_stale ON jobs (heartbeat_s, heartbeat_ns, id) WHERE leases > 0;

-- Prune: finished jobs, oldest completion first.
CREATE INDEX jobs_done ON jobs (completed_s, completed_ns, id) WHERE kind = 5;

-- Count and List: by machine and state, in creation order.
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_s, created_ns, id);

-- List: by owner, by key (only jobs that have one), by creation, by update.
CREATE INDEX jobs_owner ON jobs (owner, created_s, created_ns, id) WHERE owner <> '';
CREATE INDEX jobs_key ON jobs (idempotency_key, created_s, created_ns, id) WHERE idempotency_key <> '';
CREATE INDEX jobs_created ON jobs (created_s, created_ns, id);
CREATE INDEX jobs_updated ON jobs (updated_s, updated_ns, id);


-- Executions in claim order: the rowid is the insertion order, kept when
-- an execution is replaced (an upsert updates the row in place).
CREATE TABLE executions (
    job_id           BLOB    NOT NULL,
    id               BLOB    NOT NULL CHECK (length(id) = 16 AND id <> zeroblob(16)),
    attempt          INTEGER NOT NULL,
    owner            TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL CHECK (status IN ('LEASED', 'IN_PROGRESS', 'COMMITTED', 'DONE', 'ABORTED')),
    lease_expires_s  INTEGER NOT NULL,
    lease_expires_ns INTEGER NOT NULL,
    heartbeat_s      INTEGER NOT NULL,
    heartbeat_ns     INTEGER NOT NULL,
    claimed_s        INTEGER NOT NULL,
    claimed_ns       INTEGER NOT NULL,
    started_s        INTEGER NOT NULL,
    started_ns       INTEGER NOT NULL,
    finished_s       INTEGER NOT NULL,
    finished_ns      INTEGER NOT NULL,
    error            TEXT    NOT NULL DEFAULT '',
    UNIQUE (job_id, id)
);

-- The commit boundary: at most one execution per job is ever COMMITTED or DONE.
CREATE UNIQUE INDEX executions_one_commit ON executions (job_id)
    WHERE status IN ('COMMITTED', 'DONE');


CREATE TABLE transitions (
    job_id      BLOB    NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    from_state  TEXT    NOT NULL DEFAULT '',   -- '' for the creation record
    event       TEXT    NOT NULL DEFAULT '',
    to_state    TEXT    NOT NULL,
    actor       TEXT    NOT NULL DEFAULT '',
    reason      TEXT    NOT NULL DEFAULT '',
    exec_id     BLOB,                          -- NULL: not made through an execution
    at_s        INTEGER NOT NULL,
    at_ns       INTEGER NOT NULL,
    PRIMARY KEY (job_id, version)              -- append-only, one record per version
) WITHOUT ROWID;


-- Effects in record order (the rowid).
CREATE TABLE effects (
    job_id      BLOB    NOT NULL,
    name        TEXT    NOT NULL,
    exec_id     BLOB,
    actor       TEXT    NOT NULL DEFAULT '',
    at_s        INTEGER NOT NULL,
    at_ns       INTEGER NOT NULL,
    UNIQUE (job_id, name)                      -- a named effect runs once per job
);


CREATE TABLE idempotency_keys (
    machine TEXT NOT NULL,
    key     TEXT NOT NULL CHECK (key <> ''),
    job_id  BLOB NOT NULL,
    PRIMARY KEY (machine, key)                 -- one holder per key
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_job ON idempotency_keys (job_id);
