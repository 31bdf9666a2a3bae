package jobstate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The JSON form of a Job. Its keys are the snake_case names the
// conformance vectors give a job's fields (state, retry_count, last_error,
// not_before, ...); the order of this struct is the order MarshalJSON
// writes them in.
type jobJSON struct {
	ID              string       `json:"id"`
	Machine         string       `json:"machine"`
	State           string       `json:"state"`
	Kind            string       `json:"kind,omitempty"`
	Outcome         string       `json:"outcome"`
	Payload         string       `json:"payload,omitempty"`
	PayloadBase64   []byte       `json:"payload_base64,omitempty"`
	Result          string       `json:"result,omitempty"`
	ResultBase64    []byte       `json:"result_base64,omitempty"`
	Version         int64        `json:"version"`
	Attempt         int          `json:"attempt"`
	RetryCount      int          `json:"retry_count"`
	MaxRetries      int          `json:"max_retries"`
	Backoff         *backoffJSON `json:"backoff,omitempty"`
	OwnBackoff      bool         `json:"own_backoff,omitempty"`
	LastError       string       `json:"last_error,omitempty"`
	ErrorClass      string       `json:"error_class,omitempty"`
	IdempotencyKey  string       `json:"idempotency_key,omitempty"`
	Fingerprint     string       `json:"fingerprint,omitempty"`
	Owner           string       `json:"owner,omitempty"`
	ConcurrencyKey  string       `json:"concurrency_key,omitempty"`
	Priority        int          `json:"priority"`
	CreatedAt       string       `json:"created_at,omitempty"`
	UpdatedAt       string       `json:"updated_at,omitempty"`
	StartedAt       string       `json:"started_at,omitempty"`
	CompletedAt     string       `json:"completed_at,omitempty"`
	NotBefore       string       `json:"not_before,omitempty"`
	Deadline        string       `json:"deadline,omitempty"`
	Leases          int          `json:"leases"`
	LeaseExpiresAt  string       `json:"lease_expires_at,omitempty"`
	HeartbeatAt     string       `json:"heartbeat_at,omitempty"`
	Committed       string       `json:"committed,omitempty"`
	CancelRequested bool         `json:"cancel_requested,omitempty"`
	WakeAt          string       `json:"wake_at,omitempty"`
	SweepFailures   int          `json:"sweep_failures,omitempty"`
	SweepRetryAt    string       `json:"sweep_retry_at,omitempty"`
}

