package pgstore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// Every instant is stored as a timestamptz floored to the microsecond and
// the nanoseconds below it (0-999), so that Go's times round-trip and
// order exactly over [jobstate.MinTime, jobstate.MaxTime]. The zero time
// is '-infinity' (it orders first, as in Go), except where it means
// "never" (wake_at), where it is NULL.

var negInf = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}

// encTime splits t into its microsecond part and its nanoseconds below.
func encTime(t time.Time) (pgtype.Timestamptz, int16) {
	if t.IsZero() {
		return negInf, 0
	}
	u := t.Truncate(time.Microsecond)
	return pgtype.Timestamptz{Time: u, Valid: true}, int16(t.Sub(u))
}

// encNullTime is encTime with the zero time stored as NULL.
func encNullTime(t time.Time) (pgtype.Timestamptz, int16) {
	if t.IsZero() {
		return pgtype.Timestamptz{}, 0
	}
	return encTime(t)
}

// decTime joins what encTime split, in UTC; NULL and infinities are the
// zero time.
func decTime(ts pgtype.Timestamptz, ns int16) time.Time {
	if !ts.Valid || ts.InfinityModifier != pgtype.Finite {
		return time.Time{}
	}
	return ts.Time.UTC().Add(time.Duration(ns))
}

// tsPair is the scan target of one instant.
type tsPair struct {
	ts pgtype.Timestamptz
	ns int16
}

func (p *tsPair) time() time.Time { return decTime(p.ts, p.ns) }

func encUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil} }

// Every id goes to pgx as a pgtype.UUID, which it encodes as the 16
// bytes they are. A uuid.UUID is a driver.Valuer, which pgx encodes
// through its text form, parsed back; in a COPY it first builds and drops
// an error for each value.

// pgID is id as a statement's argument (the nil UUID stays a value, not
// NULL).
func pgID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// pgIDs is ids as a statement's array argument, never NULL.
func pgIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgID(id)
	}
	return out
}

func decUUID(u pgtype.UUID) uuid.UUID {
	if !u.Valid {
		return uuid.Nil
	}
	return u.Bytes
}

var kindNames = map[jobstate.Kind]string{
	jobstate.KindInitial: "initial", jobstate.KindReady: "ready", jobstate.KindActive: "active",
	jobstate.KindWaiting: "waiting", jobstate.KindTerminal: "terminal",
}

var kindsByName = map[string]jobstate.Kind{
	"initial": jobstate.KindInitial, "ready": jobstate.KindReady, "active": jobstate.KindActive,
	"waiting": jobstate.KindWaiting, "terminal": jobstate.KindTerminal,
}

func encKind(k jobstate.Kind) (string, error) {
	name, ok := kindNames[k]
	if !ok {
		return "", fmt.Errorf("%w: invalid kind %d", jobstate.ErrInvalidArgument, uint8(k))
	}
	return name, nil
}

// jobColumns lists the columns a job is read from, in scan order.
const jobColumns = `id, machine, state, kind, outcome, payload, result, version, attempt,
 retry_count, max_retries, backoff_kind, backoff_initial, backoff_factor, backoff_max,
 backoff_jitter, own_backoff, last_error, error_class, idempotency_key, fingerprint, owner,
 priority, created_at, created_ns, updated_at, updated_ns, started_at, started_ns,
 completed_at, completed_ns, not_before, not_before_ns, deadline, deadline_ns, leases,
 lease_expires_at, lease_expires_ns, heartbeat_at, heartbeat_ns, committed,
 cancel_requested, wake_at, wake_ns, sweep_failures, sweep_retry_at, sweep_retry_ns,
 concurrency_key`

// execColumns lists the columns of a job's executions, in scan order: the
// executions before its last (earlier_execs, JSON) and its last one, each
// field a column of its own (migration 7).
const execColumns = `earlier_execs, exec_id, exec_attempt, exec_owner, exec_status,
 exec_lease_expires_at, exec_lease_expires_ns, exec_heartbeat_at, exec_heartbeat_ns,
 exec_claimed_at, exec_claimed_ns, exec_started_at, exec_started_ns,
 exec_finished_at, exec_finished_ns, exec_error`

