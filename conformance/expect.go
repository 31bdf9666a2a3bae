package conformance

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// This file holds the runner's checks of a step's expectations
// (docs/conformance.md §2.4): the job's fields, the report, the page,
// and the aliases their texts name.

// checkPage compares a list's page with the expectation.
func (r *runner) checkPage(want Page, got jobstate.ListPage, bad func(string, ...any)) *stepError {
	ids := make([]uuid.UUID, len(want.Jobs))
	for i, a := range want.Jobs {
		id, ok := r.jobs[a]
		if !ok {
			return &stepError{fmt.Sprintf("page: no job named %q", a)}
		}
		ids[i] = id
	}
	gotIDs := make([]uuid.UUID, len(got.Jobs))
	names := make([]string, len(got.Jobs))
	states := make([]string, len(got.Jobs))
	for i, j := range got.Jobs {
		gotIDs[i], names[i], states[i] = j.ID, r.aliasOf(j.ID), string(j.State)
	}
	if !reflect.DeepEqual(ids, gotIDs) {
		bad("page: got jobs %s, want %q", strings.Join(names, ", "), want.Jobs)
	}
	if want.States != nil && !reflect.DeepEqual(want.States, states) {
		bad("page: got states %q, want %q", states, want.States)
	}
	if want.Next != nil && *want.Next != (got.Next != "") {
		bad("page: next cursor %v, want %v", got.Next != "", *want.Next)
	}
	return nil
}

func needsJob(e Expect) bool {
	return e.Job != nil || e.State != nil || e.Kind != nil || e.Outcome != nil || e.Version != nil ||
		e.Attempt != nil || e.RetryCount != nil || e.MaxRetries != nil || e.Leases != nil ||
		e.NotBefore != nil || e.Deadline != nil || e.StartedAt != nil || e.CompletedAt != nil ||
		e.LeaseExpiresAt != nil || e.LastError != nil || e.ErrorClass != nil || e.Committed != nil ||
		e.Result != nil || e.EffectCount != nil || e.UpdatedAt != nil || e.WakeAt != nil ||
		e.SweepFailures != nil || e.SweepRetryAt != nil || e.CancelRequested != nil || e.HeartbeatAt != nil ||
		e.Fingerprint != nil || e.ConcurrencyKey != nil
}

// checkJob compares the job's fields with the expectation.
func (r *runner) checkJob(e Expect, j *jobstate.Job, bad func(string, ...any)) *stepError {
	str := func(name string, want *string, got string) {
		if want != nil && *want != got {
			bad("%s: got %q, want %q", name, got, *want)
		}
	}
	num := func(name string, want *int, got int) {
		if want != nil && *want != got {
			bad("%s: got %d, want %d", name, got, *want)
		}
	}
	var verr *stepError
	tm := func(name string, want *string, got time.Time) {
		if want == nil {
			return
		}
		w, err := parseTime(name, *want)
		if err != nil {
			verr = err
			return
		}
		if !w.Equal(got) {
			bad("%s: got %s, want %s", name, timeText(got), timeText(w))
		}
	}
	if e.Job != nil {
		id, ok := r.jobs[*e.Job]
		if !ok {
			return &stepError{fmt.Sprintf("no job named %q", *e.Job)}
		}
		if id != j.ID {
			bad("job: got %s, want %q (%s)", r.aliasOf(j.ID), *e.Job, id)
		}
	}
	str("state", e.State, string(j.State))
	kind := ""
	if j.Kind.Valid() {
		kind = j.Kind.String()
	}
	str("kind", e.Kind, kind)
	str("outcome", e.Outcome, string(j.Outcome))
	if e.Version != nil && *e.Version != j.Version {
		bad("version: got %d, want %d", j.Version, *e.Version)
	}
	num("attempt", e.Attempt, j.Attempt)
	num("retry_count", e.RetryCount, j.RetryCount)
	num("max_retries", e.MaxRetries, j.MaxRetries)
	num("leases", e.Leases, j.Leases)
	tm("not_before", e.NotBefore, j.NotBefore)
	tm("deadline", e.Deadline, j.Deadline)
	tm("started_at", e.StartedAt, j.StartedAt)
	tm("completed_at", e.CompletedAt, j.CompletedAt)
	tm("lease_expires_at", e.LeaseExpiresAt, j.LeaseExpiresAt)
	tm("heartbeat_at", e.HeartbeatAt, j.HeartbeatAt)
	str("fingerprint", e.Fingerprint, j.Fingerprint)
	str("concurrency_key", e.ConcurrencyKey, j.ConcurrencyKey)
	str("last_error", e.LastError, j.LastError)
	str("error_class", e.ErrorClass, string(j.ErrorClass))
	if e.Committed != nil {
		want := uuid.Nil
		if *e.Committed != "" {
			l, ok := r.leases[*e.Committed]
			if !ok {
				return &stepError{fmt.Sprintf("committed: no lease named %q", *e.Committed)}
			}
			want = l.ExecID
		}
		if j.Committed != want {
			bad("committed: got %s, want %q", r.leaseOf(j.Committed), *e.Committed)
		}
	}
	str("result", e.Result, string(j.Result))
	tm("updated_at", e.UpdatedAt, j.UpdatedAt)
	tm("wake_at", e.WakeAt, j.WakeAt)
	num("sweep_failures", e.SweepFailures, j.SweepFailures)
	tm("sweep_retry_at", e.SweepRetryAt, j.SweepRetryAt)
	if e.CancelRequested != nil && *e.CancelRequested != j.CancelRequested {
		bad("cancel_requested: got %v, want %v", j.CancelRequested, *e.CancelRequested)
	}
	for name, want := range e.EffectCount {
		if got := r.counts.get(j.ID, name); got != want {
			bad("effect_count[%s]: got %d, want %d", name, got, want)
		}
	}
	return verr
}

