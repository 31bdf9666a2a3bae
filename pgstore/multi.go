package pgstore

import (
	"fmt"
	"slices"

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
	"text", "timestamptz", "int2",
	"text", "uuid", "int8", "text", "text", "timestamptz", "int2", "timestamptz", "int2",
	"timestamptz", "int2", "timestamptz", "int2", "timestamptz", "int2", "text",
}

var (
	transitionTypes = []string{"uuid", "int8", "text", "text", "text", "text", "text", "uuid", "timestamptz", "int2"}
	effectTypes     = []string{"uuid", "text", "uuid", "text", "timestamptz", "int2"}
)

// columns turns rows of values into one array per column, for unnest:
// types are the SQL types of the rows' columns. It returns the arrays of
// the columns in pick, in its order, or of every column when pick is nil.
func columns(rows [][]any, types []string, pick []int) ([]any, error) {
	if pick == nil {
		pick = make([]int, len(types))
		for c := range pick {
			pick[c] = c
		}
	}
	out := make([]any, len(pick))
	for k, c := range pick {
		var err error
		switch t := types[c]; t {
		case "uuid":
			out[k], err = column(rows, c, as[pgtype.UUID])
		case "text":
			out[k], err = column(rows, c, asText)
		case "bytea":
			out[k], err = column(rows, c, asBytes)
		case "int8":
			out[k], err = column(rows, c, asInt8)
		case "int2":
			out[k], err = column(rows, c, asInt2)
		case "float8":
			out[k], err = column(rows, c, asFloat8)
		case "bool":
			out[k], err = column(rows, c, asBool)
		case "timestamptz":
			out[k], err = column(rows, c, as[pgtype.Timestamptz])
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
func column[T any](rows [][]any, c int, conv func(any) (T, bool)) (elems[T], error) {
	v := make(elems[T], len(rows))
	for i, r := range rows {
		x, ok := conv(r[c])
		if !ok {
			return nil, fmt.Errorf("column %d: %T is not a %T", c, r[c], x)
		}
		v[i] = x
	}
	return v, nil
}

// elems is a column sent as a one-dimensional PostgreSQL array. pgx is
// handed each element by its address, and T is a type whose pointer
// implements the pgtype valuer of the column's SQL type (pgtype.Int8,
// pgtype.Text, blob, ...): an element is encoded from where it is,
// without being copied into an interface value of its own.
type elems[T any] []T

// Dimensions implements pgtype.ArrayGetter.
func (a elems[T]) Dimensions() []pgtype.ArrayDimension {
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index implements pgtype.ArrayGetter.
func (a elems[T]) Index(i int) any { return &a[i] }

// IndexType implements pgtype.ArrayGetter.
func (a elems[T]) IndexType() any { return new(T) }

// blob is a bytea value: NULL when nil.
type blob []byte

// BytesValue implements pgtype.BytesValuer.
func (b blob) BytesValue() ([]byte, error) { return b, nil }

func as[T any](x any) (T, bool) {
	v, ok := x.(T)
	return v, ok
}

func asText(x any) (pgtype.Text, bool) {
	v, ok := x.(string)
	return pgtype.Text{String: v, Valid: true}, ok
}

// asBytes takes nil as a NULL.
func asBytes(x any) (blob, bool) {
	if x == nil {
		return nil, true
	}
	b, ok := x.([]byte)
	return b, ok
}

func asInt8(x any) (pgtype.Int8, bool) {
	switch x := x.(type) {
	case int64:
		return pgtype.Int8{Int64: x, Valid: true}, true
	case int:
		return pgtype.Int8{Int64: int64(x), Valid: true}, true
	}
	return pgtype.Int8{}, false
}

func asInt2(x any) (pgtype.Int2, bool) {
	v, ok := x.(int16)
	return pgtype.Int2{Int16: v, Valid: true}, ok
}

func asFloat8(x any) (pgtype.Float8, bool) {
	v, ok := x.(float64)
	return pgtype.Float8{Float64: v, Valid: true}, ok
}

func asBool(x any) (pgtype.Bool, bool) {
	v, ok := x.(bool)
	return pgtype.Bool{Bool: v, Valid: true}, ok
}

// multiWrite is the writes of several jobs, each over its current
// version, to be queued together.
type multiWrite struct {
	cold    bool // some write changes a column update_many_hot leaves alone
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
	execs := mergeExecs(known, w.Executions)
	args, err := jobArgs(&w.Job, execs)
	if err != nil {
		return err
	}
	payload, result, newPayload, newResult := unchangedBlobs(cur, args)
	if newPayload || !coldSame(cur, &w.Job) || !sameEarlier(known, execs) {
		m.cold = true
	}
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

// reserve makes room for n more writes (each with a transition), so that
// adding them does not grow the slices one doubling at a time.
func (m *multiWrite) reserve(n int) {
	m.jobs = slices.Grow(m.jobs, n)
	m.outs = slices.Grow(m.outs, n)
	m.written = slices.Grow(m.written, n)
	m.hist = slices.Grow(m.hist, n)
}

// queue queues the statements of every write added on b.
func (s *Store) queueMulti(b *pgx.Batch, p *plans, m *multiWrite) error {
	if m.len() == 0 {
		return nil
	}
	// Every column of a job's update, or those of update_many_hot when no
	// write changes the others.
	update, pick := s.sql.updateMany, []int(nil)
	if !m.cold {
		update, pick = s.sql.updateManyHot, hotIndex
	}
	cols, err := columns(m.jobs, slices.Concat(jobWriteTypes, []string{"int8", "bool", "bool"}), pick)
	if err != nil {
		return err
	}
	// The statement returns only its guard (a division by zero unless
	// every job was updated at the version read): the jobs as written are
	// known here, as the server stores them (asStored), so that none is
	// sent back and decoded.
	outs, written := m.outs, m.written
	pinned := p.pin(b)
	b.Queue(update, append(cols, int64(m.len()))...).QueryRow(func(row pgx.Row) error {
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
		cols, err := columns(m.hist, transitionTypes, nil)
		if err != nil {
			return err
		}
		b.Queue(s.sql.insertTransitions, cols...)
	}
	if len(m.effects) > 0 {
		cols, err := columns(m.effects, effectTypes, nil)
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
