-- Version 8: the single commit checked without reading an empty list.
--
-- jobs_one_commit, which refuses a row holding more than one execution
-- COMMITTED or DONE, is evaluated on every write of a job. A job claimed
-- once keeps earlier_execs empty; for it the constraint now holds from
-- that alone (its last execution is one execution), and the JSON path
-- over the list runs only for a job with earlier executions. The rows it
-- admits are the same.
--
-- Replacing the constraint checks every row against it, with the table
-- locked (ACCESS EXCLUSIVE) until the migration's transaction ends.
-- Runs with search_path set to the store's schema.

ALTER TABLE jobs DROP CONSTRAINT jobs_one_commit;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_commit CHECK (
    earlier_execs = '[]'::jsonb
    OR (exec_status IN ('COMMITTED', 'DONE'))::int
       + jsonb_array_length(jsonb_path_query_array(earlier_execs, '$[*] ? (@.status == "COMMITTED" || @.status == "DONE")')) <= 1);
