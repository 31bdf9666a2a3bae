-- Version 1: jobs, executions, history, effects and idempotency keys.
--
-- Every instant is two columns: x (timestamptz, the instant floored to the
-- microsecond) and x_ns (the nanoseconds below the microsecond, 0-999), so
-- that Go's nanosecond times round-trip and order exactly from year 1 to
-- year 9999. The zero time ("none") is '-infinity' with x_ns 0, except for
-- wake_at, where "never" is NULL and keeps the job out of the wake index.
-- Runs with search_path set to the store's schema.

CREATE TABLE jobs (
    id               uuid        PRIMARY KEY,
    machine          text        NOT NULL,
    state            text        NOT NULL,
    kind             text        NOT NULL,
    outcome          text        NOT NULL DEFAULT '',
    payload          bytea,
    result           bytea,
    version          bigint      NOT NULL,
    attempt          bigint      NOT NULL DEFAULT 0,
    retry_count      bigint      NOT NULL DEFAULT 0,
    max_retries      bigint      NOT NULL DEFAULT 0,
    backoff_kind     text        NOT NULL DEFAULT '',
    backoff_initial  bigint      NOT NULL DEFAULT 0,    -- nanoseconds
    backoff_factor   float8      NOT NULL DEFAULT 0,
    backoff_max      bigint      NOT NULL DEFAULT 0,    -- nanoseconds
    backoff_jitter   text        NOT NULL DEFAULT '',
    own_backoff      boolean     NOT NULL DEFAULT false,
    last_error       text        NOT NULL DEFAULT '',
    error_class      text        NOT NULL DEFAULT '',
    idempotency_key  text        NOT NULL DEFAULT '',
    fingerprint      text        NOT NULL DEFAULT '',
    owner            text        NOT NULL DEFAULT '',
    priority         bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    created_ns       smallint    NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL,
    updated_ns       smallint    NOT NULL DEFAULT 0,
    started_at       timestamptz NOT NULL DEFAULT '-infinity',
    started_ns       smallint    NOT NULL DEFAULT 0,
    completed_at     timestamptz NOT NULL DEFAULT '-infinity',
    completed_ns     smallint    NOT NULL DEFAULT 0,
    not_before       timestamptz NOT NULL DEFAULT '-infinity',
    not_before_ns    smallint    NOT NULL DEFAULT 0,
    deadline         timestamptz NOT NULL DEFAULT '-infinity',
    deadline_ns      smallint    NOT NULL DEFAULT 0,
    leases           bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    lease_expires_ns smallint    NOT NULL DEFAULT 0,
    heartbeat_at     timestamptz NOT NULL DEFAULT '-infinity',
    heartbeat_ns     smallint    NOT NULL DEFAULT 0,
    committed        uuid,                               -- NULL: no execution committed
    cancel_requested boolean     NOT NULL DEFAULT false,
    wake_at          timestamptz,                        -- NULL: the sweep has nothing to do
    wake_ns          smallint    NOT NULL DEFAULT 0,
    sweep_failures   bigint      NOT NULL DEFAULT 0,
    sweep_retry_at   timestamptz NOT NULL DEFAULT '-infinity',
    sweep_retry_ns   smallint    NOT NULL DEFAULT 0,
    -- The claim order's due time, Job.DueAt (the later of not_before and
    -- created_at), kept by the store for the claim index.
    due_at           timestamptz NOT NULL,
    due_ns           smallint    NOT NULL DEFAULT 0,

    CONSTRAINT jobs_id_set   CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    CONSTRAINT jobs_version  CHECK (version >= 1),
    CONSTRAINT jobs_kind     CHECK (kind IN ('initial', 'ready', 'active', 'waiting', 'terminal')),
    CONSTRAINT jobs_ns       CHECK (created_ns BETWEEN 0 AND 999 AND updated_ns BETWEEN 0 AND 999
                                    AND started_ns BETWEEN 0 AND 999 AND completed_ns BETWEEN 0 AND 999
                                    AND not_before_ns BETWEEN 0 AND 999 AND deadline_ns BETWEEN 0 AND 999
                                    AND lease_expires_ns BETWEEN 0 AND 999 AND heartbeat_ns BETWEEN 0 AND 999
                                    AND wake_ns BETWEEN 0 AND 999 AND sweep_retry_ns BETWEEN 0 AND 999
                                    AND due_ns BETWEEN 0 AND 999)
) WITH (fillfactor = 80);

