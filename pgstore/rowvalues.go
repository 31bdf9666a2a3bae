package pgstore

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// A job's row as a write sends it is kept in the types it is read into
// (jobRow, execRow): set is the inverse of what a read does with them, and
// the list of their fields' addresses (appendDest) is written once, for
// both. A statement's arguments box each value (jobArgs); a COPY's data
// is written from the fields themselves (copyIn), so that a new job's
// values are not copied into interface values one by one.

// The number of columns in jobColumns, execColumns, jobWriteColumns and
// transitionColumns (TestColumnCounts).
const (
	jobColumnCount  = 48
	execColumnCount = 16
	jobWriteCount   = jobColumnCount + 2 + execColumnCount
	transitionCount = 10
)

// pairOf splits t as encTime does.
func pairOf(t time.Time) tsPair {
	ts, ns := encTime(t)
	return tsPair{ts, ns}
}

// set makes r the row of j: the inverse of job, but for the precision
// kept (instants to the nanosecond, in UTC when read). An invalid kind is
// refused (ErrInvalidArgument).
func (r *jobRow) set(j *jobstate.Job) error {
	kind, err := encKind(j.Kind)
	if err != nil {
		return err
	}
	wake, wakeNs := encNullTime(j.WakeAt)
	*r = jobRow{
		id: pgID(j.ID), machine: j.Machine, state: string(j.State), kind: kind, outcome: string(j.Outcome),
		payload: j.Payload, result: j.Result, version: j.Version, attempt: int64(j.Attempt),
		retryCount: int64(j.RetryCount), maxRetries: int64(j.MaxRetries),
		boKind: string(j.Backoff.Kind), boInitial: int64(j.Backoff.Initial), boFactor: j.Backoff.Factor,
		boMax: int64(j.Backoff.Max), boJitter: string(j.Backoff.Jitter),
		ownBackoff: j.OwnBackoff, lastError: j.LastError, errorClass: string(j.ErrorClass),
		key: j.IdempotencyKey, fingerprint: j.Fingerprint, owner: j.Owner, concurrencyKey: j.ConcurrencyKey,
		priority: int64(j.Priority), leases: int64(j.Leases), sweepFailures: int64(j.SweepFailures),
		created: pairOf(j.CreatedAt), updated: pairOf(j.UpdatedAt), started: pairOf(j.StartedAt),
		completed: pairOf(j.CompletedAt), notBefore: pairOf(j.NotBefore), deadline: pairOf(j.Deadline),
		leaseExp: pairOf(j.LeaseExpiresAt), heartbeat: pairOf(j.HeartbeatAt), wake: tsPair{wake, wakeNs},
		sweepRetry: pairOf(j.SweepRetryAt),
		committed:  encUUID(j.Committed), cancelRequested: j.CancelRequested,
	}
	return nil
}

// set makes r the columns of xs, a job's executions in the contract's
// order: the last in columns of its own, those before it as JSON. An
// unknown status, and an owner or error that is not valid UTF-8 or holds
// a NUL character, are refused (ErrInvalidArgument), as a text column and
// its CHECK refused them: JSON would store the one and change the other.
func (r *execRow) set(xs []jobstate.Execution) error {
	for i := range xs {
		if err := checkExec(&xs[i]); err != nil {
			return err
		}
	}
	none := pairOf(time.Time{})
	if len(xs) == 0 {
		*r = execRow{earlier: noExecs, leaseExp: none, heartbeat: none, claimed: none, started: none, ended: none}
		return nil
	}
	earlier, err := encExecs(xs[:len(xs)-1])
	if err != nil {
		return err
	}
	x := &xs[len(xs)-1]
	*r = execRow{
		earlier: earlier, id: pgID(x.ID), attempt: int64(x.Attempt), owner: x.Owner, status: string(x.Status),
		leaseExp: pairOf(x.LeaseExpiresAt), heartbeat: pairOf(x.HeartbeatAt), claimed: pairOf(x.ClaimedAt),
		started: pairOf(x.StartedAt), ended: pairOf(x.FinishedAt), err: x.Error,
	}
	return nil
}

// rowValues is a job's row as written: the values of jobWriteColumns.
type rowValues struct {
	job  jobRow
	due  tsPair // the claim order's due time (Job.DueAt)
	exec execRow
}

// set makes v the row of j and its executions execs (all of them, as
// mergeExecs returns them).
func (v *rowValues) set(j *jobstate.Job, execs []jobstate.Execution) error {
	if err := v.job.set(j); err != nil {
		return err
	}
	v.due = pairOf(j.DueAt())
	return v.exec.set(execs)
}

// appendPtrs appends to dst the address of each value of v, in the order
// of jobWriteColumns.
func (v *rowValues) appendPtrs(dst []any) []any {
	dst = v.job.appendDest(dst)
	dst = append(dst, &v.due.ts, &v.due.ns)
	return v.exec.appendDest(dst)
}

// transitionValues is a transition's row as written: the values of
// transitionColumns.
type transitionValues struct {
	job, exec                      pgtype.UUID
	version                        int64
	from, event, to, actor, reason string
	at                             tsPair
}

// set makes v the row of t, a transition of the job jobID.
func (v *transitionValues) set(jobID uuid.UUID, t *jobstate.Transition) {
	*v = transitionValues{
		job: pgID(jobID), version: t.Version, from: string(t.From), event: string(t.Event), to: string(t.To),
		actor: t.Actor, reason: t.Reason, exec: encUUID(t.ExecID), at: pairOf(t.At),
	}
}

// appendPtrs appends to dst the address of each value of v, in the order
// of transitionColumns.
func (v *transitionValues) appendPtrs(dst []any) []any {
	return append(dst, &v.job, &v.version, &v.from, &v.event, &v.to, &v.actor, &v.reason, &v.exec, &v.at.ts, &v.at.ns)
}

// derefAll appends to dst the value each of ptrs (appendPtrs' addresses)
// points to, boxed for a statement's arguments.
func derefAll(dst, ptrs []any) []any {
	for _, p := range ptrs {
		dst = append(dst, deref(p))
	}
	return dst
}

// deref returns the value p, one of appendPtrs' addresses, points to.
func deref(p any) any {
	switch p := p.(type) {
	case *pgtype.UUID:
		return *p
	case *pgtype.Timestamptz:
		return *p
	case *string:
		return *p
	case *[]byte:
		return *p
	case *int64:
		return *p
	case *int16:
		return *p
	case *float64:
		return *p
	case *bool:
		return *p
	}
	// Every field of rowValues and transitionValues is of a type above
	// (TestDerefCoversEveryField).
	panic(fmt.Sprintf("pgstore: no value behind %T", p))
}