// jobWriteColumns lists the columns a job is written to, in the order of
// jobArgs: jobColumns, the claim order's due time and the executions.
const jobWriteColumns = jobColumns + `, due_at, due_ns, ` + execColumns

// jobArgs returns the values of jobWriteColumns for j and its
// executions execs (all of them, as mergeExecs returns them), each boxed
// for a statement's arguments, with room for writeParams after them.
func jobArgs(j *jobstate.Job, execs []jobstate.Execution) ([]any, error) {
	var v rowValues
	if err := v.set(j, execs); err != nil {
		return nil, err
	}
	var ptrs [jobWriteCount]any
	return derefAll(make([]any, 0, len(jobParams)+len(writeParams)), v.appendPtrs(ptrs[:0])), nil
}

// jobRow is the scan target of jobColumns.
type jobRow struct {
	id                                              pgtype.UUID
	machine, state, kind, outcome                   string
	payload, result                                 []byte
	version                                         int64
	attempt, retryCount, maxRetries                 int64
	boKind, boJitter                                string
	boInitial, boMax                                int64
	boFactor                                        float64
	ownBackoff                                      bool
	lastError, errorClass, key, fingerprint, owner  string
	concurrencyKey                                  string
	priority, leases, sweepFailures                 int64
	created, updated, started, completed, notBefore tsPair
	deadline, leaseExp, heartbeat, wake, sweepRetry tsPair
	committed                                       pgtype.UUID
	cancelRequested                                 bool
}

func (r *jobRow) dest() []any { return r.appendDest(make([]any, 0, jobColumnCount)) }

// appendDest appends to dst a pointer to each field of r, in the order of
// jobColumns: where a row is scanned to, and what rowValues sends.
func (r *jobRow) appendDest(dst []any) []any {
	return append(dst,
		&r.id, &r.machine, &r.state, &r.kind, &r.outcome, &r.payload, &r.result, &r.version, &r.attempt,
		&r.retryCount, &r.maxRetries, &r.boKind, &r.boInitial, &r.boFactor, &r.boMax,
		&r.boJitter, &r.ownBackoff, &r.lastError, &r.errorClass, &r.key, &r.fingerprint, &r.owner,
		&r.priority, &r.created.ts, &r.created.ns, &r.updated.ts, &r.updated.ns, &r.started.ts, &r.started.ns,
		&r.completed.ts, &r.completed.ns, &r.notBefore.ts, &r.notBefore.ns, &r.deadline.ts, &r.deadline.ns, &r.leases,
		&r.leaseExp.ts, &r.leaseExp.ns, &r.heartbeat.ts, &r.heartbeat.ns, &r.committed,
		&r.cancelRequested, &r.wake.ts, &r.wake.ns, &r.sweepFailures, &r.sweepRetry.ts, &r.sweepRetry.ns,
		&r.concurrencyKey,
	)
}

func (r *jobRow) job() (jobstate.Job, error) {
	kind, ok := kindsByName[r.kind]
	if !ok {
		return jobstate.Job{}, fmt.Errorf("pgstore: job %s has unknown kind %q", decUUID(r.id), r.kind)
	}
	return jobstate.Job{
		ID: decUUID(r.id), Machine: r.machine, State: jobstate.State(r.state), Kind: kind, Outcome: jobstate.Outcome(r.outcome),
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
		Committed: decUUID(r.committed), CancelRequested: r.cancelRequested, WakeAt: r.wake.time(),
		SweepFailures: int(r.sweepFailures), SweepRetryAt: r.sweepRetry.time(),
		ConcurrencyKey: r.concurrencyKey,
	}, nil
}

