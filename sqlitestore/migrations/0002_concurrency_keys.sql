-- Version 2: concurrency keys (Job.ConcurrencyKey, Policy.MaxPerKey).
--
-- A job's concurrency key is set at its creation and never changes; jobs
-- stored before this version have none (''). ADD COLUMN appends it after
-- due_ns.

ALTER TABLE jobs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';

-- The claim order, now with each ready job's not-before time and key: a
-- claim tests every entry it passes over (a job not due yet, or one whose
-- key is at its limit) from the index, without reading the job's row.
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (machine, priority DESC, due_s, due_ns, created_s, created_ns, id,
    not_before_s, not_before_ns, concurrency_key)
    WHERE kind = 2;

-- The live executions per key of a machine: only the keyed jobs holding
-- leases, so that the keys at their limit, and one key's sum, are read
-- from a handful of entries.
CREATE INDEX jobs_key_live ON jobs (machine, concurrency_key, leases)
    WHERE leases > 0 AND concurrency_key <> '';
