package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
// far longer than running it. And the plan cache is told to keep the
// generic plan (plan_cache_mode = force_generic_plan): left to itself, the
// server plans a statement again for the values of each call whenever
// its custom plans look cheaper than the generic one (as a custom plan
// that knows the arrays' lengths does). With the plans pinned, the
// generic plan is the same index walk, planned once per connection (and
// again after the tables are analyzed).
//
// A transaction of the store pins its plans at most once: pinPlans goes
// in front of the first hot batch (in the same round trip) and stays in
// effect for the batches that follow. The settings the session had are
// given back (restorePlans) only where something else would be planned
// with the pinned ones: in front of the first statement a user's
// function sends through the store's transaction while they are pinned
// (after which the next hot batch pins them again), and at the end of a
// store method that ran in a caller's transaction (WithTx), with the
// savepoint's RELEASE, so that the caller's later statements see its own
// settings. A transaction the store owns is not restored before its
// COMMIT or ROLLBACK: the transaction-local settings end with it.
//
// A ROLLBACK TO SAVEPOINT undoes the settings changed after the
// savepoint, so after one the store no longer knows whether they are
// pinned: the next hot batch pins them again, and the next statement of
// a user's function restores them. Both statements are safe to repeat:
// pinPlans saves the settings only when they are not pinned already (a
// second pin never saves the pinned values as the session's), and
// restorePlans does nothing when they are not pinned. Statements outside
// a transaction the store follows (a listing on the pool or in a
// caller's transaction, a count through a user's transaction) are
// wrapped in pinPlans and restorePlans in the same batch.

// pinPlans saves the planner settings it changes, in the
// transaction-local setting jobstate.planner, unless it holds the values
// saved by an earlier pinPlans that is still in effect, turns them off
// for the transaction and keeps generic plans.
const pinPlans = `WITH saved AS MATERIALIZED (
    SELECT CASE WHEN coalesce(current_setting('jobstate.planner', true), '') <> ''
      THEN current_setting('jobstate.planner')
      ELSE set_config('jobstate.planner', concat_ws(',',
        current_setting('enable_seqscan'), current_setting('enable_bitmapscan'),
        current_setting('enable_hashjoin'), current_setting('enable_mergejoin'),
        current_setting('enable_sort'), current_setting('jit'),
        current_setting('plan_cache_mode')), true) END AS v)
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_sort', 'off', true), set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)
FROM saved`

// restorePlans gives the settings pinPlans changed the values it saved,
// and forgets them (so that the next pinPlans saves the settings of that
// moment); it does nothing when they are not pinned.
const restorePlans = `SELECT set_config('enable_seqscan', split_part(v, ',', 1), true),
       set_config('enable_bitmapscan', split_part(v, ',', 2), true),
       set_config('enable_hashjoin', split_part(v, ',', 3), true),
       set_config('enable_mergejoin', split_part(v, ',', 4), true),
       set_config('enable_sort', split_part(v, ',', 5), true),
       set_config('jit', split_part(v, ',', 6), true),
       set_config('plan_cache_mode', split_part(v, ',', 7), true),
       set_config('jobstate.planner', '', true)
FROM current_setting('jobstate.planner', true) AS v WHERE v <> ''`

// plans is what the statements of one transaction of the store (with its
// savepoints and the store calls nested in it) have done to the planner
// settings, as far as the store knows. It is used by one goroutine at a
// time, as the transaction is.
type plans struct {
	pinned bool // pinPlans is in effect: a hot batch need not send it
	maybe  bool // pinPlans may be in effect: a user's statement must restore first
	quiet  int  // store statements being sent through a user's transaction (storeSide)
}

// pin queues pinPlans on b, the hot batch about to be built, unless p
// knows the plans pinned, and reports whether it queued it. A nil p
// stands for a batch outside a transaction the store follows: it always
// pins (and restores, unpin).
func (p *plans) pin(b *pgx.Batch) bool {
	if p != nil && p.pinned {
		return false
	}
	b.Queue(pinPlans)
	if p != nil {
		p.pinned, p.maybe = true, true
	}
	return true
}

// unpin ends a hot batch whose pin queued pinPlans (pinned): with a nil
// p, restorePlans is queued on b and unpin reports true; a transaction
// the store follows keeps its plans pinned (restore gives them back when
// needed), and nothing is queued.
func (p *plans) unpin(b *pgx.Batch, pinned bool) bool {
	if p != nil || !pinned {
		return false
	}
	b.Queue(restorePlans)
	return true
}

// restore returns restorePlans when the plans may be pinned, recording
// them restored, to be sent in front of a user's statement (or before a
// caller's savepoint is released); "" when nothing is to be restored, or
// when the statement is the store's own (quiet).
func (p *plans) restore() string {
	if p == nil || !p.maybe || p.quiet > 0 {
		return ""
	}
	p.pinned, p.maybe = false, false
	return restorePlans
}

// rolledBack records a ROLLBACK TO SAVEPOINT: whether the plans are
// pinned is not known any more.
func (p *plans) rolledBack() {
	if p != nil {
		p.pinned, p.maybe = false, true
	}
}

// plansOf returns the plans of q when it is a transaction of the store
// that follows them, else nil.
func plansOf(q querier) *plans {
	if t, ok := q.(*connTx); ok && !t.user {
		return t.plans
	}
	return nil
}

// skipPlan reads the answer of a pinPlans or restorePlans queued on a
// batch (queued), if any.
func skipPlan(br pgx.BatchResults, queued bool) error {
	if !queued {
		return nil
	}
	_, err := br.Exec()
	return err
}

// storeSide sends the store's own statements (those of a store call
// nested in a user's function) through t, a user's transaction, without
// restoring the plans in front of them.
type storeSide struct {
	t querier
	p *plans
}

// hush marks a store statement in flight through the user's
// transaction until the function it returns is called.
func (s storeSide) hush() func() {
	s.p.quiet++
	return func() { s.p.quiet-- }
}

func (s storeSide) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	defer s.hush()()
	return s.t.Query(ctx, sql, args...)
}

func (s storeSide) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	defer s.hush()()
	return s.t.QueryRow(ctx, sql, args...)
}

func (s storeSide) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	defer s.hush()()
	return s.t.Exec(ctx, sql, args...)
}

func (s storeSide) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	defer s.hush()()
	return s.t.SendBatch(ctx, b)
}

func (s storeSide) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	defer s.hush()()
	return s.t.CopyFrom(ctx, table, cols, src)
}
