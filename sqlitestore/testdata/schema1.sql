-- A database of schema version 1 (the sqlite3 shell's .dump), written by
-- the store of that version: machine "queue", three jobs created one second
-- apart from 2026-01-01T00:00:00Z, one done, one running (its lease expires
-- at 00:00:36), one queued.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE jobstate_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
INSERT INTO jobstate_migrations VALUES(1,'jobs','2026-11-26T19:16:18.360Z');
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
INSERT INTO jobs VALUES(X'01a21949854872a49434f71adea3d15e','queue','DONE',5,'succeeded',X'7b226e223a307d',X'226f6b22',3,1,0,3,'',0,0.0,0,'',0,'','','done','f3013f933b9fb80ab6d995e7ad9da36f683837ba1d81e950c943d40111eac2f0','owner-done',0,1767225601,0,1767225605,0,1767225604,0,1767225605,0,-62135596800,0,-62135596800,0,0,-62135596800,0,-62135596800,0,X'01a2194985567e36898f9e11fe299e0d',0,NULL,0,0,-62135596800,0,1767225601,0);
INSERT INTO jobs VALUES(X'01a21949854d70529fe6641efaeea4df','queue','RUNNING',3,'',X'7b226e223a317d',NULL,2,1,0,3,'',0,0.0,0,'',0,'','','running','2bfd14f43d17fc7cea24e0917a8879b4b2f880b8baeec1b9d90fbaad655e71bd','owner-running',1,1767225602,0,1767225606,0,1767225606,0,-62135596800,0,-62135596800,0,-62135596800,0,1,1767225636,0,1767225606,0,NULL,0,1767225636,0,0,-62135596800,0,1767225602,0);
INSERT INTO jobs VALUES(X'01a21949854f752eb0150fcd15e9f042','queue','QUEUED',2,'',X'7b226e223a327d',NULL,1,0,0,3,'',0,0.0,0,'',0,'','','queued','363379742f80b51bdb9206579af7754911543079b9399cb3fc315fb199f476e8','owner-queued',2,1767225603,0,1767225603,0,-62135596800,0,-62135596800,0,-62135596800,0,-62135596800,0,0,-62135596800,0,-62135596800,0,NULL,0,NULL,0,0,-62135596800,0,1767225603,0);
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
INSERT INTO executions VALUES(X'01a21949854872a49434f71adea3d15e',X'01a2194985567e36898f9e11fe299e0d',1,'w1','DONE',1767225634,0,1767225604,0,1767225604,0,1767225605,0,1767225605,0,'');
INSERT INTO executions VALUES(X'01a21949854d70529fe6641efaeea4df',X'01a21949855e77f4a409c4232ddab8ec',1,'w2','LEASED',1767225636,0,1767225606,0,1767225606,0,-62135596800,0,-62135596800,0,'');
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
INSERT INTO transitions VALUES(X'01a21949854872a49434f71adea3d15e',1,'','create','QUEUED','','',NULL,1767225601,0);
INSERT INTO transitions VALUES(X'01a21949854872a49434f71adea3d15e',2,'QUEUED','claim','RUNNING','w1','',X'01a2194985567e36898f9e11fe299e0d',1767225604,0);
INSERT INTO transitions VALUES(X'01a21949854872a49434f71adea3d15e',3,'RUNNING','succeed','DONE','w1','',X'01a2194985567e36898f9e11fe299e0d',1767225605,0);
INSERT INTO transitions VALUES(X'01a21949854d70529fe6641efaeea4df',1,'','create','QUEUED','','',NULL,1767225602,0);
INSERT INTO transitions VALUES(X'01a21949854d70529fe6641efaeea4df',2,'QUEUED','claim','RUNNING','w2','',X'01a21949855e77f4a409c4232ddab8ec',1767225606,0);
INSERT INTO transitions VALUES(X'01a21949854f752eb0150fcd15e9f042',1,'','create','QUEUED','','',NULL,1767225603,0);
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
INSERT INTO idempotency_keys VALUES('queue','done',X'01a21949854872a49434f71adea3d15e');
INSERT INTO idempotency_keys VALUES('queue','running',X'01a21949854d70529fe6641efaeea4df');
INSERT INTO idempotency_keys VALUES('queue','queued',X'01a21949854f752eb0150fcd15e9f042');
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_s, due_ns, created_s, created_ns, id)
    WHERE kind = 2;
CREATE INDEX jobs_ready_at ON jobs (machine, not_before_s, not_before_ns) WHERE kind = 2;
CREATE INDEX jobs_wake ON jobs (wake_s, wake_ns, id) WHERE wake_s IS NOT NULL;
CREATE INDEX jobs_stale ON jobs (heartbeat_s, heartbeat_ns, id) WHERE leases > 0;
CREATE INDEX jobs_done ON jobs (completed_s, completed_ns, id) WHERE kind = 5;
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_s, created_ns, id);
CREATE INDEX jobs_owner ON jobs (owner, created_s, created_ns, id) WHERE owner <> '';
CREATE INDEX jobs_key ON jobs (idempotency_key, created_s, created_ns, id) WHERE idempotency_key <> '';
CREATE INDEX jobs_created ON jobs (created_s, created_ns, id);
CREATE INDEX jobs_updated ON jobs (updated_s, updated_ns, id);
CREATE UNIQUE INDEX executions_one_commit ON executions (job_id)
    WHERE status IN ('COMMITTED', 'DONE');
CREATE INDEX idempotency_keys_job ON idempotency_keys (job_id);
COMMIT;
