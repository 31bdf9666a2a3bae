-- Version 3: lookups by id have one index to walk.
--
-- The listing indexes on every job (by machine and state, by creation, by
-- update) ended in the job's id, the keyset's tie-breaker, and a btree can
-- answer "id = $1" by walking a whole index on a later column. Planned
-- from the statistics of a table analyzed while empty, every index looks
-- equally cheap for such a lookup, and the plan a connection keeps for
-- the store's prepared statements (the lock of a job, a group's locks,
-- the job's update) could walk one of them, reading the whole index for
-- each lookup once the table has filled. Without the id, these indexes
-- cannot serve a lookup by id: the primary key alone can. Listings still
-- read them in order and put the jobs of one instant in id order as they
-- go (an incremental sort of a few rows). Their entries are narrower too,
-- and every insert and every update that is not HOT writes one in each.
-- Runs with search_path set to the store's schema.

DROP INDEX jobs_machine_state;
DROP INDEX jobs_created;
DROP INDEX jobs_updated;
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_at, created_ns);
CREATE INDEX jobs_created ON jobs (created_at, created_ns);
CREATE INDEX jobs_updated ON jobs (updated_at, updated_ns);