func (r *runner) checkReport(want Report, got jobstate.SweepReport, bad func(string, ...any)) *stepError {
	check := func(name string, w *int, g int) {
		if w != nil && *w != g {
			bad("report.%s: got %d, want %d", name, g, *w)
		}
	}
	check("jobs", want.Jobs, got.Jobs)
	check("finalized", want.Finalized, got.Finalized)
	check("aborted", want.Aborted, got.Aborted)
	check("retried", want.Retried, got.Retried)
	check("failed", want.Failed, got.Failed)
	check("requeued", want.Requeued, got.Requeued)
	check("expired", want.Expired, got.Expired)
	if want.Failures == nil {
		return nil
	}
	// Compared by job id and code: a job may have several aliases.
	type failure struct {
		id   uuid.UUID
		code string
	}
	wantF := make([]failure, len(want.Failures))
	for i, f := range want.Failures {
		id, ok := r.jobs[f.Job]
		if !ok {
			return &stepError{fmt.Sprintf("report.failures: no job named %q", f.Job)}
		}
		wantF[i] = failure{id, f.Error}
	}
	gotF := make([]failure, len(got.Failures))
	for i, f := range got.Failures {
		gotF[i] = failure{f.JobID, jobstate.Code(f.Err)}
	}
	if !reflect.DeepEqual(wantF, gotF) {
		bad("report.failures: got %v, want %v", gotF, wantF)
	}
	return nil
}

func (r *runner) aliasOf(id uuid.UUID) string {
	for a, x := range r.jobs {
		if x == id {
			return fmt.Sprintf("%q (%s)", a, id)
		}
	}
	return id.String()
}

func (r *runner) leaseOf(exec uuid.UUID) string {
	if exec == uuid.Nil {
		return `""`
	}
	for a, l := range r.leases {
		if l.ExecID == exec {
			return fmt.Sprintf("%q (%s)", a, exec)
		}
	}
	return exec.String()
}

// aliasRef is an alias written {alias} in an expected text.
var aliasRef = regexp.MustCompile(`\{([^{}]+)\}`)

// expandAliases replaces each {alias} of text by the id of the job bound
// to alias, or else of the execution of the lease bound to it.
func (r *runner) expandAliases(text string) (string, *stepError) {
	var verr *stepError
	out := aliasRef.ReplaceAllStringFunc(text, func(m string) string {
		name := m[1 : len(m)-1]
		if id, ok := r.jobs[name]; ok {
			return id.String()
		}
		if l, ok := r.leases[name]; ok {
			return l.ExecID.String()
		}
		verr = &stepError{fmt.Sprintf("no job or lease named %q", name)}
		return m
	})
	return out, verr
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return `""`
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func triples(list [][3]string) string {
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = fmt.Sprintf("[%q %q %q]", x[0], x[1], x[2])
	}
	return strings.Join(parts, " ")
}
