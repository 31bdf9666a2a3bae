package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// Commit plans in a group (UpdatePlanned): before its other members lock
// and read their jobs, a group applies its planned members' plans in one
// statement (commit_planned), and hands each member whose plan applied a
// turn to run its effect on its job as written, in a savepoint of the
// effect's own. A member whose effect succeeds is done, and answered
// after the group's COMMIT. A member whose effect fails has its effect's
// writes undone (its savepoint), its job put back as it was before the
// plan wrote it (uncommit_planned: the values commit_planned returned),
// and is answered with the effect's error at once, as an Update whose
// function failed; no other member's effect runs again. A member whose
// job the plan does not cover, or another transaction holds, takes a
// turn with its function.

// AppliesCommitPlans implements jobstate.CommitPlanner: a store with group
// commit applies commit plans in its groups.
func (s *Store) AppliesCommitPlans() bool { return s.group != nil }

// UpdatePlanned implements jobstate.CommitPlanner: through a group with
// group commit (see above), else as Update, with fn.
func (s *Store) UpdatePlanned(ctx context.Context, id uuid.UUID, p *jobstate.CommitPlan, effect jobstate.EffectFunc, fn jobstate.UpdateFunc) (jobstate.Job, []jobstate.Transition, error) {
	if err := ctx.Err(); err != nil {
		return jobstate.Job{}, nil, err
	}
	if fn == nil || p == nil {
		return jobstate.Job{}, nil, fmt.Errorf("%w: nil plan or update function", jobstate.ErrInvalidArgument)
	}
	if s.group == nil || outer(ctx, s.pool) != nil {
		j, err := s.Update(ctx, id, fn)
		return j, nil, err
	}
	return s.group.updatePlanned(ctx, id, p, effect, fn)
}

// plannedDone is a planned member whose plan its group applied: its job
// as written, the transition the plan wrote, and the arguments of
// uncommit_planned that put its job back (uncommitParams).
type plannedDone struct {
	m    *member
	job  jobstate.Job
	recs []jobstate.Transition
	undo []any
}

// uncommitParams are the parameters of uncommit_planned, in the order
// scanPlanned gives their values.
var uncommitParams = []string{
	"id", "written", "from_state", "kind", "outcome", "version", "updated_at", "updated_ns",
	"completed_at", "completed_ns", "result", "last_error", "error_class", "lease_expires_at", "lease_expires_ns",
	"heartbeat_at", "heartbeat_ns", "sweep_failures", "sweep_retry_at", "sweep_retry_ns", "wake_at", "wake_ns",
	"exec_status", "exec_started_at", "exec_started_ns", "exec_finished_at", "exec_finished_ns",
}

