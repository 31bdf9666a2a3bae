-- Applied after hotrow.sql and typed-commit.sql: the two listing indexes
-- whose keys the claim and the commit change (a listing by machine and
-- state, in creation order; a listing by update time), on the hot row.
--   -floor-variant "listing-noexecs=$(cat variants/hotrow.sql variants/typed-commit.sql variants/listing.sql)"
CREATE INDEX jobs_machine_state ON jobs (machine, state, created_at, created_ns);
CREATE INDEX jobs_updated ON jobs (updated_at);
