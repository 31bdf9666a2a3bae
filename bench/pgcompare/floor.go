package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The floor section measures the least a durable, lease-based queue with
// exactly-once commits can cost this server: a queue written as a few
// statements of SQL, no library around them, run beside jobstate and
// river on the same cluster.
//
// A floor job is a narrow row: an id, a state, a priority, a due time, an
// attempt count, a lease's expiry and a finishing time, with the three
// indexes such a queue needs (the ready jobs in claim order, the running
// jobs by lease expiry for the sweep that retries abandoned jobs, the
// finished jobs by finishing time for pruning). Its life is two writes:
//   - the claim, one statement that locks up to the free slots' number of
//     ready jobs (FOR UPDATE SKIP LOCKED) and marks them running with a
//     lease and the attempt counted (so a job that kills its worker
//     every time still runs out of attempts), committed without waiting
//     for the WAL flush, as pgstore's claims are by default (a commit
//     flushed later flushes the claim before it);
//   - the commit, one statement per group of finished jobs, fenced by
//     the attempt (a job whose lease was taken over is not committed
//     twice: the statement's count of rows is checked), committed
//     durably. The groups are jobstate's group commit: one transaction
//     and one flush for the jobs many handlers finished meanwhile.
//
// With history on, each write also inserts one row per job into an
// append-only table of transitions, as jobstate's history does.
//
// The handlers are no-ops and the commit's effect writes nothing, as in
// the work section; a handler's slot is freed when it returns and its
// commit goes on in the background (jobstate's commits ahead).

const floorSchema = `
CREATE TABLE floor_jobs (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	state smallint NOT NULL DEFAULT 0, -- 0 ready, 1 running, 2 done
	priority smallint NOT NULL DEFAULT 0,
	run_at timestamptz NOT NULL DEFAULT now(),
	attempt bigint NOT NULL DEFAULT 0,
	lease_until timestamptz,
	finished_at timestamptz
);
CREATE INDEX floor_jobs_ready ON floor_jobs (priority, run_at, id) WHERE state = 0;
CREATE INDEX floor_jobs_leases ON floor_jobs (lease_until) WHERE state = 1;
CREATE INDEX floor_jobs_finished ON floor_jobs (finished_at) WHERE state = 2;
CREATE TABLE floor_history (
	job_id uuid NOT NULL,
	attempt bigint NOT NULL,
	state smallint NOT NULL,
	at timestamptz NOT NULL DEFAULT now()
);
`

// floorClaimUpdate locks and marks up to $1 ready jobs in claim order,
// returning their ids and attempts.
const floorClaimUpdate = `
UPDATE floor_jobs j
SET state = 1, attempt = j.attempt + 1, lease_until = now() + interval '1 minute'
WHERE j.id = ANY (ARRAY (
	SELECT id FROM floor_jobs
	WHERE state = 0 AND run_at <= now()
	ORDER BY priority, run_at, id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
))
RETURNING j.id, j.attempt`

// floorClaim is the floor's claim; floorClaimHistory adds a history row
// for each job taken: `WITH u AS (` + a claim's update + claimHistory.
const (
	floorClaim        = floorClaimUpdate
	floorClaimHistory = `WITH u AS (` + floorClaimUpdate + claimHistory
	claimHistory      = `
), h AS (
	INSERT INTO floor_history (job_id, attempt, state) SELECT id, attempt, 1 FROM u
)
SELECT id, attempt FROM u`
)

// floorCommitUpdate finishes the jobs of $1 whose attempt is still the
// one in $2 and that are not finished, returning their ids and attempts.
// Its only plan is a walk of $1 looking each job up by its primary key:
// a condition on the state would let the planner walk the index of
// running jobs instead, which after an ANALYZE of ready jobs it deems
// empty, and compare every running job with every job of $1.
const floorCommitUpdate = `
UPDATE floor_jobs j
SET state = 2, lease_until = NULL, finished_at = now()
FROM unnest($1::uuid[], $2::bigint[]) AS d (id, attempt)
WHERE j.id = d.id AND j.attempt = d.attempt AND j.finished_at IS NULL
RETURNING j.id, j.attempt`

// floorCommit is the floor's commit, returning how many jobs it
// finished; floorCommitHistory adds a history row for each.
const (
	floorCommit = `WITH f AS (` + floorCommitUpdate + `
)
SELECT count(*) FROM f`
	floorCommitHistory = `WITH f AS (` + floorCommitUpdate + `
), h AS (
	INSERT INTO floor_history (job_id, attempt, state) SELECT id, attempt, 2 FROM f
)
SELECT count(*) FROM f`
)

// floorGroup bounds the jobs of one commit (pgcompare's -group for
// pgstore).
const floorGroup = 128

