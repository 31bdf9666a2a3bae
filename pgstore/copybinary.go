package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobstate/jobstate"
)

// New jobs and their history go to the server as COPY data in
// PostgreSQL's binary format, written here from the rows' typed fields
// (copyIn), and sent on the connection itself (bounded.CopyFrom). pgx's
// own COPY would box every value, look up its encoding, and first ask the
// server for the columns' types in a round trip of its own.

// jobCopyTypes are the SQL types of jobWriteColumns in the table:
// jobWriteTypes, but earlier_execs, which statements send as text, is
// jsonb.
var jobCopyTypes = func() []string {
	t := slices.Clone(jobWriteTypes)
	t[slices.Index(jobWriteNames, "earlier_execs")] = "jsonb"
	return t
}()

// binaryCopy is the data of a COPY FROM STDIN (FORMAT binary) of the
// columns cols, ready to send. It is a pgx.CopyFromSource only so that it
// passes through the transactions' CopyFrom: the store's connections
// (bounded) send it as it is, and pgx's own COPY, which would want its
// rows one value at a time, gets no row and fails.
type binaryCopy struct {
	cols []string
	rows int64
	data []byte
}

var errBinaryCopy = errors.New("pgstore: binary COPY data handed to a connection the store does not hold")

// Next implements pgx.CopyFromSource: there is no row to give pgx.
func (*binaryCopy) Next() bool { return false }

// Values implements pgx.CopyFromSource.
func (*binaryCopy) Values() ([]any, error) { return nil, errBinaryCopy }

// Err implements pgx.CopyFromSource: pgx's COPY of c fails.
func (*binaryCopy) Err() error { return errBinaryCopy }

// send runs the COPY of c into table on conn, and returns the rows copied.
func (c *binaryCopy) send(ctx context.Context, conn *pgconn.PgConn, table pgx.Identifier) (int64, error) {
	var sql strings.Builder
	sql.WriteString("COPY ")
	sql.WriteString(table.Sanitize())
	sql.WriteString(" (")
	for i, col := range c.cols {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString(pgx.Identifier{col}.Sanitize())
	}
	sql.WriteString(") FROM STDIN (FORMAT binary)")
	tag, err := conn.CopyFrom(ctx, bytes.NewReader(c.data), sql.String())
	if err != nil {
		return 0, err
	}
	if n := tag.RowsAffected(); n != c.rows {
		return n, fmt.Errorf("pgstore: COPY into %s took %d rows of %d", table.Sanitize(), n, c.rows)
	}
	return c.rows, nil
}

// copyWriter writes COPY data in the binary format: a header, each row as
// its count of fields and each field as its length (-1: NULL) and bytes
// in the type's binary form, and a trailer.
type copyWriter struct{ buf []byte }

// copyHeader is the binary format's signature, its flags (none) and the
// length of its header extension (none).
const copyHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// y2kMicros is 2000-01-01 00:00 UTC, a timestamptz's zero, in
// microseconds since the Unix epoch.
const y2kMicros = 946_684_800 * 1_000_000

func newCopyWriter(rows int) *copyWriter {
	w := &copyWriter{buf: make([]byte, 0, len(copyHeader)+2+rows*256)}
	w.buf = append(w.buf, copyHeader...)
	return w
}

func (w *copyWriter) startRow(fields int) {
	w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(fields))
}

func (w *copyWriter) null() { w.buf = binary.BigEndian.AppendUint32(w.buf, math.MaxUint32) }

func (w *copyWriter) fixed(n int) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(n)) }

// varlen writes a field of b and s (one of them empty), prefixed by
// prefix (jsonb's version) when not 0.
func (w *copyWriter) varlen(b []byte, s string, prefix byte) error {
	n := len(b) + len(s)
	if prefix != 0 {
		n++
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("%w: a value of %d bytes, more than a column holds", jobstate.ErrInvalidArgument, n)
	}
	w.fixed(n)
	if prefix != 0 {
		w.buf = append(w.buf, prefix)
	}
	w.buf = append(append(w.buf, b...), s...)
	return nil
}

// value writes the value p points to (an address appendPtrs returns) as
// a field of the SQL type sqlType.
func (w *copyWriter) value(sqlType string, p any) error {
	switch p := p.(type) {
	case *pgtype.UUID:
		if sqlType == "uuid" {
			if !p.Valid {
				w.null()
			} else {
				w.fixed(16)
				w.buf = append(w.buf, p.Bytes[:]...)
			}
			return nil
		}
	case *pgtype.Timestamptz:
		if sqlType == "timestamptz" {
			if !p.Valid {
				w.null()
				return nil
			}
			var us int64
			switch p.InfinityModifier {
			case pgtype.Infinity:
				us = math.MaxInt64
			case pgtype.NegativeInfinity:
				us = math.MinInt64
			default:
				us = p.Time.Unix()*1_000_000 + int64(p.Time.Nanosecond())/1_000 - y2kMicros
			}
			w.fixed(8)
			w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(us))
			return nil
		}
	case *string:
		switch sqlType {
		case "text":
			return w.varlen(nil, *p, 0)
		case "jsonb":
			return w.varlen(nil, *p, 1)
		}
	case *[]byte:
		if sqlType == "bytea" {
			if *p == nil {
				w.null()
				return nil
			}
			return w.varlen(*p, "", 0)
		}
	case *int64:
		if sqlType == "int8" {
			w.fixed(8)
			w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(*p))
			return nil
		}
	case *int16:
		if sqlType == "int2" {
			w.fixed(2)
			w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(*p))
			return nil
		}
	case *float64:
		if sqlType == "float8" {
			w.fixed(8)
			w.buf = binary.BigEndian.AppendUint64(w.buf, math.Float64bits(*p))
			return nil
		}
	case *bool:
		if sqlType == "bool" {
			w.fixed(1)
			if *p {
				w.buf = append(w.buf, 1)
			} else {
				w.buf = append(w.buf, 0)
			}
			return nil
		}
	}
	return fmt.Errorf("no binary form of a %T as %s", p, sqlType)
}

// end writes the trailer and returns the data.
func (w *copyWriter) end() []byte { return binary.BigEndian.AppendUint16(w.buf, math.MaxUint16) }