// scanJobs reads every row of rows as a job.
func scanJobs(rows pgx.Rows) ([]jobstate.Job, error) {
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

// A job's executions are kept in its row, in the Store contract's order
// (by attempt, a replaced execution keeping its place among those of its
// attempt): the last one in columns of its own (exec_id to exec_error,
// migration 7), which a claim, a heartbeat and a commit rewrite, and
// those before it in earlier_execs, a JSON array of objects (migration
// 6): id, attempt and status always; owner and error when not empty; the
// instants when set, in UTC with nanoseconds (RFC 3339). A job claimed
// once keeps an empty array there, which no write of it sends again.

// execJSON is one execution as jobs.earlier_execs holds it.
type execJSON struct {
	ID             uuid.UUID  `json:"id"`
	Attempt        int        `json:"attempt"`
	Owner          string     `json:"owner,omitempty"`
	Status         string     `json:"status"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	HeartbeatAt    *time.Time `json:"heartbeat_at,omitempty"`
	ClaimedAt      *time.Time `json:"claimed_at,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Error          string     `json:"error,omitempty"`
}

// mergeExecs returns the executions of a job after a write: known (the
// job's, as read) with each of written replacing the one of the same ID,
// or added, in the contract's order (stable by attempt).
func mergeExecs(known, written []jobstate.Execution) []jobstate.Execution {
	out := make([]jobstate.Execution, len(known), len(known)+len(written))
	copy(out, known)
	for _, x := range written {
		if i := slices.IndexFunc(out, func(k jobstate.Execution) bool { return k.ID == x.ID }); i >= 0 {
			out[i] = x
		} else {
			out = append(out, x)
		}
	}
	slices.SortStableFunc(out, func(a, b jobstate.Execution) int { return cmp.Compare(a.Attempt, b.Attempt) })
	return out
}

// noExecs is earlier_execs of a job with at most one execution.
const noExecs = "[]"

// checkExec refuses an execution the columns would not store as it is.
func checkExec(x *jobstate.Execution) error {
	if !x.Status.Live() && !x.Status.Final() {
		return fmt.Errorf("%w: execution %s: unknown status %q", jobstate.ErrInvalidArgument, x.ID, x.Status)
	}
	for _, text := range []string{x.Owner, x.Error} {
		if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
			return fmt.Errorf("%w: execution %s: a text that is not valid UTF-8 or holds a NUL character", jobstate.ErrInvalidArgument, x.ID)
		}
	}
	return nil
}