// MarshalJSON encodes the job as one JSON object whose keys are the
// snake_case names of its fields, in the order of the Job struct:
//
//   - id and committed are UUID strings in canonical form; committed is
//     left out when it is the zero UUID (no execution committed), id is
//     always written;
//   - machine, state, outcome ("" for a non-terminal state), version,
//     attempt, retry_count, max_retries, priority and leases are always
//     written; kind is written by name ("initial" ... "terminal") and left
//     out only for the zero Kind, which no stored job has;
//   - every time (created_at, updated_at, started_at, completed_at,
//     not_before, deadline, lease_expires_at, heartbeat_at, wake_at,
//     sweep_retry_at) is written in UTC as RFC 3339 with up to nine
//     fractional digits (time.RFC3339Nano), and left out when it is the
//     zero time, which means "none";
//   - Payload and Result are written, as in the conformance vectors, as
//     JSON strings meaning their UTF-8 encoding under "payload" and
//     "result"; bytes that are not valid UTF-8 are written in standard
//     base64 under "payload_base64" and "result_base64" instead. Empty
//     bytes (nil or not) are left out;
//   - backoff is the object of a definition's policy.retry.backoff (kind,
//     initial, factor, max, jitter; durations as Go duration strings),
//     left out when it is the zero Backoff; own_backoff and
//     cancel_requested are left out when false; last_error, error_class,
//     idempotency_key, fingerprint and owner when empty; sweep_failures
//     when 0.
//
// MarshalJSON loses nothing but the locations and monotonic readings of
// the times: UnmarshalJSON of its output gives back the same job, with
// its times in UTC and its empty byte slices nil.
// It refuses, with an error wrapping ErrInvalidArgument that names the
// field, a job it cannot write so: an invalid Kind other than zero, an
// undeclared Outcome or ErrorClass, a text field that is not valid UTF-8,
// a time outside [MinTime, MaxTime], or a Backoff that NewJob.Retry would
// refuse. No job the engine writes is refused.
func (j Job) MarshalJSON() ([]byte, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: cannot write job %s as JSON: %s: %s", ErrInvalidArgument, j.ID, field, fmt.Sprintf(format, args...))
	}
	out := jobJSON{
		ID:              j.ID.String(),
		Machine:         j.Machine,
		State:           string(j.State),
		Outcome:         string(j.Outcome),
		Version:         j.Version,
		Attempt:         j.Attempt,
		RetryCount:      j.RetryCount,
		MaxRetries:      j.MaxRetries,
		OwnBackoff:      j.OwnBackoff,
		LastError:       j.LastError,
		ErrorClass:      string(j.ErrorClass),
		IdempotencyKey:  j.IdempotencyKey,
		Fingerprint:     j.Fingerprint,
		Owner:           j.Owner,
		ConcurrencyKey:  j.ConcurrencyKey,
		Priority:        j.Priority,
		Leases:          j.Leases,
		CancelRequested: j.CancelRequested,
		SweepFailures:   j.SweepFailures,
	}
	if j.Kind != 0 {
		if !j.Kind.Valid() {
			return nil, bad("kind", "invalid kind %d", uint8(j.Kind))
		}
		out.Kind = kindNames[j.Kind]
	}
	if j.Outcome != "" && !j.Outcome.Valid() {
		return nil, bad("outcome", "unknown outcome %q", j.Outcome)
	}
	if !validErrorClass(j.ErrorClass) {
		return nil, bad("error_class", "unknown error class %q", j.ErrorClass)
	}
	for _, f := range [...]struct{ key, s string }{
		{"machine", j.Machine}, {"state", string(j.State)}, {"last_error", j.LastError},
		{"idempotency_key", j.IdempotencyKey}, {"fingerprint", j.Fingerprint}, {"owner", j.Owner},
		{"concurrency_key", j.ConcurrencyKey},
	} {
		if !utf8.ValidString(f.s) {
			return nil, bad(f.key, "%q is not valid UTF-8", f.s)
		}
	}
	out.Payload, out.PayloadBase64 = bytesToJSON(j.Payload)
	out.Result, out.ResultBase64 = bytesToJSON(j.Result)
	if j.Backoff != (Backoff{}) {
		if err := j.Backoff.validate(); err != nil {
			return nil, bad("backoff", "%v", err)
		}
		b := j.Backoff
		out.Backoff = &backoffJSON{
			Kind: string(b.Kind), Initial: durationText(b.Initial), Factor: b.Factor,
			Max: durationText(b.Max), Jitter: string(b.Jitter),
		}
	}
	for _, f := range [...]struct {
		key string
		t   time.Time
		dst *string
	}{
		{"created_at", j.CreatedAt, &out.CreatedAt},
		{"updated_at", j.UpdatedAt, &out.UpdatedAt},
		{"started_at", j.StartedAt, &out.StartedAt},
		{"completed_at", j.CompletedAt, &out.CompletedAt},
		{"not_before", j.NotBefore, &out.NotBefore},
		{"deadline", j.Deadline, &out.Deadline},
		{"lease_expires_at", j.LeaseExpiresAt, &out.LeaseExpiresAt},
		{"heartbeat_at", j.HeartbeatAt, &out.HeartbeatAt},
		{"wake_at", j.WakeAt, &out.WakeAt},
		{"sweep_retry_at", j.SweepRetryAt, &out.SweepRetryAt},
	} {
		if f.t.IsZero() {
			continue
		}
		if f.t.Before(MinTime) || f.t.After(MaxTime) {
			return nil, bad(f.key, "%s is outside the range [%s, %s]", f.t.Format(time.RFC3339Nano),
				MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
		}
		*f.dst = f.t.UTC().Format(time.RFC3339Nano)
	}
	if j.Committed != uuid.Nil {
		out.Committed = j.Committed.String()
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot write job %s as JSON: %w", ErrInvalidArgument, j.ID, err)
	}
	return data, nil
}

