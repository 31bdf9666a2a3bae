package sqlitestore

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Every instant is stored as two integers, its Unix seconds and the
// nanoseconds within the second, so that Go's times round-trip and order
// exactly over [jobstate.MinTime, jobstate.MaxTime]. The zero time is
// year 1, which orders first, as in Go, except where it means "never"
// (wake), where the seconds are NULL.

// encTime splits t into its Unix seconds and nanoseconds.
func encTime(t time.Time) (int64, int64) {
	return t.Unix(), int64(t.Nanosecond())
}

// encWake is encTime with the zero time stored as NULL seconds.
func encWake(t time.Time) (any, int64) {
	if t.IsZero() {
		return nil, 0
	}
	return t.Unix(), int64(t.Nanosecond())
}

// decTime joins what encTime split, in UTC; the zero time's seconds give
// the zero time back, without a location.
func decTime(s, ns int64) time.Time {
	t := time.Unix(s, ns).UTC()
	if t.IsZero() {
		return time.Time{}
	}
	return t
}

// idArg is the blob a uuid is stored as (uuid.UUID's own Value is its
// text form).
func idArg(id uuid.UUID) []byte { return id[:] }

// nullID is idArg with uuid.Nil stored as NULL.
func nullID(id uuid.UUID) any {
	if id == uuid.Nil {
		return nil
	}
	return id[:]
}

// decID reads a stored id; NULL (nil) is uuid.Nil.
func decID(b []byte) (uuid.UUID, error) {
	var id uuid.UUID
	if b == nil {
		return id, nil
	}
	if len(b) != len(id) {
		return id, fmt.Errorf("sqlitestore: stored id of %d bytes", len(b))
	}
	copy(id[:], b)
	return id, nil
}

func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// jobColumns lists the columns a job is read from, in scan order.
const jobColumns = `id, machine, state, kind, outcome, payload, result, version, attempt,
 retry_count, max_retries, backoff_kind, backoff_initial, backoff_factor, backoff_max,
 backoff_jitter, own_backoff, last_error, error_class, idempotency_key, fingerprint, owner,
 priority, created_s, created_ns, updated_s, updated_ns, started_s, started_ns,
 completed_s, completed_ns, not_before_s, not_before_ns, deadline_s, deadline_ns, leases,
 lease_expires_s, lease_expires_ns, heartbeat_s, heartbeat_ns, committed,
 cancel_requested, wake_s, wake_ns, sweep_failures, sweep_retry_s, sweep_retry_ns,
 concurrency_key`

// jobWriteColumns lists the columns a job is written to, in the order of
// jobArgs: jobColumns and the claim order's due time.
const jobWriteColumns = jobColumns + `, due_s, due_ns`

// jobColumnCount is the number of jobWriteColumns.
const jobColumnCount = 50

// jobArgs returns the values of jobWriteColumns for j. An invalid kind is
// refused with jobstate.ErrInvalidArgument.
func jobArgs(j *jobstate.Job) ([]any, error) {
	if !j.Kind.Valid() {
		return nil, fmt.Errorf("%w: job %s: invalid kind %d", jobstate.ErrInvalidArgument, j.ID, uint8(j.Kind))
	}
	created, createdNs := encTime(j.CreatedAt)
	updated, updatedNs := encTime(j.UpdatedAt)
	started, startedNs := encTime(j.StartedAt)
	completed, completedNs := encTime(j.CompletedAt)
	notBefore, notBeforeNs := encTime(j.NotBefore)
	deadline, deadlineNs := encTime(j.Deadline)
	leaseExp, leaseExpNs := encTime(j.LeaseExpiresAt)
	hb, hbNs := encTime(j.HeartbeatAt)
	wake, wakeNs := encWake(j.WakeAt)
	retry, retryNs := encTime(j.SweepRetryAt)
	due, dueNs := encTime(j.DueAt())
	return []any{
		idArg(j.ID), j.Machine, string(j.State), int64(j.Kind), string(j.Outcome), j.Payload, j.Result, j.Version, int64(j.Attempt),
		int64(j.RetryCount), int64(j.MaxRetries), string(j.Backoff.Kind), int64(j.Backoff.Initial), j.Backoff.Factor, int64(j.Backoff.Max),
		string(j.Backoff.Jitter), boolArg(j.OwnBackoff), j.LastError, string(j.ErrorClass), j.IdempotencyKey, j.Fingerprint, j.Owner,
		int64(j.Priority), created, createdNs, updated, updatedNs, started, startedNs,
		completed, completedNs, notBefore, notBeforeNs, deadline, deadlineNs, int64(j.Leases),
		leaseExp, leaseExpNs, hb, hbNs, nullID(j.Committed),
		boolArg(j.CancelRequested), wake, wakeNs, int64(j.SweepFailures), retry, retryNs,
		j.ConcurrencyKey,
		due, dueNs,
	}, nil
}