// encExecs returns the JSON text of jobs.earlier_execs for xs, checked by
// checkExec.
func encExecs(xs []jobstate.Execution) (string, error) {
	if len(xs) == 0 {
		return noExecs, nil
	}
	list := make([]execJSON, len(xs))
	for i, x := range xs {
		list[i] = execJSON{
			ID: x.ID, Attempt: x.Attempt, Owner: x.Owner, Status: string(x.Status),
			LeaseExpiresAt: utc(x.LeaseExpiresAt), HeartbeatAt: utc(x.HeartbeatAt), ClaimedAt: utc(x.ClaimedAt),
			StartedAt: utc(x.StartedAt), FinishedAt: utc(x.FinishedAt), Error: x.Error,
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("%w: executions: %w", jobstate.ErrInvalidArgument, err)
	}
	return string(b), nil
}

// utc is t in UTC, nil for the zero time (left out of the list).
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// instant is what utc encoded: the zero time for nil.
func instant(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// decExecs reads jobs.earlier_execs of the job id.
func decExecs(id uuid.UUID, data string) ([]jobstate.Execution, error) {
	if data == noExecs {
		return nil, nil
	}
	var list []execJSON
	if err := json.Unmarshal([]byte(data), &list); err != nil {
		return nil, fmt.Errorf("pgstore: job %s: executions: %w", id, err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]jobstate.Execution, len(list))
	for i, x := range list {
		out[i] = jobstate.Execution{
			ID: x.ID, JobID: id, Attempt: x.Attempt, Owner: x.Owner, Status: jobstate.ExecStatus(x.Status),
			LeaseExpiresAt: instant(x.LeaseExpiresAt), HeartbeatAt: instant(x.HeartbeatAt), ClaimedAt: instant(x.ClaimedAt),
			StartedAt: instant(x.StartedAt), FinishedAt: instant(x.FinishedAt), Error: x.Error,
		}
	}
	return out, nil
}

// execRow is the scan target of execColumns.
type execRow struct {
	earlier                                      string
	id                                           pgtype.UUID
	attempt                                      int64
	owner, status, err                           string
	leaseExp, heartbeat, claimed, started, ended tsPair
}

func (r *execRow) dest() []any { return r.appendDest(make([]any, 0, execColumnCount)) }

// appendDest appends to dst a pointer to each field of r, in the order of
// execColumns.
func (r *execRow) appendDest(dst []any) []any {
	return append(dst,
		&r.earlier, &r.id, &r.attempt, &r.owner, &r.status, &r.leaseExp.ts, &r.leaseExp.ns,
		&r.heartbeat.ts, &r.heartbeat.ns, &r.claimed.ts, &r.claimed.ns, &r.started.ts, &r.started.ns,
		&r.ended.ts, &r.ended.ns, &r.err,
	)
}

// executions returns the executions of the job id the row holds.
func (r *execRow) executions(id uuid.UUID) ([]jobstate.Execution, error) {
	xs, err := decExecs(id, r.earlier)
	if err != nil || !r.id.Valid {
		return xs, err
	}
	return append(xs, jobstate.Execution{
		ID: decUUID(r.id), JobID: id, Attempt: int(r.attempt), Owner: r.owner, Status: jobstate.ExecStatus(r.status),
		LeaseExpiresAt: r.leaseExp.time(), HeartbeatAt: r.heartbeat.time(), ClaimedAt: r.claimed.time(),
		StartedAt: r.started.time(), FinishedAt: r.ended.time(), Error: r.err,
	}), nil
}

// snapColumns lists the columns a snapshot's job and executions are read
// from: jobColumns and execColumns.
const snapColumns = jobColumns + `, ` + execColumns

// scanSnapshots reads every row of rows (snapColumns) as a snapshot
// without its effects.
func scanSnapshots(rows pgx.Rows) ([]jobstate.Snapshot, error) {
	defer rows.Close()
	var out []jobstate.Snapshot
	var r jobRow
	var x execRow
	dest := append(r.dest(), x.dest()...)
	for rows.Next() {
		r, x = jobRow{}, execRow{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			return nil, err
		}
		xs, err := x.executions(j.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, jobstate.Snapshot{Job: j, Executions: xs})
	}
	return out, rows.Err()
}

const transitionColumns = `job_id, version, from_state, event, to_state, actor, reason, exec_id, at, at_ns`

func scanTransitions(rows pgx.Rows) ([]jobstate.Transition, error) {
	defer rows.Close()
	var out []jobstate.Transition
	for rows.Next() {
		var t jobstate.Transition
		var from, ev, to string
		var job, exec pgtype.UUID
		var at tsPair
		if err := rows.Scan(&job, &t.Version, &from, &ev, &to, &t.Actor, &t.Reason, &exec, &at.ts, &at.ns); err != nil {
			return nil, err
		}
		t.From, t.Event, t.To = jobstate.State(from), jobstate.Event(ev), jobstate.State(to)
		t.JobID, t.ExecID, t.At = decUUID(job), decUUID(exec), at.time()
		out = append(out, t)
	}
	return out, rows.Err()
}

// transitionArgs returns the values of transitionColumns for t, a
// transition of the job jobID, each boxed for a statement's arguments.
func transitionArgs(jobID uuid.UUID, t *jobstate.Transition) []any {
	var v transitionValues
	v.set(jobID, t)
	var ptrs [transitionCount]any
	return derefAll(make([]any, 0, transitionCount), v.appendPtrs(ptrs[:0]))
}

const effectColumns = `name, exec_id, actor, at, at_ns`

func scanEffects(rows pgx.Rows) ([]jobstate.EffectRecord, error) {
	defer rows.Close()
	var out []jobstate.EffectRecord
	for rows.Next() {
		e, err := scanEffect(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// scanEffect scans one row of effectColumns, preceded by the job's id
// when jobID is not nil.
func scanEffect(rows pgx.Rows, jobID *uuid.UUID) (jobstate.EffectRecord, error) {
	var e jobstate.EffectRecord
	var job, exec pgtype.UUID
	var at tsPair
	dest := []any{&e.Name, &exec, &e.Actor, &at.ts, &at.ns}
	if jobID != nil {
		dest = append([]any{&job}, dest...)
	}
	if err := rows.Scan(dest...); err != nil {
		return e, err
	}
	if jobID != nil {
		*jobID = decUUID(job)
	}
	e.ExecID, e.At = decUUID(exec), at.time()
	return e, nil
}

func effectArgs(jobID uuid.UUID, e *jobstate.EffectRecord) []any {
	at, atNs := encTime(e.At)
	return []any{pgID(jobID), e.Name, encUUID(e.ExecID), e.Actor, at, atNs}
}