// UnmarshalJSON decodes the JSON form MarshalJSON writes into j, replacing
// every field: a key that is absent, or null, gives the field its zero
// value. Keys are matched exactly; keys it does not know are ignored, so
// that JSON written by a later version, or a job object an API extended
// with fields of its own, still decodes. The JSON null alone leaves j
// unchanged, as encoding/json does for null.
//
// Values are read as MarshalJSON writes them, with this latitude: times
// may carry any UTC offset and any number of fractional digits (read to
// the nanosecond), and are decoded in UTC as Time.UTC gives them, so that
// a decoded job equals, by reflect.DeepEqual, the original with its times
// passed through Time.UTC; "" stands for the zero time, and for the zero
// UUID in id and committed; a UUID may be in any form uuid.Parse accepts; payload and
// result may be given as a string (its UTF-8 encoding) or in base64 under
// payload_base64 and result_base64 (not both); empty bytes decode as nil.
// Integers must be JSON numbers without fraction or exponent that fit the
// field.
//
// A malformed value is refused with an error wrapping ErrInvalidArgument
// that names its key (a value of the wrong JSON type, an unknown kind,
// outcome, error class, backoff kind or jitter, an unparsable time, UUID,
// duration or base64 text, a time outside [MinTime, MaxTime], a backoff
// NewJob.Retry would refuse), as is input that is not one JSON object; j
// is then left unchanged. UnmarshalJSON checks each value, not the job as
// a whole: it does not check that the state belongs to the machine, or the
// counters to each other. It never panics, whatever data holds, and every
// job it decodes is written back by MarshalJSON without error.
func (j *Job) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if string(trimmed) == "null" {
		return nil
	}
	if len(trimmed) > 0 && trimmed[0] != '{' {
		return fmt.Errorf("%w: job JSON: a job is a JSON object, not %s", ErrInvalidArgument, rawKind(trimmed))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return fmt.Errorf("%w: job JSON: %s", ErrInvalidArgument, jsonProblem(err))
	}
	d := jobDecoder{obj: obj}
	var nj Job
	nj.ID = d.id("id")
	nj.Machine = d.text("machine")
	nj.State = State(d.text("state"))
	if raw, ok := d.get("kind"); ok {
		if s, ok := d.str("kind", raw); ok {
			if err := nj.Kind.UnmarshalText([]byte(s)); err != nil {
				d.fail("kind", "unknown kind %q (want initial, ready, active, waiting or terminal)", s)
			}
		}
	}
	nj.Outcome = Outcome(d.text("outcome"))
	if nj.Outcome != "" && !nj.Outcome.Valid() {
		d.fail("outcome", "unknown outcome %q", nj.Outcome)
	}
	nj.Payload = d.blob("payload")
	nj.Result = d.blob("result")
	nj.Version = d.integer("version", 64)
	nj.Attempt = int(d.integer("attempt", strconv.IntSize))
	nj.RetryCount = int(d.integer("retry_count", strconv.IntSize))
	nj.MaxRetries = int(d.integer("max_retries", strconv.IntSize))
	nj.Backoff = d.backoff("backoff")
	nj.OwnBackoff = d.boolean("own_backoff")
	nj.LastError = d.text("last_error")
	nj.ErrorClass = ErrorClass(d.text("error_class"))
	if !validErrorClass(nj.ErrorClass) {
		d.fail("error_class", "unknown error class %q (want retryable, permanent or empty)", nj.ErrorClass)
	}
	nj.IdempotencyKey = d.text("idempotency_key")
	nj.Fingerprint = d.text("fingerprint")
	nj.Owner = d.text("owner")
	nj.ConcurrencyKey = d.text("concurrency_key")
	nj.Priority = int(d.integer("priority", strconv.IntSize))
	nj.CreatedAt = d.instant("created_at")
	nj.UpdatedAt = d.instant("updated_at")
	nj.StartedAt = d.instant("started_at")
	nj.CompletedAt = d.instant("completed_at")
	nj.NotBefore = d.instant("not_before")
	nj.Deadline = d.instant("deadline")
	nj.Leases = int(d.integer("leases", strconv.IntSize))
	nj.LeaseExpiresAt = d.instant("lease_expires_at")
	nj.HeartbeatAt = d.instant("heartbeat_at")
	nj.Committed = d.id("committed")
	nj.CancelRequested = d.boolean("cancel_requested")
	nj.WakeAt = d.instant("wake_at")
	nj.SweepFailures = int(d.integer("sweep_failures", strconv.IntSize))
	nj.SweepRetryAt = d.instant("sweep_retry_at")
	if d.err != nil {
		return d.err
	}
	*j = nj
	return nil
}

// validErrorClass reports whether c is a class a job records.
func validErrorClass(c ErrorClass) bool {
	switch c {
	case ClassNone, ClassRetryable, ClassPermanent:
		return true
	}
	return false
}

// bytesToJSON gives the text of b for "payload" or "result" when b is
// valid UTF-8, else b for the base64 key; both are empty for empty b.
func bytesToJSON(b []byte) (string, []byte) {
	if len(b) == 0 {
		return "", nil
	}
	if utf8.Valid(b) {
		return string(b), nil
	}
	return "", b
}

// rawKind names the JSON type of a raw value by its first byte.
func rawKind(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// jobDecoder reads the fields of a decoded job object, keeping the first
// error met.
type jobDecoder struct {
	obj map[string]json.RawMessage
	// path is put before every key in errors ("backoff." inside the
	// backoff object).
	path string
	err  error
}

// fail records a malformed value of the field key, unless an error was
// recorded already.
func (d *jobDecoder) fail(key, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: job JSON: %s%s: %s", ErrInvalidArgument, d.path, key, fmt.Sprintf(format, args...))
	}
}

