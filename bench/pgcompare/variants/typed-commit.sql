-- Applied after hotrow.sql: the single commit as a unique index over the
-- history's commit records (here the records of the move to done)
-- instead of a CHECK over the executions' JSON. Run it with a name ending
-- in -noexecs, as if the current execution were typed columns of the row:
--   -floor-variant "typed-noexecs=$(cat variants/hotrow.sql variants/typed-commit.sql)"
ALTER TABLE jobs DROP CONSTRAINT jobs_one_commit;
CREATE UNIQUE INDEX transitions_one_commit ON transitions (job_id) WHERE to_state = 'done';
