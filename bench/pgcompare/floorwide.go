package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate/pgstore"
)

// The floor's statements on jobstate's own tables: a copy of pgstore's
// schema (migrated into a schema of its own in the jobstate database),
// with the same two writes per job as the floor, each one statement, but
// of jobstate's row (its columns, indexes and CHECKs, the execution kept
// in the row's columns of its last one) and with a history row per transition in
// jobstate's transitions. What this costs beyond the narrow floor with
// history is the row's; what jobstate costs beyond this is its protocol
// and its client (the reads before each write, the round trips, the
// engine, the encoding of every column).
//
// A variant (-floor-variant, repeatable) alters its copy of the schema
// first, to measure what a part of the row costs: "name=SQL", the SQL run
// with the copy's schema first in the search path. A name ending in
// "-noexecs" also leaves the executions out of both writes. Each variant
// has a schema of its own: two names that would share one are refused.

// wideVariant is a copy of pgstore's schema for the floor's statements.
type wideVariant struct {
	name    string // the contender's name
	schema  string
	alter   string // SQL run on the copy once made
	noExecs bool
}

var variantName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,30}$`)

// baseSchema is the schema of the unaltered copy of pgstore's tables.
const baseSchema = "floor_jobstate"

// parseVariants reads the -floor-variant flags, each "name=SQL".
func parseVariants(flags []string) ([]wideVariant, error) {
	var out []wideVariant
	schemas := map[string]string{baseSchema: "the unaltered copy"}
	for _, v := range flags {
		name, sql, ok := strings.Cut(v, "=")
		name = strings.TrimSpace(name)
		if !ok || !variantName.MatchString(name) {
			return nil, fmt.Errorf("-floor-variant %q: want name=SQL, the name in lower case letters, digits, _ and -", v)
		}
		schema := "floor_" + strings.ReplaceAll(name, "-", "_")
		if other, taken := schemas[schema]; taken {
			return nil, fmt.Errorf("-floor-variant %q: its schema %s is %s's too", name, schema, other)
		}
		schemas[schema] = name
		out = append(out, wideVariant{
			name:    "floor on jobstate's rows, " + name,
			schema:  schema,
			alter:   sql,
			noExecs: strings.HasSuffix(name, "-noexecs"),
		})
	}
	return out, nil
}

// setUp migrates the copy of the schema (dropped first if there) and
// alters it.
func (v wideVariant) setUp(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+v.schema+" CASCADE"); err != nil {
		return err
	}
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: v.schema}); err != nil {
		return err
	}
	if strings.TrimSpace(v.alter) == "" {
		return nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET search_path = "+v.schema+"; "+v.alter+"; RESET search_path")
	if err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	return nil
}

// create empties the copy and inserts n ready jobs of the benchmark's
// machine.
func (v wideVariant) create(ctx context.Context, pool *pgxpool.Pool, n int) error {
	s := v.schema + "."
	if _, err := pool.Exec(ctx, "TRUNCATE "+s+"jobs, "+s+"transitions"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+s+`jobs (id, machine, state, kind, version, created_at, updated_at, due_at)
SELECT gen_random_uuid(), 'bench', 'queued', 'ready', 1, now(), now(), now() FROM generate_series(1, $1)`, n); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "ANALYZE "+s+"jobs")
	return err
}

// statements returns the variant's claim and commit.
func (v wideVariant) statements() (claim, commit string) {
	claimExecs, commitExecs := wideClaimExecs, wideCommitExecs
	if v.noExecs {
		claimExecs, commitExecs = "", ""
	}
	r := strings.NewReplacer("{schema}", v.schema, "{claim_execs}", claimExecs, "{commit_execs}", commitExecs)
	return r.Replace(wideClaim), r.Replace(wideCommit)
}

// wideClaim claims up to $1 ready jobs of the benchmark's machine in
// pgstore's claim order, as the engine's claim writes them: running, a
// new version, the attempt counted, one lease, an execution appended.
const wideClaim = `
WITH c AS MATERIALIZED (
	SELECT id FROM {schema}.jobs
	WHERE machine = 'bench' AND kind = 'ready' AND concurrency_key = ''
	  AND (not_before, not_before_ns) <= (now(), 0::int2)
	ORDER BY priority DESC, due_at, due_ns, created_at, created_ns, id
	LIMIT $1
	FOR NO KEY UPDATE SKIP LOCKED
), u AS (
	UPDATE {schema}.jobs j
	SET state = 'running', kind = 'active', version = j.version + 1, attempt = j.attempt + 1,
	    updated_at = now(), started_at = now(), leases = 1,
	    lease_expires_at = now() + interval '1 minute', heartbeat_at = now(),
	    wake_at = now() + interval '1 minute'{claim_execs}
	WHERE j.id = ANY (ARRAY (SELECT id FROM c))
	RETURNING j.id, j.attempt, j.version
), h AS (
	INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, at)
	SELECT id, version, 'queued', 'claim', 'running', 'bench', now() FROM u
)
SELECT id, attempt FROM u`

// wideCommit finishes the jobs of $1 whose attempt is still the one in $2
// and that still run, as the engine's commit writes them: done, a new
// version, the lease dropped, the execution committed.
const wideCommit = `
WITH f AS (
	UPDATE {schema}.jobs j
	SET state = 'done', kind = 'terminal', outcome = 'succeeded', version = j.version + 1,
	    updated_at = now(), completed_at = now(), leases = 0,
	    lease_expires_at = '-infinity', heartbeat_at = '-infinity', wake_at = NULL{commit_execs}
	FROM unnest($1::uuid[], $2::bigint[]) AS d (id, attempt)
	WHERE j.id = d.id AND j.attempt = d.attempt AND j.kind = 'active'
	RETURNING j.id, j.version, j.exec_id
), h AS (
	INSERT INTO {schema}.transitions (job_id, version, from_state, event, to_state, actor, exec_id, at)
	SELECT id, version, 'running', 'succeed', 'done', 'bench', exec_id, now() FROM f
)
SELECT count(*) FROM f`

// wideClaimExecs sets the claim's execution as the row's last (the jobs
// have none before it).
const wideClaimExecs = `,
	    exec_id = gen_random_uuid(), exec_attempt = j.attempt + 1, exec_owner = 'bench', exec_status = 'LEASED',
	    exec_lease_expires_at = now() + interval '1 minute', exec_heartbeat_at = now(), exec_claimed_at = now()`

// wideCommitExecs marks the row's last execution done and committed.
const wideCommitExecs = `,
	    committed = j.exec_id, exec_status = 'DONE', exec_finished_at = now()`