// floorQueue is one of the floor's queues: the pool of its database and
// its two statements.
type floorQueue struct {
	pool          *pgxpool.Pool
	claim, commit string
	// readFirst makes each claim and each commit a transaction of two
	// round trips (floorread.go): the jobs read and locked, then written;
	// with peek, a commit reads its jobs without locking them.
	readFirst, peek bool
	// committers bounds the commits in flight at once; cooldown is the
	// least time between two claims (river's FetchCooldown in the work
	// section), so that a claim takes the slots freed meanwhile rather
	// than one at a time.
	committers int
	cooldown   time.Duration
	// claims and commits count the last run's statements.
	claims, commits int
}

// newFloorDB makes the floor's tables in the database at url and returns
// a pool of it.
func newFloorDB(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	pool, err := newPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, floorSchema); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// floorCreate empties the floor's tables and inserts n ready jobs, with
// their history rows when history is set.
func floorCreate(ctx context.Context, pool *pgxpool.Pool, n int, history bool) error {
	if _, err := pool.Exec(ctx, "TRUNCATE floor_jobs, floor_history"); err != nil {
		return err
	}
	q := "INSERT INTO floor_jobs (state) SELECT 0 FROM generate_series(1, $1)"
	if history {
		q = "WITH i AS (" + q + " RETURNING id) INSERT INTO floor_history (job_id, attempt, state) SELECT id, 0, 0 FROM i"
	}
	if _, err := pool.Exec(ctx, q, n); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "ANALYZE floor_jobs")
	return err
}

// floorJob is a claimed job: its id and the attempt that fences its
// commit.
type floorJob struct {
	id      uuid.UUID
	attempt int64
}

// work runs workers slots until target jobs are committed and returns
// the time taken. One goroutine claims for the free slots (one claim in
// flight, as jobstate's and river's producers), workers goroutines run
// the no-op handler, and f.committers goroutines commit the finished
// jobs in groups of at most floorGroup.
func (f *floorQueue) work(ctx context.Context, workers, target int) (time.Duration, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		claims   atomic.Int64
		commits  atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	free := make(chan struct{}, workers)  // one token per free slot
	jobs := make(chan floorJob, workers)  // claimed, waiting for a slot's handler
	ended := make(chan floorJob, 100_000) // handled, waiting for their commit
	for range workers {
		free <- struct{}{}
	}
	var wg sync.WaitGroup
	t0 := time.Now()

	// The claimer: waits for a free slot, then takes every free slot and
	// claims that many jobs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := f.pool.Acquire(rctx)
		if err != nil {
			fail(err)
			return
		}
		defer conn.Release()
		if _, err := conn.Exec(rctx, "SET synchronous_commit = off"); err != nil {
			fail(err)
			return
		}
		defer func() { _, _ = conn.Exec(context.Background(), "RESET synchronous_commit") }()
		last := time.Time{}
		for {
			n := 0
			select {
			case <-rctx.Done():
				return
			case <-free:
				n++
			}
			if wait := f.cooldown - time.Since(last); wait > 0 {
				time.Sleep(wait)
			}
			last = time.Now()
			claims.Add(1)
		more:
			for {
				select {
				case <-free:
					n++
				default:
					break more
				}
			}
			got, err := f.claimJobs(rctx, conn.Conn(), n)
			if err != nil {
				fail(err)
				return
			}
			for _, j := range got {
				jobs <- j
			}
			for range n - len(got) {
				free <- struct{}{}
			}
			if len(got) == 0 {
				select {
				case <-rctx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()

	// The handlers: a no-op, then the slot is freed and the commit goes on
	// in the background.
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-rctx.Done():
					return
				case j := <-jobs:
					ended <- j
					free <- struct{}{}
				}
			}
		}()
	}

	// The committers: each takes the finished jobs waiting (at least one)
	// and commits them in one statement.
	for range max(1, f.committers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uuid.UUID, 0, floorGroup)
			attempts := make([]int64, 0, floorGroup)
			for {
				ids, attempts = ids[:0], attempts[:0]
				select {
				case <-rctx.Done():
					return
				case j := <-ended:
					ids, attempts = append(ids, j.id), append(attempts, j.attempt)
				}
			fill:
				for len(ids) < floorGroup {
					select {
					case j := <-ended:
						ids, attempts = append(ids, j.id), append(attempts, j.attempt)
					default:
						break fill
					}
				}
				n, err := f.commitJobs(rctx, ids, attempts)
				if err != nil {
					fail(err)
					return
				}
				if n != int64(len(ids)) {
					fail(fmt.Errorf("floor: a group of %d jobs committed %d", len(ids), n))
					return
				}
				done.Add(n)
				commits.Add(1)
			}
		}()
	}

	last, lastAt := int64(0), time.Now()
	for done.Load() < int64(target) && rctx.Err() == nil {
		select {
		case <-rctx.Done():
		case <-time.After(time.Millisecond):
		}
		if n := done.Load(); n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > stallAfter {
			fail(fmt.Errorf("floor: no job done for %v after %d of %d", stallAfter, n, target))
		}
	}
	d := time.Since(t0)
	cancel()
	wg.Wait()
	f.claims, f.commits = int(claims.Load()), int(commits.Load())
	if firstErr != nil && done.Load() < int64(target) {
		return 0, firstErr
	}
	return d, nil
}
