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
// as written, the transition the plan wrote, and what the plan replaced.
type plannedDone struct {
	m    *member
	job  jobstate.Job
	recs []jobstate.Transition
	old  replaced
}

// replaced holds the values commit_planned replaced in a job's row: the
// state it left, and the columns it set that uncommit_planned puts back.
type replaced struct {
	from, status, kind, outcome, lastError, class string
	sweeps                                        int64
	result                                        []byte
	updated, completed, lease, heartbeat          tsPair
	sweepRetry, wake, started, finished           tsPair
}

// undoArgs returns the arguments of uncommit_planned (uncommitParams)
// that put d's job back as it was.
func (d *plannedDone) undoArgs() []any {
	o := &d.old
	return []any{pgID(d.job.ID), d.job.Version, o.from, o.kind, o.outcome, o.updated.ts, o.updated.ns,
		o.completed.ts, o.completed.ns, o.result, o.lastError, o.class, o.lease.ts, o.lease.ns,
		o.heartbeat.ts, o.heartbeat.ns, o.sweeps, o.sweepRetry.ts, o.sweepRetry.ns, o.wake.ts, o.wake.ns,
		o.status, o.started.ts, o.started.ns, o.finished.ts, o.finished.ns}
}

// uncommitParams are the parameters of uncommit_planned, in the order
// undoArgs gives their values.
var uncommitParams = []string{
	"id", "written", "from_state", "kind", "outcome", "updated_at", "updated_ns",
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
func (s *Store) runPlanned(tx *connTx, ms []*member) (rest []*member, done []*plannedDone, err error) {
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
	found := make([]plannedDone, len(planned)) // by member; m set when written
	b := &pgx.Batch{}
	pinned := tx.plans.pin(b)
	b.Queue("SAVEPOINT pgstore_plans")
	b.Queue(s.sql.commitPlanned, plannedArgs(planned)...).Query(func(rows pgx.Rows) error {
		return scanPlanned(rows, found, planned)
	})
	tx.plans.unpin(b, pinned)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return ms, nil, err
	}
	// Its RELEASE goes in front of the group's next statements: a
	// connection lost while the effects ran is then reported by it, before
	// the COMMIT is sent, as a transaction that did not commit.
	defer tx.queue("RELEASE SAVEPOINT pgstore_plans")
	done = make([]*plannedDone, 0, len(planned))
	for i, m := range planned {
		d := &found[i]
		if d.m == nil {
			rest = append(rest, m)
			continue
		}
		lazy := newLazyTx(tx)
		m.turn <- turn{planned: &d.job, fctx: s.fnContext(m.ctx, lazy), sp: lazy}
		r := <-m.ret
		if r.err == nil {
			done = append(done, d)
			continue
		}
		// The effect's own writes are undone (its savepoint); put the
		// job back, and answer the member with the effect's error.
		if err := tx.batchOf(ctx, s.sql.uncommitPlanned, d.undoArgs()).Close(); err != nil {
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

// scanPlanned reads commit_planned's rows into found, by member, with
// the members ms.
func scanPlanned(rows pgx.Rows, found []plannedDone, ms []*member) error {
	defer rows.Close()
	var r jobRow
	var x execRow
	var ord int64
	var actor string
	var o replaced
	dest := append(append(r.dest(), x.dest()...), &ord, &o.from, &actor, &o.status, &o.kind,
		&o.outcome, &o.updated.ts, &o.updated.ns, &o.completed.ts, &o.completed.ns, &o.result,
		&o.lastError, &o.class, &o.lease.ts, &o.lease.ns, &o.heartbeat.ts, &o.heartbeat.ns,
		&o.sweeps, &o.sweepRetry.ts, &o.sweepRetry.ns, &o.wake.ts, &o.wake.ns,
		&o.started.ts, &o.started.ns, &o.finished.ts, &o.finished.ns)
	for rows.Next() {
		r, x, o.result = jobRow{}, execRow{}, nil
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if ord < 0 || ord >= int64(len(found)) {
			return fmt.Errorf("commit_planned: member %d of %d", ord, len(found))
		}
		j, err := r.job()
		if err != nil {
			return err
		}
		rec := jobstate.Transition{
			JobID: j.ID, Version: j.Version, From: jobstate.State(o.from), Event: jobstate.EventSucceed, To: j.State,
			Actor: actor, ExecID: decUUID(x.id), At: x.ended.time(),
		}
		found[ord] = plannedDone{m: ms[ord], job: j, recs: []jobstate.Transition{rec}, old: o}
	}
	return rows.Err()
}
