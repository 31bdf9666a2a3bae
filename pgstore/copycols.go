package pgstore

import (
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

// isDefault reports whether v, a value as jobArgs or transitionArgs
// encode it, is what d leaves in the column.
func isDefault(d colDefault, v any) bool {
	switch d {
	case defaultNull:
		switch x := v.(type) {
		case nil:
			return true
		case []byte:
			return x == nil
		case pgtype.UUID:
			return !x.Valid
		case pgtype.Timestamptz:
			return !x.Valid
		}
	case defaultEmpty:
		s, ok := v.(string)
		return ok && s == ""
	case defaultEmptyList:
		s, ok := v.(string)
		return ok && s == "[]"
	case defaultZero:
		switch x := v.(type) {
		case int64:
			return x == 0
		case int:
			return x == 0
		case int16:
			return x == 0
		case float64:
			return math.Float64bits(x) == 0 // not -0
		case bool:
			return !x
		}
	case defaultNegInf:
		ts, ok := v.(pgtype.Timestamptz)
		return ok && ts.Valid && ts.InfinityModifier == pgtype.NegativeInfinity
	}
	return false
}

// copyColumns returns the columns of names (with defaults) that some row
// of rows sets to another value than the default, and rows with only
// those columns' values.
func copyColumns(names []string, defaults map[string]colDefault, rows [][]any) ([]string, [][]any) {
	keep := make([]int, 0, len(names))
	for c, name := range names {
		d := defaults[name]
		if d == noDefault {
			keep = append(keep, c)
			continue
		}
		for _, r := range rows {
			if !isDefault(d, r[c]) {
				keep = append(keep, c)
				break
			}
		}
	}
	if len(keep) == len(names) {
		return names, rows
	}
	cols := make([]string, len(keep))
	for i, c := range keep {
		cols[i] = names[c]
	}
	out := make([][]any, len(rows))
	for i, r := range rows {
		v := make([]any, len(keep))
		for k, c := range keep {
			v[k] = r[c]
		}
		out[i] = v
	}
	return cols, out
}
