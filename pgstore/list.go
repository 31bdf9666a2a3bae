package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// maxUnionStates bounds the states a listing queries one index range
// each for; with more, it filters one range by state instead.
const maxUnionStates = 16

// List implements jobstate.Lister with one statement. Filters on machine
// and state, owner or key, and the creation or update order, follow an
// index (machine, state, created), (owner, created), (key, created),
// (created) or (updated), so that a page costs O(page) rows read: with
// several states, each state's range is read up to one page and the
// ranges merged.
func (s *Store) List(ctx context.Context, q jobstate.ListQuery) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sql, args, err := s.listSQL(q)
	if err != nil {
		return nil, err
	}
	// The listing is planned like the claim (pinPlans): a walk of the
	// index in the page's order, whatever the statistics say, so that a
	// table filled since it was last analyzed is not read whole for each
	// page. The batch is one implicit transaction (or runs in the
	// caller's), which the transaction-local settings last.
	on := s.q(ctx)
	p := plansOf(on)
	b := &pgx.Batch{}
	pinned := p.pin(b)
	b.Queue(sql, args...)
	restored := p.unpin(b, pinned)
	br := on.SendBatch(ctx, b)
	out, err := readList(br, pinned, restored)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, s.fail(ctx, "list", err)
	}
	return out, nil
}

// readList reads the answers of List's batch: the jobs of the page.
// pinned and restored tell whether pinPlans and restorePlans were queued.
func readList(br pgx.BatchResults, pinned, restored bool) ([]jobstate.Job, error) {
	if err := skipPlan(br, pinned); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out, err := scanJobs(rows)
	if err != nil {
		return nil, err
	}
	if err := skipPlan(br, restored); err != nil {
		return nil, err
	}
	return out, nil
}

// listSQL returns the statement of a listing and its arguments.
func (s *Store) listSQL(q jobstate.ListQuery) (string, []any, error) {
	if q.Limit < 1 || q.Limit > jobstate.MaxListLimit+1 {
		return "", nil, fmt.Errorf("%w: list: limit %d", jobstate.ErrInvalidArgument, q.Limit)
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var where []string
	if q.Machine != "" {
		where = append(where, "machine = "+arg(q.Machine))
	}
	if len(q.Kinds) > 0 {
		names := make([]string, 0, len(q.Kinds))
		for _, k := range q.Kinds {
			name, err := encKind(k)
			if err != nil {
				return "", nil, err
			}
			names = append(names, name)
		}
		where = append(where, "kind = ANY ("+arg(names)+")")
	}
	if len(q.Outcomes) > 0 {
		outs := make([]string, len(q.Outcomes))
		for i, o := range q.Outcomes {
			outs[i] = string(o)
		}
		where = append(where, "outcome = ANY ("+arg(outs)+")")
	}
	if q.Owner != "" {
		where = append(where, "owner <> '' AND owner = "+arg(q.Owner))
	}
	if q.Key != "" {
		where = append(where, "idempotency_key <> '' AND idempotency_key = "+arg(q.Key))
	}
	timeRange := func(col string, from, to time.Time) {
		if !from.IsZero() {
			at, ns := encTime(from)
			where = append(where, fmt.Sprintf("(%s_at, %s_ns) >= (%s, %s)", col, col, arg(at), arg(ns)))
		}
		if !to.IsZero() {
			at, ns := encTime(to)
			where = append(where, fmt.Sprintf("(%s_at, %s_ns) < (%s, %s)", col, col, arg(at), arg(ns)))
		}
	}
	timeRange("created", q.CreatedFrom, q.CreatedTo)
	timeRange("updated", q.UpdatedFrom, q.UpdatedTo)
	timeRange("completed", q.CompletedFrom, q.CompletedTo)
	if !q.CompletedFrom.IsZero() || !q.CompletedTo.IsZero() {
		where = append(where, "kind = 'terminal'")
	}
	col := "created"
	if q.Order == jobstate.OrderUpdated {
		col = "updated"
	}
	dir, cmp := "ASC", ">"
	if q.Desc {
		dir, cmp = "DESC", "<"
	}
	if q.After != (jobstate.ListCursor{}) {
		at, ns := encTime(q.After.At)
		where = append(where, fmt.Sprintf("(%s_at, %s_ns, id) %s (%s, %s, %s)", col, col, cmp, arg(at), arg(ns), arg(pgID(q.After.ID))))
	}
	order := fmt.Sprintf(" ORDER BY %s_at %s, %s_ns %s, id %s LIMIT %s", col, dir, col, dir, dir, arg(q.Limit))
	var sql string
	switch {
	case len(q.States) == 1:
		where = append(where, "state = "+arg(string(q.States[0])))
		sql = s.sql.list + whereClause(where) + order
	case len(q.States) > 1 && len(q.States) <= maxUnionStates:
		parts := make([]string, len(q.States))
		for i, st := range q.States {
			w := append(append([]string(nil), where...), "state = "+arg(string(st)))
			parts[i] = "(" + s.sql.list + whereClause(w) + order + ")"
		}
		sql = "SELECT * FROM (" + strings.Join(parts, " UNION ALL ") + ") page" + order
	case len(q.States) > maxUnionStates:
		states := make([]string, len(q.States))
		for i, st := range q.States {
			states[i] = string(st)
		}
		where = append(where, "state = ANY ("+arg(states)+")")
		sql = s.sql.list + whereClause(where) + order
	default:
		sql = s.sql.list + whereClause(where) + order
	}
	return sql, args, nil
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}
