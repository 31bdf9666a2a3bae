// Package conformance holds language-neutral conformance vectors for the
// jobstate engine and the runner that replays them.
//
// A vector is a JSON file in vectors/: a machine definition in the JSON
// form of jobstate.ParseSpec, a start time, and a list of steps, each an
// engine operation with its arguments and what it must return. The format
// is specified in docs/conformance.md, so that an implementation in any
// language can replay the same files and be held to the same behaviour.
//
// A store's test replays every vector on fresh stores:
//
//	func TestVectors(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) jobstate.Store { return memstore.New() })
//	}
//
// The package is a module of its own, github.com/jobstate/jobstate/conformance,
// released with the library at the same version, so that a program using
// the library does not get it (nor the JSON Schema validator its tests use)
// in its module graph.
package conformance

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed vectors/*.json
var files embed.FS

// Vector is one conformance scenario.
type Vector struct {
	// Name identifies the vector; it equals the file name without ".json".
	Name string `json:"name"`
	// Description says what the vector shows, citing its lifecycle where it
	// replays one.
	Description string `json:"description"`
	// Covers lists the sections of docs/specification.md whose rules the
	// vector pins ("4.6", "4.21.1"; "6" for the error catalogue).
	Covers []string `json:"covers"`
	// Definition is the machine, in the JSON form of jobstate.ParseSpec,
	// parsed with NewRegistry().
	Definition json.RawMessage `json:"definition"`
	// Start is the manual clock's first reading, in RFC 3339.
	Start string `json:"start"`
	// Draw, when set, is the random draw the engine's backoff jitter
	// reads (WithRandom); absent, 0.5.
	Draw *float64 `json:"draw,omitempty"`
	// Expect, when set, is what loading the definition must give; absent,
	// the definition must load.
	Expect *LoadExpect `json:"expect,omitempty"`
	// Steps are replayed in order on one engine over one fresh store.
	Steps []Step `json:"steps"`
}

// LoadExpect is the expected outcome of loading a vector's definition.
type LoadExpect struct {
	// Error is the jobstate.Code of the load error ("invalid_definition"),
	// or "" for success.
	Error string `json:"error"`
	// Problems are fragments that must each occur in the error's text.
	Problems []string `json:"problems,omitempty"`
	// Complete, when set, makes Problems the definition error's whole
	// list of problems, exactly and in order (DefinitionError.Problems).
	Complete bool `json:"complete,omitempty"`
}

// Step is one operation of a vector, with its arguments and expectation.
// Which arguments an operation reads is listed in docs/conformance.md §2.
type Step struct {
	Op string `json:"op"`
	// Note is free text for the reader; the runner ignores it.
	Note string `json:"note,omitempty"`

	// As names the job a create makes, the lease a claim grants, or the
	// page a list returns (for a later list's cursor).
	As string `json:"as,omitempty"`
	// Job names a job by its alias; JobID gives a literal id instead
	// (for ids no job has).
	Job   string `json:"job,omitempty"`
	JobID string `json:"job_id,omitempty"`
	// Lease names a lease by its alias; Token, when set, replaces its
	// fencing token (a forged or stale lease).
	Lease string `json:"lease,omitempty"`
	Token *int   `json:"token,omitempty"`

	// Machine overrides the machine name of create and claim (default:
	// the definition's name); for list, it is the machine filter (default:
	// none).
	Machine *string `json:"machine,omitempty"`

	// create; Owner and Key are also list's filters
	Payload *string `json:"payload,omitempty"`
	Owner   string  `json:"owner,omitempty"`
	Key     string  `json:"key,omitempty"`
	// ConcurrencyKey is the created job's concurrency key.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	TTL            string `json:"ttl,omitempty"`
	Deadline       string `json:"deadline,omitempty"`
	NotBefore      string `json:"not_before,omitempty"`
	Priority       int    `json:"priority,omitempty"`
	// MaxRetries overrides the machine's retry bound for this job
	// (NewJob.Retry with MaxRetries only).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Backoff gives the job a backoff of its own (NewJob.Retry's
	// Backoff), written like a definition's policy.retry.backoff.
	Backoff *StepBackoff `json:"backoff,omitempty"`
	// Fingerprint is NewJob.Fingerprint: the text compared, instead of
	// one computed from the payload, when the key is held already.
	Fingerprint string `json:"fingerprint,omitempty"`

	// who and why: create, fire, cancel, advance, apply
	Actor  string          `json:"actor,omitempty"`
	Reason string          `json:"reason,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`

	// fire, advance
	Event     string `json:"event,omitempty"`
	IfVersion int64  `json:"if_version,omitempty"`

	// claim, claim_job
	Worker string `json:"worker,omitempty"`

	// commit, succeed: Effect names a registry effect. apply: Effect
	// names one of the definition's once-only effects.
	Result *string `json:"result,omitempty"`
	Effect string  `json:"effect,omitempty"`

	// fail
	Error string `json:"error,omitempty"`
	Class string `json:"class,omitempty"`
	After string `json:"after,omitempty"`

	// snooze
	Delay string `json:"delay,omitempty"`

	// clock
	Advance string `json:"advance,omitempty"`
	Set     string `json:"set,omitempty"`

	// list: the filters of jobstate.ListQuery (with Machine, Owner and
	// Key above), its order and page size, and Cursor, the alias of an
	// earlier list's page whose next cursor this list passes, or
	// CursorText, a literal one.
	States        []string `json:"states,omitempty"`
	Kinds         []string `json:"kinds,omitempty"`
	Outcomes      []string `json:"outcomes,omitempty"`
	CreatedFrom   string   `json:"created_from,omitempty"`
	CreatedTo     string   `json:"created_to,omitempty"`
	UpdatedFrom   string   `json:"updated_from,omitempty"`
	UpdatedTo     string   `json:"updated_to,omitempty"`
	CompletedFrom string   `json:"completed_from,omitempty"`
	CompletedTo   string   `json:"completed_to,omitempty"`
	Order         string   `json:"order,omitempty"`
	Desc          bool     `json:"desc,omitempty"`
	Limit         int      `json:"limit,omitempty"`
	Cursor        string   `json:"cursor,omitempty"`
	// CursorText, for list, is a literal cursor passed as it is: a text
	// that List never made (a vector never writes a cursor List made,
	// which is opaque). It excludes Cursor.
	CursorText string `json:"cursor_text,omitempty"`

	// Definition, for redefine, is the machine's new definition (JSON form,
	// the same name): the engine is made again with it, over the same
	// store, clock and ids.
	Definition json.RawMessage `json:"definition,omitempty"`

	// SkipGet, set on a step naming a job of a machine with lazy expiry,
	// makes the runner leave out the get it makes before such a step
	// (docs/conformance.md §2.5): the operation's own lazy expiry then
	// shows in what the step expects.
	SkipGet bool `json:"skip_get,omitempty"`

	Expect Expect `json:"expect"`
}

// StepBackoff is a job's own backoff in a create step: the fields of
// jobstate.Backoff, durations written as Go durations ("1.5s").
type StepBackoff struct {
	Kind    string  `json:"kind"`
	Initial string  `json:"initial,omitempty"`
	Factor  float64 `json:"factor,omitempty"`
	Max     string  `json:"max,omitempty"`
	Jitter  string  `json:"jitter,omitempty"`
}

// Expect is what a step must give. Absent fields are not checked, except
// Error: absent means the step must succeed.
type Expect struct {
	// Error is the jobstate.Code the operation returns; "" is success.
	Error string `json:"error,omitempty"`

	// Job is the alias of the job the operation returned (which job a
	// claim took, which job an idempotent create gave back).
	Job *string `json:"job,omitempty"`
	// Existing is Created.Existing of a create.
	Existing *bool `json:"existing,omitempty"`
	// Token is the fencing token of the lease a claim granted.
	Token *int `json:"token,omitempty"`

	// Fields of the job (see docs/conformance.md §2.4 for which job).
	State           *string `json:"state,omitempty"`
	Kind            *string `json:"kind,omitempty"`
	Outcome         *string `json:"outcome,omitempty"`
	Version         *int64  `json:"version,omitempty"`
	Attempt         *int    `json:"attempt,omitempty"`
	RetryCount      *int    `json:"retry_count,omitempty"`
	MaxRetries      *int    `json:"max_retries,omitempty"`
	Leases          *int    `json:"leases,omitempty"`
	NotBefore       *string `json:"not_before,omitempty"`
	Deadline        *string `json:"deadline,omitempty"`
	StartedAt       *string `json:"started_at,omitempty"`
	CompletedAt     *string `json:"completed_at,omitempty"`
	LeaseExpiresAt  *string `json:"lease_expires_at,omitempty"`
	HeartbeatAt     *string `json:"heartbeat_at,omitempty"`
	Fingerprint     *string `json:"fingerprint,omitempty"`
	ConcurrencyKey  *string `json:"concurrency_key,omitempty"`
	LastError       *string `json:"last_error,omitempty"`
	ErrorClass      *string `json:"error_class,omitempty"`
	Committed       *string `json:"committed,omitempty"`
	Result          *string `json:"result,omitempty"`
	UpdatedAt       *string `json:"updated_at,omitempty"`
	WakeAt          *string `json:"wake_at,omitempty"`
	SweepFailures   *int    `json:"sweep_failures,omitempty"`
	SweepRetryAt    *string `json:"sweep_retry_at,omitempty"`
	CancelRequested *bool   `json:"cancel_requested,omitempty"`

	// EffectCount maps registry effect names to how often each ran
	// successfully for the job.
	EffectCount map[string]int `json:"effect_count,omitempty"`
	// History is the job's whole history as [from, event, to] triples.
	History [][3]string `json:"history,omitempty"`
	// Records are the actor and the reason of each of the job's
	// transition records, in version order, as [actor, reason] pairs; in
	// them {alias} stands for the id of the job bound to alias (or of
	// the execution of the lease bound to it).
	Records [][2]string `json:"records,omitempty"`
	// Executions are the statuses of the job's executions, in claim order.
	Executions []string `json:"executions,omitempty"`
	// ExecutionErrors are the Error texts of the job's executions, in
	// claim order ("" for one that has none); {alias} stands for the id
	// of the job bound to alias, or of the execution of the lease bound
	// to it.
	ExecutionErrors []string `json:"execution_errors,omitempty"`

	// LeaseExpires and LeaseTTL are the ExpiresAt and TTL of the lease a
	// claim, claim_job or heartbeat returned.
	LeaseExpires *string `json:"lease_expires,omitempty"`
	LeaseTTL     *string `json:"lease_ttl,omitempty"`
	// Wraps names registry errors (guards' refusals, the fail_effect
	// effect's error, RegistryErrors) that the step's error must wrap.
	Wraps []string `json:"wraps,omitempty"`
	// Observed are the transition records the engine's observers were
	// told of during the step, as [from, event, to] triples in the order
	// they were told.
	Observed [][3]string `json:"observed,omitempty"`
	// ExecutionStartedAt are the StartedAt times of the job's executions,
	// in claim order ("" for one never started).
	ExecutionStartedAt []string `json:"execution_started_at,omitempty"`

	// Report is a sweep's report.
	Report *Report `json:"report,omitempty"`
	// Page is a list's page.
	Page *Page `json:"page,omitempty"`
}

// Page is the expected page of a list.
type Page struct {
	// Jobs are the aliases of the page's jobs, in the listing's order;
	// always checked.
	Jobs []string `json:"jobs"`
	// States, when set, are the states of the page's jobs as the list
	// returned them (after lazy expiry), in the same order.
	States []string `json:"states,omitempty"`
	// Next, when set, says whether the page has a next cursor.
	Next *bool `json:"next,omitempty"`
}

// Report is the expected jobstate.SweepReport; absent counts are not
// checked.
type Report struct {
	Jobs      *int `json:"jobs,omitempty"`
	Finalized *int `json:"finalized,omitempty"`
	Aborted   *int `json:"aborted,omitempty"`
	Retried   *int `json:"retried,omitempty"`
	Failed    *int `json:"failed,omitempty"`
	Requeued  *int `json:"requeued,omitempty"`
	Expired   *int `json:"expired,omitempty"`
	// Failures, when set, are the jobs whose write failed, in the order
	// the operation met them, each with the code of its error.
	Failures []Failure `json:"failures,omitempty"`
}

// Failure is one job a sweep or a recovery could not write.
type Failure struct {
	// Job is the job's alias.
	Job string `json:"job"`
	// Error is the jobstate.Code of the job's error.
	Error string `json:"error"`
}

// Ops lists the operation names a step may use, in the order of
// docs/conformance.md §2.
var Ops = []string{
	"create", "fire", "cancel", "get", "claim", "claim_job", "heartbeat",
	"start", "commit", "finish", "succeed", "fail", "snooze", "advance",
	"apply", "redrive", "sweep", "recover_worker", "clock", "history", "executions",
	"list", "redefine",
}

func knownOp(op string) bool {
	for _, o := range Ops {
		if o == op {
			return true
		}
	}
	return false
}

// Vectors returns every embedded vector, sorted by name. It fails if a
// file is not a well-formed vector: unknown fields (anywhere but inside
// the definition and args), an unknown op, a name that does not match the
// file name, a bad start time.
func Vectors() ([]Vector, error) {
	entries, err := files.ReadDir("vectors")
	if err != nil {
		return nil, err
	}
	var out []Vector
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := files.ReadFile(path.Join("vectors", e.Name()))
		if err != nil {
			return nil, err
		}
		v, err := ParseVector(data)
		if err != nil {
			return nil, fmt.Errorf("vectors/%s: %w", e.Name(), err)
		}
		if want := strings.TrimSuffix(e.Name(), ".json"); v.Name != want {
			return nil, fmt.Errorf("vectors/%s: name %q does not match the file name", e.Name(), v.Name)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Definitions returns the definition (JSON, as in Vector.Definition) of
// every embedded vector, by vector name.
func Definitions() (map[string][]byte, error) {
	vs, err := Vectors()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(vs))
	for _, v := range vs {
		out[v.Name] = v.Definition
	}
	return out, nil
}

// ParseVector decodes and checks one vector file.
func ParseVector(data []byte) (Vector, error) {
	var v Vector
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Vector{}, err
	}
	if dec.More() {
		return Vector{}, fmt.Errorf("data after the vector")
	}
	if v.Name == "" {
		return Vector{}, fmt.Errorf("no name")
	}
	if len(v.Definition) == 0 {
		return Vector{}, fmt.Errorf("no definition")
	}
	if _, err := time.Parse(time.RFC3339Nano, v.Start); err != nil {
		return Vector{}, fmt.Errorf("start: %w", err)
	}
	if v.Expect != nil && v.Expect.Error != "" && len(v.Steps) > 0 {
		return Vector{}, fmt.Errorf("a vector whose definition must not load has no steps")
	}
	for i, s := range v.Steps {
		if !knownOp(s.Op) {
			return Vector{}, fmt.Errorf("step %d: unknown op %q", i+1, s.Op)
		}
	}
	return v, nil
}