-- ClaimNext and ClaimBatch: the ready jobs of a machine in claim order.
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready';

-- Due: the jobs the sweep has work with, earliest wake first.
CREATE INDEX jobs_wake ON jobs (wake_at, wake_ns, id)
    WHERE wake_at IS NOT NULL;

-- Stale: the jobs holding live leases, oldest heartbeat first.
CREATE INDEX jobs_stale ON jobs (heartbeat_at, heartbeat_ns, id)
    WHERE leases > 0;

-- Prune: finished jobs, oldest completion first.
CREATE INDEX jobs_done ON jobs (completed_at, completed_ns, id)
    WHERE kind = 'terminal';

-- Count and List: by machine and state, in creation order.
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_at, created_ns, id);

-- List: by owner, by key, by creation and by update.
-- (Not partial: queries compare with parameters, which a generic plan cannot
-- match against an index predicate.)
CREATE INDEX jobs_owner ON jobs (owner, created_at, created_ns, id);
CREATE INDEX jobs_key ON jobs (idempotency_key, created_at, created_ns, id);
CREATE INDEX jobs_created ON jobs (created_at, created_ns, id);
CREATE INDEX jobs_updated ON jobs (updated_at, updated_ns, id);


CREATE TABLE executions (
    job_id           uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    id               uuid        NOT NULL,
    seq              bigint      GENERATED ALWAYS AS IDENTITY,  -- insertion order; kept on replace
    attempt          bigint      NOT NULL,                      -- the fencing token
    owner            text        NOT NULL DEFAULT '',
    status           text        NOT NULL,
    lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    lease_expires_ns smallint    NOT NULL DEFAULT 0,
    heartbeat_at     timestamptz NOT NULL DEFAULT '-infinity',
    heartbeat_ns     smallint    NOT NULL DEFAULT 0,
    claimed_at       timestamptz NOT NULL DEFAULT '-infinity',
    claimed_ns       smallint    NOT NULL DEFAULT 0,
    started_at       timestamptz NOT NULL DEFAULT '-infinity',
    started_ns       smallint    NOT NULL DEFAULT 0,
    finished_at      timestamptz NOT NULL DEFAULT '-infinity',
    finished_ns      smallint    NOT NULL DEFAULT 0,
    error            text        NOT NULL DEFAULT '',

    PRIMARY KEY (job_id, id),
    CONSTRAINT executions_id_set CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    CONSTRAINT executions_status CHECK (status IN ('LEASED', 'IN_PROGRESS', 'COMMITTED', 'DONE', 'ABORTED'))
);

-- The commit boundary: at most one execution per job is ever COMMITTED or DONE.
CREATE UNIQUE INDEX executions_one_commit ON executions (job_id)
    WHERE status IN ('COMMITTED', 'DONE');


CREATE TABLE transitions (
    job_id      uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    version     bigint      NOT NULL,
    from_state  text        NOT NULL DEFAULT '',   -- '' for the creation record
    event       text        NOT NULL DEFAULT '',
    to_state    text        NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    reason      text        NOT NULL DEFAULT '',
    exec_id     uuid,                              -- NULL: not made through an execution
    at          timestamptz NOT NULL DEFAULT '-infinity',
    at_ns       smallint    NOT NULL DEFAULT 0,

    PRIMARY KEY (job_id, version),                 -- append-only, one record per version
    CONSTRAINT transitions_version CHECK (version >= 1)
);


CREATE TABLE effects (
    job_id      uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    seq         bigint      GENERATED ALWAYS AS IDENTITY,  -- record order
    exec_id     uuid,
    actor       text        NOT NULL DEFAULT '',
    at          timestamptz NOT NULL DEFAULT '-infinity',
    at_ns       smallint    NOT NULL DEFAULT 0,

    PRIMARY KEY (job_id, name)                             -- a named effect runs once per job
);


CREATE TABLE idempotency_keys (
    machine text NOT NULL,
    key     text NOT NULL,
    job_id  uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,

    PRIMARY KEY (machine, key),                            -- one holder per key
    CONSTRAINT idempotency_keys_key_set CHECK (key <> '')
);

CREATE INDEX idempotency_keys_job ON idempotency_keys (job_id);
