-- hotrow.sql without the CHECK over the executions: the single commit
-- is a unique index over the history's commit records instead (here the
-- records of the move to done). Run it with a name ending in -noexecs
-- (-floor-variant "typed-noexecs=$(cat variants/hotrow-typed.sql)"):
-- the current execution would be typed columns of the row, not JSON.
DROP TABLE jobs;
CREATE TABLE jobs (
    id               uuid        PRIMARY KEY,
    machine          text        NOT NULL,
    state            text        NOT NULL,
    kind             text        NOT NULL,
    outcome          text        NOT NULL DEFAULT '',
    result           bytea,
    version          bigint      NOT NULL,
    attempt          bigint      NOT NULL DEFAULT 0,
    retry_count      bigint      NOT NULL DEFAULT 0,
    last_error       text        NOT NULL DEFAULT '',
    priority         bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    created_ns       smallint    NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT '-infinity',
    completed_at     timestamptz NOT NULL DEFAULT '-infinity',
    not_before       timestamptz NOT NULL DEFAULT '-infinity',
    not_before_ns    smallint    NOT NULL DEFAULT 0,
    leases           bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    heartbeat_at     timestamptz NOT NULL DEFAULT '-infinity',
    committed        uuid,
    wake_at          timestamptz,
    due_at           timestamptz NOT NULL,
    due_ns           smallint    NOT NULL DEFAULT 0,
    concurrency_key  text        NOT NULL DEFAULT '',
    execs            jsonb       NOT NULL DEFAULT '[]'
);
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready' AND concurrency_key = '';
CREATE INDEX jobs_wake ON jobs (wake_at, id) WHERE wake_at IS NOT NULL;
CREATE INDEX jobs_stale ON jobs (heartbeat_at, id) WHERE leases > 0;
CREATE INDEX jobs_done ON jobs (completed_at, id) WHERE kind = 'terminal';
CREATE UNIQUE INDEX transitions_one_commit ON transitions (job_id) WHERE to_state = 'done';