// get returns the raw value of key, or false when it is absent or null.
func (d *jobDecoder) get(key string) (json.RawMessage, bool) {
	raw, ok := d.obj[key]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// str decodes raw, the value of key, as a JSON string.
func (d *jobDecoder) str(key string, raw json.RawMessage) (string, bool) {
	if raw[0] != '"' {
		d.fail(key, "want a string, got %s", rawKind(raw))
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.fail(key, "%v", err)
		return "", false
	}
	return s, true
}

// text returns the string value of key; "" when absent.
func (d *jobDecoder) text(key string) string {
	raw, ok := d.get(key)
	if !ok {
		return ""
	}
	s, _ := d.str(key, raw)
	return s
}

// integer returns the integer value of key, which must fit in bits bits;
// 0 when absent.
func (d *jobDecoder) integer(key string, bits int) int64 {
	raw, ok := d.get(key)
	if !ok {
		return 0
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		d.fail(key, "want an integer, got %s", rawKind(raw))
		return 0
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			d.fail(key, "%s is out of range", raw)
		} else {
			d.fail(key, "%s is not an integer", raw)
		}
		return 0
	}
	return n
}

// boolean returns the boolean value of key; false when absent.
func (d *jobDecoder) boolean(key string) bool {
	raw, ok := d.get(key)
	if !ok {
		return false
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	d.fail(key, "want a boolean, got %s", rawKind(raw))
	return false
}

// instant returns the time value of key in UTC; the zero time when absent
// or "".
func (d *jobDecoder) instant(key string) time.Time {
	s := d.text(key)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.fail(key, "invalid RFC 3339 time %q", s)
		return time.Time{}
	}
	t = t.UTC()
	if t.IsZero() {
		return time.Time{}
	}
	if t.Before(MinTime) || t.After(MaxTime) {
		d.fail(key, "%s is outside the range [%s, %s]", s, MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
		return time.Time{}
	}
	return t
}

// id returns the UUID value of key; the zero UUID when absent or "".
func (d *jobDecoder) id(key string) uuid.UUID {
	s := d.text(key)
	if s == "" {
		return uuid.Nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		d.fail(key, "invalid UUID %q", s)
		return uuid.Nil
	}
	return id
}

// blob returns the bytes of key, given as a string under key or in
// base64 under key+"_base64"; nil when absent or empty.
func (d *jobDecoder) blob(key string) []byte {
	b64 := key + "_base64"
	s, hasText := d.get(key)
	_, hasB64 := d.get(b64)
	if hasText && hasB64 {
		d.fail(key, "given twice, as %s and as %s", key, b64)
		return nil
	}
	if hasText {
		text, _ := d.str(key, s)
		if text == "" {
			return nil
		}
		return []byte(text)
	}
	enc := d.text(b64)
	if enc == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		d.fail(b64, "invalid base64: %v", err)
		return nil
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

// backoff returns the Backoff value of key; the zero Backoff when absent.
// Unknown keys inside it are ignored, as at the top level.
func (d *jobDecoder) backoff(key string) Backoff {
	raw, ok := d.get(key)
	if !ok {
		return Backoff{}
	}
	if raw[0] != '{' {
		d.fail(key, "want an object, got %s", rawKind(raw))
		return Backoff{}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		d.fail(key, "%s", jsonProblem(err))
		return Backoff{}
	}
	inner := jobDecoder{obj: obj, path: key + "."}
	var b Backoff
	b.Kind = BackoffKind(inner.text("kind"))
	b.Initial = inner.duration("initial")
	if raw, ok := inner.get("factor"); ok {
		if c := raw[0]; c != '-' && (c < '0' || c > '9') {
			inner.fail("factor", "want a number, got %s", rawKind(raw))
		} else if err := json.Unmarshal(raw, &b.Factor); err != nil {
			inner.fail("factor", "%s is not a finite number", raw)
		}
	}
	b.Max = inner.duration("max")
	b.Jitter = Jitter(inner.text("jitter"))
	if inner.err != nil {
		if d.err == nil {
			d.err = inner.err
		}
		return Backoff{}
	}
	if err := b.validate(); err != nil {
		d.fail(key, "%v", err)
		return Backoff{}
	}
	return b
}

// duration returns the Go duration value of key; 0 when absent or "".
func (d *jobDecoder) duration(key string) time.Duration {
	s := d.text(key)
	if s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.fail(key, "invalid duration %q (want a Go duration such as \"1s\" or \"1m30s\")", s)
		return 0
	}
	return v
}