// jobRow is the scan target of jobColumns.
type jobRow struct {
	id, committed                                   []byte
	machine, state, outcome                         string
	kind                                            int64
	payload, result                                 []byte
	version                                         int64
	attempt, retryCount, maxRetries                 int64
	boKind, boJitter                                string
	boInitial, boMax                                int64
	boFactor                                        float64
	ownBackoff, cancelRequested                     bool
	lastError, errorClass, key, fingerprint, owner  string
	concurrencyKey                                  string
	priority, leases, sweepFailures                 int64
	created, updated, started, completed, notBefore pair
	deadline, leaseExp, heartbeat, sweepRetry       pair
	wake                                            sql.NullInt64
	wakeNs                                          int64
	due                                             pair // read by SELECT *, not returned
}

// pair is the scan target of one instant.
type pair struct{ s, ns int64 }

func (p pair) time() time.Time { return decTime(p.s, p.ns) }

func (r *jobRow) dest() []any { return append(r.base(), &r.concurrencyKey) }

// base is the scan target of the columns of schema version 1, in the
// table's order: jobColumns without the concurrency key.
func (r *jobRow) base() []any {
	return []any{
		&r.id, &r.machine, &r.state, &r.kind, &r.outcome, &r.payload, &r.result, &r.version, &r.attempt,
		&r.retryCount, &r.maxRetries, &r.boKind, &r.boInitial, &r.boFactor, &r.boMax,
		&r.boJitter, &r.ownBackoff, &r.lastError, &r.errorClass, &r.key, &r.fingerprint, &r.owner,
		&r.priority, &r.created.s, &r.created.ns, &r.updated.s, &r.updated.ns, &r.started.s, &r.started.ns,
		&r.completed.s, &r.completed.ns, &r.notBefore.s, &r.notBefore.ns, &r.deadline.s, &r.deadline.ns, &r.leases,
		&r.leaseExp.s, &r.leaseExp.ns, &r.heartbeat.s, &r.heartbeat.ns, &r.committed,
		&r.cancelRequested, &r.wake, &r.wakeNs, &r.sweepFailures, &r.sweepRetry.s, &r.sweepRetry.ns,
	}
}

// destAll is every column of jobs, in the table's order, for SELECT *:
// the columns of version 1, the due time, then the concurrency key
// (added by version 2, after them).
func (r *jobRow) destAll() []any { return append(r.base(), &r.due.s, &r.due.ns, &r.concurrencyKey) }

func (r *jobRow) job() (jobstate.Job, error) {
	id, err := decID(r.id)
	if err != nil {
		return jobstate.Job{}, err
	}
	committed, err := decID(r.committed)
	if err != nil {
		return jobstate.Job{}, err
	}
	kind := jobstate.Kind(r.kind)
	if !kind.Valid() {
		return jobstate.Job{}, fmt.Errorf("sqlitestore: job %s has unknown kind %d", id, r.kind)
	}
	var wake time.Time
	if r.wake.Valid {
		wake = decTime(r.wake.Int64, r.wakeNs)
	}
	return jobstate.Job{
		ID: id, Machine: r.machine, State: jobstate.State(r.state), Kind: kind, Outcome: jobstate.Outcome(r.outcome),
		Payload: r.payload, Result: r.result, Version: r.version, Attempt: int(r.attempt),
		RetryCount: int(r.retryCount), MaxRetries: int(r.maxRetries),
		Backoff: jobstate.Backoff{
			Kind: jobstate.BackoffKind(r.boKind), Initial: time.Duration(r.boInitial), Factor: r.boFactor,
			Max: time.Duration(r.boMax), Jitter: jobstate.Jitter(r.boJitter),
		},
		OwnBackoff: r.ownBackoff, LastError: r.lastError, ErrorClass: jobstate.ErrorClass(r.errorClass),
		IdempotencyKey: r.key, Fingerprint: r.fingerprint, Owner: r.owner, Priority: int(r.priority),
		CreatedAt: r.created.time(), UpdatedAt: r.updated.time(), StartedAt: r.started.time(),
		CompletedAt: r.completed.time(), NotBefore: r.notBefore.time(), Deadline: r.deadline.time(),
		Leases: int(r.leases), LeaseExpiresAt: r.leaseExp.time(), HeartbeatAt: r.heartbeat.time(),
		Committed: committed, CancelRequested: r.cancelRequested, WakeAt: wake,
		SweepFailures: int(r.sweepFailures), SweepRetryAt: r.sweepRetry.time(),
		ConcurrencyKey: r.concurrencyKey,
	}, nil
}