// runPlanned applies the plans of the planned members of ms in tx (see
// above) and returns the members left for the group's functions and the
// members done. A member whose effect fails has its job put back as it
// was (uncommit_planned) and is answered with the effect's error. err is
// the driver's error, with which the transaction is to be rolled back:
// the members of rest then run alone, and those of done are answered
// with it (their effects ran).
func (s *Store) runPlanned(tx *connTx, ms []*member) (rest []*member, done []plannedDone, err error) {
	var planned []*member
	for _, m := range ms {
		if m.plan != nil {
			planned = append(planned, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(planned) == 0 {
		return ms, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	found := make(map[int64]plannedDone, len(planned))
	b := &pgx.Batch{}
	pinned := tx.plans.pin(b)
	b.Queue("SAVEPOINT pgstore_plans")
	b.Queue(s.sql.commitPlanned, plannedArgs(planned)...).Query(func(rows pgx.Rows) error {
		return scanPlanned(rows, found)
	})
	tx.plans.unpin(b, pinned)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return ms, nil, err
	}
	// Its RELEASE goes in front of the group's next statements: a
	// connection lost while the effects ran is then reported by it, before
	// the COMMIT is sent, as a transaction that did not commit.
	defer tx.queue("RELEASE SAVEPOINT pgstore_plans")
	for i, m := range planned {
		d, ok := found[int64(i)]
		if !ok {
			rest = append(rest, m)
			continue
		}
		lazy := newLazyTx(tx)
		m.turn <- turn{planned: &d.job, fctx: s.fnContext(m.ctx, lazy), sp: lazy}
		r := <-m.ret
		if r.err == nil {
			d.m = m
			done = append(done, d)
			continue
		}
		// The effect's own writes are undone (its savepoint); put the
		// job back, and answer the member with the effect's error.
		if err := tx.batchOf(ctx, s.sql.uncommitPlanned, d.undo).Close(); err != nil {
			m.res <- result{err: wrapErr(m.ctx, "update", err, inTransaction)}
			// The members after it have had no turn: they run alone.
			return append(rest, planned[i+1:]...), done, err
		}
		m.res <- result{err: r.err}
	}
	return rest, done, nil
}

// plannedArgs returns the arguments of commit_planned for the plans of
// ms, member i at place i. Members whose plans share their moves (those
// of one engine) share one set of them.
func plannedArgs(ms []*member) []any {
	n := len(ms)
	ords, ids, execs, tokens := make([]int64, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]int64, n)
	actors, results := make([]string, n), make([][]byte, n)
	nowAt, nowNs, sets := make([]pgtype.Timestamptz, n), make([]int16, n), make([]int64, n)
	var known [][]jobstate.FinishMove
	var mSets []int64
	var machines, froms, tos, outcomes []string
	var requireStarts []bool
	for i, m := range ms {
		p := m.plan
		ords[i], ids[i], execs[i], tokens[i] = int64(i), pgID(m.id), pgID(p.ExecID), int64(p.Token)
		actors[i], results[i] = p.Actor, p.Result
		nowAt[i], nowNs[i] = encTime(p.Now)
		k := slices.IndexFunc(known, func(mv []jobstate.FinishMove) bool { return slices.Equal(mv, p.Moves) })
		if k < 0 {
			k = len(known)
			known = append(known, p.Moves)
			for _, mv := range p.Moves {
				mSets = append(mSets, int64(k))
				machines = append(machines, mv.Machine)
				froms = append(froms, string(mv.From))
				tos = append(tos, string(mv.To))
				outcomes = append(outcomes, string(mv.Outcome))
				requireStarts = append(requireStarts, mv.RequireStart)
			}
		}
		sets[i] = int64(k)
	}
	return []any{ords, ids, execs, tokens, actors, results, nowAt, nowNs, sets, mSets, machines, froms, tos, outcomes, requireStarts}
}

// scanPlanned reads commit_planned's rows into found, by member.
func scanPlanned(rows pgx.Rows, found map[int64]plannedDone) error {
	defer rows.Close()
	var r jobRow
	var x execRow
	var ord, oldVersion, oldSweeps int64
	var from, actor, oldStatus, oldKind, oldOutcome, oldLastError, oldClass string
	var oldResult []byte
	var oldUpdated, oldCompleted, oldLease, oldHeartbeat, oldSweepRetry, oldWake, oldStarted, oldFinished tsPair
	dest := append(append(r.dest(), x.dest()...), &ord, &from, &actor, &oldStatus, &oldVersion, &oldKind,
		&oldOutcome, &oldUpdated.ts, &oldUpdated.ns, &oldCompleted.ts, &oldCompleted.ns, &oldResult,
		&oldLastError, &oldClass, &oldLease.ts, &oldLease.ns, &oldHeartbeat.ts, &oldHeartbeat.ns,
		&oldSweeps, &oldSweepRetry.ts, &oldSweepRetry.ns, &oldWake.ts, &oldWake.ns,
		&oldStarted.ts, &oldStarted.ns, &oldFinished.ts, &oldFinished.ns)
	for rows.Next() {
		r, x, oldResult = jobRow{}, execRow{}, nil
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		j, err := r.job()
		if err != nil {
			return err
		}
		rec := jobstate.Transition{
			JobID: j.ID, Version: j.Version, From: jobstate.State(from), Event: jobstate.EventSucceed, To: j.State,
			Actor: actor, ExecID: decUUID(x.id), At: x.ended.time(),
		}
		undo := []any{pgID(j.ID), j.Version, from, oldKind, oldOutcome, oldVersion, oldUpdated.ts, oldUpdated.ns,
			oldCompleted.ts, oldCompleted.ns, oldResult, oldLastError, oldClass, oldLease.ts, oldLease.ns,
			oldHeartbeat.ts, oldHeartbeat.ns, oldSweeps, oldSweepRetry.ts, oldSweepRetry.ns, oldWake.ts, oldWake.ns,
			oldStatus, oldStarted.ts, oldStarted.ns, oldFinished.ts, oldFinished.ns}
		found[ord] = plannedDone{job: j, recs: []jobstate.Transition{rec}, undo: undo}
	}
	return rows.Err()
}
