package pgstore

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// Writes of many jobs at once (a claim batch, a group's members): one
// UPDATE of every job (with its executions) from arrays, one INSERT of
// every transition, one INSERT of every effect and one recomputation of
// the key heads they touch, instead of two or more statements per job,
// the updates planned without regard to statistics (pinPlans). The
// server's cost per statement is most of the cost of a small write.

// SQL types of jobWriteColumns, in order.
var jobWriteTypes = []string{
	"uuid", "text", "text", "text", "text", "bytea", "bytea", "int8", "int8",
	"int8", "int8", "text", "int8", "float8", "int8",
	"text", "bool", "text", "text", "text", "text", "text",
	"int8", "timestamptz", "int2", "timestamptz", "int2", "timestamptz", "int2",
	"timestamptz", "int2", "timestamptz", "int2", "timestamptz", "int2", "int8",
	"timestamptz", "int2", "timestamptz", "int2", "uuid",
	"bool", "timestamptz", "int2", "int8", "timestamptz", "int2",
	"text", "timestamptz", "int2", "text",
}

var (
	transitionTypes = []string{"uuid", "int8", "text", "text", "text", "text", "text", "uuid", "timestamptz", "int2"}
	effectTypes     = []string{"uuid", "text", "uuid", "text", "timestamptz", "int2"}
)

// columns turns rows of values into one typed slice per column, for
// unnest: types are the columns' SQL types.
func columns(rows [][]any, types []string) ([]any, error) {
	out := make([]any, len(types))
	for c, t := range types {
		var err error
		switch t {
		case "uuid":
			out[c], err = column(rows, c, asUUID)
		case "text":
			out[c], err = column(rows, c, as[string])
		case "bytea":
			out[c], err = column(rows, c, asBytes)
		case "int8":
			out[c], err = column(rows, c, asInt64)
		case "int2":
			out[c], err = column(rows, c, as[int16])
		case "float8":
			out[c], err = column(rows, c, as[float64])
		case "bool":
			out[c], err = column(rows, c, as[bool])
		case "timestamptz":
			out[c], err = column(rows, c, as[pgtype.Timestamptz])
		default:
			err = fmt.Errorf("column %d: unknown type %s", c, t)
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
	}
	return out, nil
}

// column is column c of rows, each value converted by conv.
func column[T any](rows [][]any, c int, conv func(any) (T, bool)) ([]T, error) {
	v := make([]T, len(rows))
	for i, r := range rows {
		x, ok := conv(r[c])
		if !ok {
			return nil, fmt.Errorf("column %d: %T is not a %T", c, r[c], x)
		}
		v[i] = x
	}
	return v, nil
}

func as[T any](x any) (T, bool) {
	v, ok := x.(T)
	return v, ok
}

func asUUID(x any) (pgtype.UUID, bool) {
	switch x := x.(type) {
	case uuid.UUID:
		return pgtype.UUID{Bytes: x, Valid: true}, true
	case pgtype.UUID:
		return x, true
	}
	return pgtype.UUID{}, false
}

// asBytes takes nil as a NULL.
func asBytes(x any) ([]byte, bool) {
	if x == nil {
		return nil, true
	}
	b, ok := x.([]byte)
	return b, ok
}

func asInt64(x any) (int64, bool) {
	switch x := x.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

// multiWrite is the writes of several jobs, each over its current
// version, to be queued together.
type multiWrite struct {
	jobs    [][]any
	outs    []*jobstate.Job
	written []jobstate.Job // the jobs as written, with payload and result
	hist    [][]any
	effects [][]any
	heads   []headKey // the triples of key_heads the writes touch
	ready   map[string]bool
}

// add adds w over cur (already checked), whose executions were known, its
// job as written to go to *out.
func (m *multiWrite) add(cur *jobstate.Job, known []jobstate.Execution, w *jobstate.Write, out *jobstate.Job) error {
	if m.ready == nil {
		m.ready = map[string]bool{}
	}
	id := w.Job.ID
	args, err := jobArgs(&w.Job, mergeExecs(known, w.Executions))
	if err != nil {
		return err
	}
	payload, result, newPayload, newResult := unchangedBlobs(cur, args)
	m.jobs = append(m.jobs, append(args, cur.Version, newPayload, newResult))
	m.outs = append(m.outs, out)
	j := asStored(w.Job)
	j.Payload, j.Result = payload, result
	m.written = append(m.written, j)
	for i := range w.Transitions {
		m.hist = append(m.hist, transitionArgs(id, &w.Transitions[i]))
	}
	for i := range w.Effects {
		m.effects = append(m.effects, effectArgs(id, &w.Effects[i]))
	}
	m.heads = append(m.heads, touchedHeads(cur, &w.Job)...)
	if becameReady(cur, &w.Job) {
		m.ready[w.Job.Machine] = true
	}
	return nil
}

func (m *multiWrite) len() int { return len(m.jobs) }

// queue queues the statements of every write added on b.
func (s *Store) queueMulti(b *pgx.Batch, p *plans, m *multiWrite) error {
	if m.len() == 0 {
		return nil
	}
	cols, err := columns(m.jobs, append(append([]string{}, jobWriteTypes...), "int8", "bool", "bool"))
	if err != nil {
		return err
	}
	// The statement returns only its guard (a division by zero unless
	// every job was updated at the version read): the jobs as written are
	// known here, as the server stores them (asStored), so that none is
	// sent back and decoded.
	outs, written := m.outs, m.written
	pinned := p.pin(b)
	b.Queue(s.sql.updateMany, append(cols, int64(m.len()))...).QueryRow(func(row pgx.Row) error {
		var ok int64
		if err := row.Scan(&ok); err != nil {
			return err
		}
		for i := range outs {
			*outs[i] = written[i]
		}
		return nil
	})
	if len(m.hist) > 0 {
		cols, err := columns(m.hist, transitionTypes)
		if err != nil {
			return err
		}
		b.Queue(s.sql.insertTransitions, cols...)
	}
	if len(m.effects) > 0 {
		cols, err := columns(m.effects, effectTypes)
		if err != nil {
			return err
		}
		b.Queue(s.sql.insertEffects, cols...)
	}
	s.queueHeads(b, p, m.heads, true)
	p.unpin(b, pinned)
	if !s.opts.NoNotify {
		for machine := range m.ready {
			b.Queue(s.sql.notify, s.sql.channel, notifyPayload(machine))
		}
	}
	return nil
}