// scanJobs reads every row of rows as a job, and closes rows.
func scanJobs(rows *sql.Rows) ([]jobstate.Job, error) {
	defer rows.Close()
	var out []jobstate.Job
	var r jobRow
	dest := r.dest()
	for rows.Next() {
		r = jobRow{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// execColumns lists the columns an execution is read from (its job's id
// first) and written to.
const execColumns = `job_id, id, attempt, owner, status, lease_expires_s, lease_expires_ns,
 heartbeat_s, heartbeat_ns, claimed_s, claimed_ns, started_s, started_ns,
 finished_s, finished_ns, error`

// scanExecs reads every row of rows as an execution, and closes rows.
func scanExecs(rows *sql.Rows) ([]jobstate.Execution, error) {
	defer rows.Close()
	var out []jobstate.Execution
	for rows.Next() {
		var x jobstate.Execution
		var jobID, id []byte
		var attempt int64
		var status string
		var lease, hb, claimed, started, finished pair
		if err := rows.Scan(&jobID, &id, &attempt, &x.Owner, &status, &lease.s, &lease.ns,
			&hb.s, &hb.ns, &claimed.s, &claimed.ns, &started.s, &started.ns,
			&finished.s, &finished.ns, &x.Error); err != nil {
			return nil, err
		}
		var err error
		if x.JobID, err = decID(jobID); err != nil {
			return nil, err
		}
		if x.ID, err = decID(id); err != nil {
			return nil, err
		}
		x.Attempt, x.Status = int(attempt), jobstate.ExecStatus(status)
		x.LeaseExpiresAt, x.HeartbeatAt, x.ClaimedAt = lease.time(), hb.time(), claimed.time()
		x.StartedAt, x.FinishedAt = started.time(), finished.time()
		out = append(out, x)
	}
	return out, rows.Err()
}

// execArgs returns the values of execColumns for x of job jobID.
func execArgs(jobID uuid.UUID, x *jobstate.Execution) []any {
	lease, leaseNs := encTime(x.LeaseExpiresAt)
	hb, hbNs := encTime(x.HeartbeatAt)
	claimed, claimedNs := encTime(x.ClaimedAt)
	started, startedNs := encTime(x.StartedAt)
	finished, finishedNs := encTime(x.FinishedAt)
	return []any{idArg(jobID), idArg(x.ID), int64(x.Attempt), x.Owner, string(x.Status), lease, leaseNs, hb, hbNs,
		claimed, claimedNs, started, startedNs, finished, finishedNs, x.Error}
}

// transitionColumns lists the columns of a transition record.
const transitionColumns = `job_id, version, from_state, event, to_state, actor, reason, exec_id, at_s, at_ns`

// scanTransitions reads every row of rows as a transition, and closes
// rows.
func scanTransitions(rows *sql.Rows) ([]jobstate.Transition, error) {
	defer rows.Close()
	var out []jobstate.Transition
	for rows.Next() {
		var t jobstate.Transition
		var jobID, exec []byte
		var from, ev, to string
		var at pair
		if err := rows.Scan(&jobID, &t.Version, &from, &ev, &to, &t.Actor, &t.Reason, &exec, &at.s, &at.ns); err != nil {
			return nil, err
		}
		var err error
		if t.JobID, err = decID(jobID); err != nil {
			return nil, err
		}
		if t.ExecID, err = decID(exec); err != nil {
			return nil, err
		}
		t.From, t.Event, t.To, t.At = jobstate.State(from), jobstate.Event(ev), jobstate.State(to), at.time()
		out = append(out, t)
	}
	return out, rows.Err()
}

// transitionArgs returns the values of transitionColumns for t.
func transitionArgs(jobID uuid.UUID, t *jobstate.Transition) []any {
	at, atNs := encTime(t.At)
	return []any{idArg(jobID), t.Version, string(t.From), string(t.Event), string(t.To), t.Actor, t.Reason, nullID(t.ExecID), at, atNs}
}

// effectColumns lists the columns of an effect record (its job's id
// first).
const effectColumns = `job_id, name, exec_id, actor, at_s, at_ns`

// scanEffects reads every row of rows as an effect record, and closes
// rows.
func scanEffects(rows *sql.Rows) ([]jobstate.EffectRecord, error) {
	defer rows.Close()
	var out []jobstate.EffectRecord
	for rows.Next() {
		var e jobstate.EffectRecord
		var jobID, exec []byte
		var at pair
		if err := rows.Scan(&jobID, &e.Name, &exec, &e.Actor, &at.s, &at.ns); err != nil {
			return nil, err
		}
		var err error
		if e.ExecID, err = decID(exec); err != nil {
			return nil, err
		}
		e.At = at.time()
		out = append(out, e)
	}
	return out, rows.Err()
}

// effectArgs returns the values of effectColumns for e.
func effectArgs(jobID uuid.UUID, e *jobstate.EffectRecord) []any {
	at, atNs := encTime(e.At)
	return []any{idArg(jobID), e.Name, nullID(e.ExecID), e.Actor, at, atNs}
}

// asStored returns j as the store reads it back: its instants in UTC,
// without monotonic clock readings.
func asStored(j jobstate.Job) jobstate.Job {
	rt := func(t time.Time) time.Time { return decTime(encTime(t)) }
	j.CreatedAt, j.UpdatedAt, j.StartedAt = rt(j.CreatedAt), rt(j.UpdatedAt), rt(j.StartedAt)
	j.CompletedAt, j.NotBefore, j.Deadline = rt(j.CompletedAt), rt(j.NotBefore), rt(j.Deadline)
	j.LeaseExpiresAt, j.HeartbeatAt, j.SweepRetryAt = rt(j.LeaseExpiresAt), rt(j.HeartbeatAt), rt(j.SweepRetryAt)
	j.WakeAt = rt(j.WakeAt)
	return j
}
