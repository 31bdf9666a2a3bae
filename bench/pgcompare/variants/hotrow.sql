-- A hot row for the floor section (-floor-variant "hotrow=$(cat variants/hotrow.sql)"):
-- jobs with only the columns the claim, the heartbeat, the commit and a
-- retry read or change (instants at microseconds, but for the claim
-- order's), the claim, wake, stale-lease and finished indexes, and the
-- single commit checked over the last execution and those before it. The
-- payload, the keys, the owner, the policy and the listing indexes would
-- be on a row written at creation, which the hot path never touches.
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
    exec_id          uuid,
    exec_attempt     bigint      NOT NULL DEFAULT 0,
    exec_owner       text        NOT NULL DEFAULT '',
    exec_status      text        NOT NULL DEFAULT '',
    exec_lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    exec_heartbeat_at timestamptz NOT NULL DEFAULT '-infinity',
    exec_claimed_at  timestamptz NOT NULL DEFAULT '-infinity',
    exec_finished_at timestamptz NOT NULL DEFAULT '-infinity',
    earlier_execs    jsonb       NOT NULL DEFAULT '[]',
    CONSTRAINT jobs_one_commit CHECK (
        (exec_status IN ('COMMITTED', 'DONE'))::int
        + jsonb_array_length(jsonb_path_query_array(earlier_execs, '$[*] ? (@.status == "COMMITTED" || @.status == "DONE")')) <= 1)
);
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready' AND concurrency_key = '';
CREATE INDEX jobs_wake ON jobs (wake_at, id) WHERE wake_at IS NOT NULL;
CREATE INDEX jobs_stale ON jobs (heartbeat_at, id) WHERE leases > 0;
CREATE INDEX jobs_done ON jobs (completed_at, id) WHERE kind = 'terminal';
