package pgstore

import (
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgtype"
)

// A COPY of new rows names only the columns that some row sets to a value
// other than the column's DEFAULT: a new job leaves most of its columns at
// their defaults (no attempt, lease, error, result, owner or key, no
// backoff of its own), and a column left out of a COPY costs nothing to
// send or to parse. The rows read back the same either way.

// colDefault is what a column holds when an insert leaves it out.
type colDefault uint8

const (
	noDefault        colDefault = iota // NOT NULL without a DEFAULT: always sent
	defaultNull                        // no DEFAULT, NULL allowed
	defaultEmpty                       // DEFAULT ''
	defaultZero                        // DEFAULT 0 or false
	defaultNegInf                      // DEFAULT '-infinity'
	defaultEmptyList                   // DEFAULT '[]' (jsonb)
)

// jobDefaults are the defaults of jobWriteColumns (migrations 1 to 7).
var jobDefaults = map[string]colDefault{
	"outcome": defaultEmpty, "payload": defaultNull, "result": defaultNull,
	"attempt": defaultZero, "retry_count": defaultZero, "max_retries": defaultZero,
	"backoff_kind": defaultEmpty, "backoff_initial": defaultZero, "backoff_factor": defaultZero,
	"backoff_max": defaultZero, "backoff_jitter": defaultEmpty, "own_backoff": defaultZero,
	"last_error": defaultEmpty, "error_class": defaultEmpty, "idempotency_key": defaultEmpty,
	"fingerprint": defaultEmpty, "owner": defaultEmpty, "priority": defaultZero,
	"created_ns": defaultZero, "updated_ns": defaultZero,
	"started_at": defaultNegInf, "started_ns": defaultZero,
	"completed_at": defaultNegInf, "completed_ns": defaultZero,
	"not_before": defaultNegInf, "not_before_ns": defaultZero,
	"deadline": defaultNegInf, "deadline_ns": defaultZero, "leases": defaultZero,
	"lease_expires_at": defaultNegInf, "lease_expires_ns": defaultZero,
	"heartbeat_at": defaultNegInf, "heartbeat_ns": defaultZero,
	"committed": defaultNull, "cancel_requested": defaultZero,
	"wake_at": defaultNull, "wake_ns": defaultZero, "sweep_failures": defaultZero,
	"sweep_retry_at": defaultNegInf, "sweep_retry_ns": defaultZero, "due_ns": defaultZero,
	"concurrency_key": defaultEmpty, "earlier_execs": defaultEmptyList,
	"exec_id": defaultNull, "exec_attempt": defaultZero, "exec_owner": defaultEmpty, "exec_status": defaultEmpty,
	"exec_lease_expires_at": defaultNegInf, "exec_lease_expires_ns": defaultZero,
	"exec_heartbeat_at": defaultNegInf, "exec_heartbeat_ns": defaultZero,
	"exec_claimed_at": defaultNegInf, "exec_claimed_ns": defaultZero,
	"exec_started_at": defaultNegInf, "exec_started_ns": defaultZero,
	"exec_finished_at": defaultNegInf, "exec_finished_ns": defaultZero, "exec_error": defaultEmpty,
}

// transitionDefaults are the defaults of transitionColumns.
var transitionDefaults = map[string]colDefault{
	"from_state": defaultEmpty, "event": defaultEmpty, "actor": defaultEmpty, "reason": defaultEmpty,
	"exec_id": defaultNull, "at": defaultNegInf, "at_ns": defaultZero,
}

// isDefault reports whether the value p points to (an address
// appendPtrs returns) is what d leaves in the column.
func isDefault(d colDefault, p any) bool {
	switch d {
	case defaultNull:
		switch x := p.(type) {
		case *[]byte:
			return *x == nil
		case *pgtype.UUID:
			return !x.Valid
		case *pgtype.Timestamptz:
			return !x.Valid
		}
	case defaultEmpty:
		s, ok := p.(*string)
		return ok && *s == ""
	case defaultEmptyList:
		s, ok := p.(*string)
		return ok && *s == noExecs
	case defaultZero:
		switch x := p.(type) {
		case *int64:
			return *x == 0
		case *int16:
			return *x == 0
		case *float64:
			return math.Float64bits(*x) == 0 // not -0
		case *bool:
			return !*x
		}
	case defaultNegInf:
		ts, ok := p.(*pgtype.Timestamptz)
		return ok && ts.Valid && ts.InfinityModifier == pgtype.NegativeInfinity
	}
	return false
}

// copyIn returns the columns of names (with defaults, and types their
// SQL types) that some row of rows sets to another value than the
// default, and the COPY of those columns of rows (ptrs: appendPtrs of
// R, in the order of names), encoded at once from the rows' fields.
func copyIn[R any](table string, names, types []string, defaults map[string]colDefault, rows []R, ptrs func(*R, []any) []any) (*binaryCopy, error) {
	defs := make([]colDefault, len(names))
	for c, name := range names {
		defs[c] = defaults[name]
	}
	sent := make([]bool, len(names))
	buf := make([]any, 0, len(names))
	for i := range rows {
		buf = ptrs(&rows[i], buf[:0])
		for c, p := range buf {
			if !sent[c] && !isDefault(defs[c], p) {
				sent[c] = true
			}
		}
	}
	var cols, colTypes []string
	var keep []int
	for c, name := range names {
		if sent[c] {
			cols, colTypes, keep = append(cols, name), append(colTypes, types[c]), append(keep, c)
		}
	}
	w := newCopyWriter(len(rows))
	for i := range rows {
		buf = ptrs(&rows[i], buf[:0])
		w.startRow(len(keep))
		for k, c := range keep {
			if err := w.value(colTypes[k], buf[c]); err != nil {
				return nil, fmt.Errorf("pgstore: %s.%s: %w", table, cols[k], err)
			}
		}
	}
	return &binaryCopy{cols: cols, rows: int64(len(rows)), data: w.end()}, nil
}
