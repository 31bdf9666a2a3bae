-- The row split in two for the floor section
-- (-floor-variant "splitrow=$(cat variants/splitrow.sql)"): jobs keeps
-- what the claim, the heartbeat and the commit read or change, with every
-- instant at nanoseconds (two columns) as pgstore stores it, the last
-- execution in columns and the single commit's CHECK, and the indexes the
-- hot path and the listings by state and by update time need; the
-- payload, the policy, the keys, the owner, the deadline and the sweep's
-- counters go to a row written at creation (job_specs, not touched by the
-- floor's statements), with the listing indexes by creation, owner and
-- key.
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
    leases           bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    lease_expires_ns smallint    NOT NULL DEFAULT 0,
    heartbeat_at     timestamptz NOT NULL DEFAULT '-infinity',
    heartbeat_ns     smallint    NOT NULL DEFAULT 0,
    committed        uuid,
    wake_at          timestamptz,
    wake_ns          smallint    NOT NULL DEFAULT 0,
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
CREATE INDEX jobs_wake ON jobs (wake_at, wake_ns, id) WHERE wake_at IS NOT NULL;
CREATE INDEX jobs_stale ON jobs (heartbeat_at, heartbeat_ns, id) WHERE leases > 0;
CREATE INDEX jobs_done ON jobs (completed_at, completed_ns, id) WHERE kind = 'terminal';
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_at, created_ns);
CREATE INDEX jobs_updated ON jobs (updated_at, updated_ns);
CREATE INDEX jobs_key_live ON jobs (machine, concurrency_key) INCLUDE (leases)
    WHERE leases > 0 AND concurrency_key <> '';
CREATE INDEX jobs_key_ready ON jobs (machine, concurrency_key, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready' AND concurrency_key <> '';
CREATE TABLE job_specs (
    id              uuid        PRIMARY KEY,
    payload         bytea,
    created_at      timestamptz NOT NULL,
    created_ns      smallint    NOT NULL DEFAULT 0,
    retry_count     bigint      NOT NULL DEFAULT 0,
    max_retries     bigint      NOT NULL DEFAULT 0,
    backoff_kind    text        NOT NULL DEFAULT '',
    backoff_initial bigint      NOT NULL DEFAULT 0,
    backoff_factor  double precision NOT NULL DEFAULT 0,
    backoff_max     bigint      NOT NULL DEFAULT 0,
    backoff_jitter  text        NOT NULL DEFAULT '',
    own_backoff     boolean     NOT NULL DEFAULT false,
    last_error      text        NOT NULL DEFAULT '',
    error_class     text        NOT NULL DEFAULT '',
    idempotency_key text        NOT NULL DEFAULT '',
    fingerprint     text        NOT NULL DEFAULT '',
    owner           text        NOT NULL DEFAULT '',
    deadline        timestamptz NOT NULL DEFAULT '-infinity',
    deadline_ns     smallint    NOT NULL DEFAULT 0,
    cancel_requested boolean    NOT NULL DEFAULT false,
    sweep_failures  bigint      NOT NULL DEFAULT 0,
    sweep_retry_at  timestamptz NOT NULL DEFAULT '-infinity',
    sweep_retry_ns  smallint    NOT NULL DEFAULT 0
);
CREATE INDEX job_specs_created ON job_specs (created_at, created_ns);
CREATE INDEX job_specs_owner ON job_specs (owner, created_at, created_ns, id) WHERE owner <> '';
CREATE INDEX job_specs_key ON job_specs (idempotency_key, created_at, created_ns, id) WHERE idempotency_key <> '';
