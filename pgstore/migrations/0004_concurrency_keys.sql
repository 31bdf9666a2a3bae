-- Version 4: concurrency keys (Policy.MaxPerKey).
--
-- jobs.concurrency_key is the job's Job.ConcurrencyKey, set when the job
-- is created and never changed; '' is "no key", as for owner and
-- idempotency_key: a NOT NULL column with a constant DEFAULT is added
-- without rewriting the table (existing rows read ''), compares without
-- NULL's three-valued logic, and is left out of a COPY of jobs without a
-- key. Updates never change it, so it costs no update its HOT chance.
--
-- jobs_key_live holds the jobs of a key that hold live executions: a
-- claim on a machine with MaxPerKey sums their leases per key (an
-- index-only scan of a few entries). jobs_key_ready holds each key's
-- ready jobs in claim order: such a claim takes a job with a key only if
-- it is among the first MaxPerKey of its key, so that each key's jobs
-- are claimed in claim order. Both are partial: a job without a key
-- never adds an entry to either, and a job with one only while it holds
-- leases, or is ready.
-- Runs with search_path set to the store's schema.

ALTER TABLE jobs ADD COLUMN concurrency_key text NOT NULL DEFAULT '';

CREATE INDEX jobs_key_live ON jobs (machine, concurrency_key) INCLUDE (leases)
    WHERE leases > 0 AND concurrency_key <> '';

CREATE INDEX jobs_key_ready ON jobs (machine, concurrency_key, priority DESC, due_at, due_ns, created_at, created_ns, id)
    WHERE kind = 'ready' AND concurrency_key <> '';
