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
// statement (commit_planned) inside the savepoint pgstore_plans, and
// hands each member whose plan applied a turn to run its effect on its
// job as written. If every effect succeeds, those members are done and
// answered after the group's COMMIT; if one fails, the group rolls back
// to the savepoint (the plans' writes and every effect's) and all its
// planned members take turns with their functions, as Updates. A member
// whose job the plan does not cover, or another transaction holds, takes
// a turn with its function too.

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
// as written and the transition the plan wrote.
type plannedDone struct {
	m    *member
	job  jobstate.Job
	recs []jobstate.Transition
}

// runPlanned applies the plans of the planned members of ms in tx (see
// above) and returns the members left for the group's functions and the
// members done. err is the driver's error, with which the transaction is
// to be rolled back and every member of ms run alone.
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
	failed := false
	var took []*member
	for i, m := range planned {
		d, ok := found[int64(i)]
		if !ok {
			rest = append(rest, m)
			continue
		}
		took = append(took, m)
		if failed {
			continue
		}
		lazy := newLazyTx(tx)
		m.turn <- turn{planned: &d.job, fctx: s.fnContext(m.ctx, lazy), sp: lazy}
		if r := <-m.ret; r.err != nil {
			failed = true
			continue
		}
		d.m = m
		done = append(done, d)
	}
	if failed {
		tx.plans.rolledBack()
		if _, err := tx.q.Exec(ctx, "ROLLBACK TO SAVEPOINT pgstore_plans; RELEASE SAVEPOINT pgstore_plans"); err != nil {
			return ms, nil, err
		}
		return append(rest, took...), nil, nil
	}
	tx.queue("RELEASE SAVEPOINT pgstore_plans")
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
	var ord int64
	var from, actor string
	dest := append(append(r.dest(), x.dest()...), &ord, &from, &actor)
	for rows.Next() {
		r, x = jobRow{}, execRow{}
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
		found[ord] = plannedDone{job: j, recs: []jobstate.Transition{rec}}
	}
	return rows.Err()
}
