package sqlitestore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
)

// maxUnionStates bounds the states a listing reads one index range each
// for; with more, it filters one range by state instead.
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
	stmt, args, err := listSQL(q)
	if err != nil {
		return nil, err
	}
	db, err := s.q(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, s.fail(ctx, "list", err)
	}
	out, err := scanJobs(rows)
	if err != nil {
		return nil, s.fail(ctx, "list", err)
	}
	return out, nil
}

// listSQL returns the statement of a listing and its arguments.
func listSQL(q jobstate.ListQuery) (string, []any, error) {
	if q.Limit < 1 || q.Limit > jobstate.MaxListLimit+1 {
		return "", nil, fmt.Errorf("%w: list: limit %d", jobstate.ErrInvalidArgument, q.Limit)
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("?%d", len(args))
	}
	list := func(n int, v func(i int) any) string {
		marks := make([]string, n)
		for i := range marks {
			marks[i] = arg(v(i))
		}
		return "(" + strings.Join(marks, ", ") + ")"
	}
	var where []string
	if q.Machine != "" {
		where = append(where, "machine = "+arg(q.Machine))
	}
	if len(q.Kinds) > 0 {
		for _, k := range q.Kinds {
			if !k.Valid() {
				return "", nil, fmt.Errorf("%w: list: invalid kind %d", jobstate.ErrInvalidArgument, uint8(k))
			}
		}
		where = append(where, "kind IN "+list(len(q.Kinds), func(i int) any { return int64(q.Kinds[i]) }))
	}
	if len(q.Outcomes) > 0 {
		where = append(where, "outcome IN "+list(len(q.Outcomes), func(i int) any { return string(q.Outcomes[i]) }))
	}
	if q.Owner != "" {
		where = append(where, "owner <> '' AND owner = "+arg(q.Owner))
	}
	if q.Key != "" {
		where = append(where, "idempotency_key <> '' AND idempotency_key = "+arg(q.Key))
	}
	timeRange := func(col string, from, to time.Time) {
		if !from.IsZero() {
			sec, ns := encTime(from)
			where = append(where, fmt.Sprintf("(%s_s, %s_ns) >= (%s, %s)", col, col, arg(sec), arg(ns)))
		}
		if !to.IsZero() {
			sec, ns := encTime(to)
			where = append(where, fmt.Sprintf("(%s_s, %s_ns) < (%s, %s)", col, col, arg(sec), arg(ns)))
		}
	}
	timeRange("created", q.CreatedFrom, q.CreatedTo)
	timeRange("updated", q.UpdatedFrom, q.UpdatedTo)
	timeRange("completed", q.CompletedFrom, q.CompletedTo)
	if !q.CompletedFrom.IsZero() || !q.CompletedTo.IsZero() {
		where = append(where, "kind = 5")
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
		sec, ns := encTime(q.After.At)
		where = append(where, fmt.Sprintf("(%s_s, %s_ns, id) %s (%s, %s, %s)", col, col, cmp, arg(sec), arg(ns), arg(idArg(q.After.ID))))
	}
	order := fmt.Sprintf(" ORDER BY %s_s %s, %s_ns %s, id %s LIMIT %s", col, dir, col, dir, dir, arg(q.Limit))
	base := `SELECT ` + jobColumns + ` FROM jobs`
	var stmt string
	switch {
	case len(q.States) == 1:
		where = append(where, "state = "+arg(string(q.States[0])))
		stmt = base + whereClause(where) + order
	case len(q.States) > 1 && len(q.States) <= maxUnionStates:
		parts := make([]string, len(q.States))
		for i, st := range q.States {
			w := append(append([]string(nil), where...), "state = "+arg(string(st)))
			parts[i] = "SELECT * FROM (" + base + whereClause(w) + order + ")"
		}
		stmt = "SELECT * FROM (" + strings.Join(parts, " UNION ALL ") + ")" + order
	case len(q.States) > maxUnionStates:
		where = append(where, "state IN "+list(len(q.States), func(i int) any { return string(q.States[i]) }))
		stmt = base + whereClause(where) + order
	default:
		stmt = base + whereClause(where) + order
	}
	return stmt, args, nil
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}
