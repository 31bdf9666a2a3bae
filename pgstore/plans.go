package pgstore

// Plans that do not depend on statistics.
//
// The store's statements are prepared once per connection (pgx's
// statement cache), and after a few executions the server may keep one
// generic plan for each, chosen from the statistics of that moment and
// kept until the tables are analyzed again. Planned over tables that are
// empty, or were analyzed while empty (a new database, a TRUNCATE, a
// database-wide ANALYZE after a purge), every lookup is a sequential scan
// (the cheapest way to read nothing), and such a plan, kept while the
// tables fill, reads every row of the table for each job.
//
// So the statements of the claim, update and commit paths are planned
// with the planner's sequential scans, bitmap scans, hash and merge joins
// and sorts turned off for the transaction: the one plan left to each is
// the index walk its statement was written for (a nested loop of index
// lookups by id, the claim index in claim order), whatever the
// statistics say. JIT compilation is turned off with them: a plan that
// must keep a step the planner was told to avoid (the sort of a job's few
// executions) is costed as if it were huge, and compiling it would take
// far longer than running it. pinPlans is sent in front of them, in the same round
// trip, and restorePlans right after, so that the statements of users'
// functions, running in the same transaction, are planned with the
// settings the session had. A statement that fails in between rolls the
// transaction, or the savepoint it runs in, back, and the settings with
// it.

// pinPlans saves the planner settings it changes, in the
// transaction-local setting jobstate.planner, and turns them off for the
// transaction.
const pinPlans = `WITH saved AS MATERIALIZED (
    SELECT set_config('jobstate.planner', concat_ws(',',
        current_setting('enable_seqscan'), current_setting('enable_bitmapscan'),
        current_setting('enable_hashjoin'), current_setting('enable_mergejoin'),
        current_setting('enable_sort'), current_setting('jit')), true) AS v)
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_sort', 'off', true), set_config('jit', 'off', true)
FROM saved`

// restorePlans gives the settings pinPlans changed the values it saved.
const restorePlans = `SELECT set_config('enable_seqscan', split_part(v, ',', 1), true),
       set_config('enable_bitmapscan', split_part(v, ',', 2), true),
       set_config('enable_hashjoin', split_part(v, ',', 3), true),
       set_config('enable_mergejoin', split_part(v, ',', 4), true),
       set_config('enable_sort', split_part(v, ',', 5), true),
       set_config('jit', split_part(v, ',', 6), true)
FROM current_setting('jobstate.planner') AS v`
