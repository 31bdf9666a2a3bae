package jobstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
)

// jsonSpec is a small machine for the JSON tests: queued, running, done
// or failed, with retries.
func jsonSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "render",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
			{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "DONE"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)}},
	}
}

// jsonEngine returns an engine on memstore whose clock reads start and
// whose ids are 0190...01, 0190...02, ... in turn.
func jsonEngine(start time.Time) (*jobstate.Engine, error) {
	def, err := jobstate.NewDefinition(jsonSpec())
	if err != nil {
		return nil, err
	}
	var n byte
	ids := func() (uuid.UUID, error) {
		n++
		id := uuid.MustParse("01900000-0000-7000-8000-000000000000")
		id[15] = n
		return id, nil
	}
	return jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(jobstate.NewManualClock(start)), jobstate.WithIDs(ids))
}

// freshJob creates one job on a jsonEngine whose clock reads 04:04:05.5
// at UTC+1.
func freshJob(t *testing.T) jobstate.Job {
	t.Helper()
	eng, err := jsonEngine(time.Date(2026, 3, 1, 4, 4, 5, 500_000_000, time.FixedZone("CET", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	created, err := eng.Create(context.Background(), jobstate.NewJob{Machine: "render", Payload: []byte(`{"doc":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	return created.Job
}

// fullJob has every field set, with a result that is not valid UTF-8 and
// times in several zones.
func fullJob() jobstate.Job {
	ny := time.FixedZone("EST", -5*3600)
	at := func(sec int, nsec int) time.Time {
		return time.Date(2026, 1, 2, 3, 4, sec, nsec, time.UTC)
	}
	return jobstate.Job{
		ID:              uuid.MustParse("01900000-0000-7000-8000-0000000000aa"),
		Machine:         "render",
		State:           "FAILED",
		Kind:            jobstate.KindTerminal,
		Outcome:         jobstate.OutcomeFailed,
		Payload:         []byte("héllo <world>"),
		Result:          []byte{0xff, 0x00, 0x10},
		Version:         12,
		Attempt:         4,
		RetryCount:      3,
		MaxRetries:      3,
		Backoff:         jobstate.ExponentialBackoff(2*time.Second, 1.5, time.Minute).WithJitter(jobstate.JitterEqual),
		OwnBackoff:      true,
		LastError:       "upload: 503",
		ErrorClass:      jobstate.ClassPermanent,
		IdempotencyKey:  "user-1/doc-7",
		Fingerprint:     "sha256:abc",
		Owner:           "user-1",
		Priority:        -2,
		CreatedAt:       at(0, 0),
		UpdatedAt:       at(9, 123456789),
		StartedAt:       at(1, 500_000_000).In(ny),
		CompletedAt:     at(9, 123456789),
		NotBefore:       at(5, 0),
		Deadline:        time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC),
		Leases:          1,
		LeaseExpiresAt:  at(39, 0),
		HeartbeatAt:     at(8, 1),
		Committed:       uuid.MustParse("01900000-0000-7000-8000-0000000000bb"),
		CancelRequested: true,
		WakeAt:          at(39, 0),
		SweepFailures:   2,
		SweepRetryAt:    at(41, 0),
	}
}

func TestJobJSONGolden(t *testing.T) {
	fresh := freshJob(t)
	for _, tc := range []struct {
		name string
		job  jobstate.Job
		want string
	}{
		{
			name: "every field set",
			job:  fullJob(),
			want: `{"id":"01900000-0000-7000-8000-0000000000aa","machine":"render","state":"FAILED","kind":"terminal",` +
				`"outcome":"failed","payload":"héllo \u003cworld\u003e","result_base64":"/wAQ","version":12,"attempt":4,` +
				`"retry_count":3,"max_retries":3,` +
				`"backoff":{"kind":"exponential","initial":"2s","factor":1.5,"max":"1m0s","jitter":"equal"},` +
				`"own_backoff":true,"last_error":"upload: 503","error_class":"permanent",` +
				`"idempotency_key":"user-1/doc-7","fingerprint":"sha256:abc","owner":"user-1","priority":-2,` +
				`"created_at":"2026-01-02T03:04:00Z","updated_at":"2026-01-02T03:04:09.123456789Z",` +
				`"started_at":"2026-01-02T03:04:01.5Z","completed_at":"2026-01-02T03:04:09.123456789Z",` +
				`"not_before":"2026-01-02T03:04:05Z","deadline":"2026-01-03T00:00:00Z","leases":1,` +
				`"lease_expires_at":"2026-01-02T03:04:39Z","heartbeat_at":"2026-01-02T03:04:08.000000001Z",` +
				`"committed":"01900000-0000-7000-8000-0000000000bb","cancel_requested":true,` +
				`"wake_at":"2026-01-02T03:04:39Z","sweep_failures":2,"sweep_retry_at":"2026-01-02T03:04:41Z"}`,
		},
		{
			name: "fresh job",
			job:  fresh,
			want: `{"id":"01900000-0000-7000-8000-000000000001","machine":"render","state":"QUEUED","kind":"ready",` +
				`"outcome":"","payload":"{\"doc\":7}","version":1,"attempt":0,"retry_count":0,"max_retries":3,` +
				`"priority":0,"created_at":"2026-03-01T03:04:05.5Z","updated_at":"2026-03-01T03:04:05.5Z","leases":0}`,
		},
		{
			name: "zero job",
			job:  jobstate.Job{},
			want: `{"id":"00000000-0000-0000-0000-000000000000","machine":"","state":"","outcome":"","version":0,` +
				`"attempt":0,"retry_count":0,"max_retries":0,"priority":0,"leases":0}`,
		},
		{
			name: "binary payload, text result",
			job:  jobstate.Job{Machine: "m", State: "S", Kind: jobstate.KindReady, Payload: []byte{0xc3, 0x28}, Result: []byte("ok")},
			want: `{"id":"00000000-0000-0000-0000-000000000000","machine":"m","state":"S","kind":"ready","outcome":"",` +
				`"payload_base64":"wyg=","result":"ok","version":0,"attempt":0,"retry_count":0,"max_retries":0,` +
				`"priority":0,"leases":0}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.job.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, tc.want)
			}
			// json.Marshal uses it, for a Job and a *Job alike.
			for _, v := range []any{tc.job, &tc.job} {
				viaPkg, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if string(viaPkg) != tc.want {
					t.Fatalf("json.Marshal(%T):\n got %s\nwant %s", v, viaPkg, tc.want)
				}
			}
			var back jobstate.Job
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if want := normalJob(tc.job); !reflect.DeepEqual(back, want) {
				t.Fatalf("decoded:\n got %+v\nwant %+v", back, want)
			}
		})
	}
}

// normalJob is j as UnmarshalJSON gives it back.
var normalJob = jobstatetest.JSONNormal

// TestJobJSONTimesInUTC checks that times decode in UTC whatever their
// offset, and that "" and the zero instant mean no time.
func TestJobJSONTimesInUTC(t *testing.T) {
	var j jobstate.Job
	in := `{"created_at":"2026-01-02T04:04:05.25+01:00","not_before":"","deadline":"0001-01-01T00:00:00Z",` +
		`"started_at":"2026-01-01T19:00:00-05:00"}`
	if err := json.Unmarshal([]byte(in), &j); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 250_000_000, time.UTC)
	if !reflect.DeepEqual(j.CreatedAt, want) {
		t.Errorf("created_at = %#v, want %#v", j.CreatedAt, want)
	}
	if j.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at location = %v, want UTC", j.CreatedAt.Location())
	}
	if want := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC); !reflect.DeepEqual(j.StartedAt, want) {
		t.Errorf("started_at = %#v, want %#v", j.StartedAt, want)
	}
	if !reflect.DeepEqual(j.NotBefore, time.Time{}) || !reflect.DeepEqual(j.Deadline, time.Time{}) {
		t.Errorf("not_before, deadline = %#v, %#v, want zero times", j.NotBefore, j.Deadline)
	}
	// A time with a monotonic reading is written as its wall time.
	now := time.Now()
	out, err := jobstate.Job{CreatedAt: now}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `"created_at":"` + now.UTC().Format(time.RFC3339Nano) + `"`; !strings.Contains(string(out), want) {
		t.Errorf("MarshalJSON = %s, want it to hold %s", out, want)
	}
}

// TestJobJSONLenient checks what decoding accepts beyond MarshalJSON's own
// output: unknown keys (at the top and in backoff), null values, base64
// bytes that are valid UTF-8, other UUID forms, and the null job.
func TestJobJSONLenient(t *testing.T) {
	in := `{"id":"{01900000-0000-7000-8000-0000000000aa}","machine":"render","state":"QUEUED","kind":"ready",` +
		`"outcome":null,"payload_base64":"aGk=","result":"","committed":"","version":3,"links":{"self":"/jobs/1"},` +
		`"Version":99,"backoff":{"kind":"fixed","initial":"1s","future":[1,2]},"retry_count":null,"priority":-0}`
	var j jobstate.Job
	if err := json.Unmarshal([]byte(in), &j); err != nil {
		t.Fatal(err)
	}
	want := jobstate.Job{
		ID: uuid.MustParse("01900000-0000-7000-8000-0000000000aa"), Machine: "render", State: "QUEUED",
		Kind: jobstate.KindReady, Payload: []byte("hi"), Version: 3, Backoff: jobstate.FixedBackoff(time.Second),
	}
	if !reflect.DeepEqual(j, want) {
		t.Fatalf("decoded:\n got %+v\nwant %+v", j, want)
	}

	// Every field is replaced: absent keys give zero values.
	if err := json.Unmarshal([]byte(`{"state":"DONE"}`), &j); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j, jobstate.Job{State: "DONE"}) {
		t.Fatalf("after a second decoding: %+v, want only State set", j)
	}

	// null leaves the job as it is, as encoding/json does.
	if err := j.UnmarshalJSON([]byte(" null ")); err != nil {
		t.Fatal(err)
	}
	if j.State != "DONE" {
		t.Fatalf("null changed the job: %+v", j)
	}

	// Inside another value: a list of jobs, as an API returns it.
	list := []jobstate.Job{fullJob(), freshJob(t)}
	data, err := json.Marshal(map[string]any{"jobs": list, "next": ""})
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Jobs []jobstate.Job `json:"jobs"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		t.Fatal(err)
	}
	if want := []jobstate.Job{normalJob(list[0]), normalJob(list[1])}; !reflect.DeepEqual(page.Jobs, want) {
		t.Fatalf("decoded list:\n got %+v\nwant %+v", page.Jobs, want)
	}
}

// TestJobJSONRefusesMalformed checks that every malformed value is refused
// with ErrInvalidArgument, naming its key, and leaves the job unchanged.
func TestJobJSONRefusesMalformed(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{`{"id":"not-a-uuid"}`, "id"},
		{`{"id":7}`, "id"},
		{`{"machine":["render"]}`, "machine"},
		{`{"state":true}`, "state"},
		{`{"kind":"running"}`, "kind"},
		{`{"kind":""}`, "kind"},
		{`{"kind":2}`, "kind"},
		{`{"outcome":"done"}`, "outcome"},
		{`{"payload":"a","payload_base64":"YQ=="}`, "payload"},
		{`{"payload":5}`, "payload"},
		{`{"result_base64":"***"}`, "result_base64"},
		{`{"version":"1"}`, "version"},
		{`{"version":1.5}`, "version"},
		{`{"version":1e3}`, "version"},
		{`{"version":9223372036854775808}`, "version"},
		{`{"attempt":-9223372036854775809}`, "attempt"},
		{`{"retry_count":{}}`, "retry_count"},
		{`{"max_retries":false}`, "max_retries"},
		{`{"backoff":"1s"}`, "backoff"},
		{`{"backoff":{"kind":"linear","initial":"1s"}}`, "backoff"},
		{`{"backoff":{"kind":"fixed","initial":"1 s"}}`, "backoff.initial"},
		{`{"backoff":{"kind":"fixed"}}`, "backoff"},
		{`{"backoff":{"kind":"exponential","initial":"1s","factor":"2"}}`, "backoff.factor"},
		{`{"backoff":{"kind":"exponential","initial":"1s","factor":1e999}}`, "backoff.factor"},
		{`{"backoff":{"kind":"exponential","initial":"1s","factor":0.5}}`, "backoff"},
		{`{"backoff":{"kind":"fixed","initial":"-1s"}}`, "backoff"},
		{`{"backoff":{"jitter":7}}`, "backoff.jitter"},
		{`{"own_backoff":"yes"}`, "own_backoff"},
		{`{"own_backoff":1}`, "own_backoff"},
		{`{"error_class":"retry_after"}`, "error_class"},
		{`{"priority":[]}`, "priority"},
		{`{"created_at":"2026-01-02 03:04:05Z"}`, "created_at"},
		{`{"updated_at":"2026-01-02T03:04:05"}`, "updated_at"},
		{`{"not_before":1767322000}`, "not_before"},
		{`{"deadline":"0000-12-31T23:59:59Z"}`, "deadline"},
		{`{"wake_at":"9999-12-31T23:59:59-01:00"}`, "wake_at"},
		{`{"committed":"01900000-0000-7000-8000"}`, "committed"},
		{`{"cancel_requested":null,"sweep_failures":"2"}`, "sweep_failures"},
		{`{"sweep_retry_at":"yesterday"}`, "sweep_retry_at"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			j := jobstate.Job{State: "KEEP"}
			err := j.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, jobstate.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if want := "job JSON: " + tc.field + ": "; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to name the field (%q)", err, want)
			}
			if j.State != "KEEP" {
				t.Errorf("a refused input changed the job: %+v", j)
			}
			// Through encoding/json, the error is the same.
			if err2 := json.Unmarshal([]byte(tc.in), &j); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("json.Unmarshal: err = %v, want %v", err2, err)
			}
		})
	}
	for _, in := range []string{``, `   `, `[]`, `"job"`, `42`, `true`, `{`, `{"a":1} x`, `{"a":}`} {
		var j jobstate.Job
		err := j.UnmarshalJSON([]byte(in))
		if !errors.Is(err, jobstate.ErrInvalidArgument) || !strings.Contains(err.Error(), "job JSON: ") {
			t.Errorf("UnmarshalJSON(%q): err = %v, want ErrInvalidArgument", in, err)
		}
	}
}

// TestJobJSONMarshalRefusals checks that a job MarshalJSON cannot write
// without loss is refused with ErrInvalidArgument naming the field.
func TestJobJSONMarshalRefusals(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*jobstate.Job)
	}{
		{"kind", func(j *jobstate.Job) { j.Kind = 9 }},
		{"outcome", func(j *jobstate.Job) { j.Outcome = "done" }},
		{"error_class", func(j *jobstate.Job) { j.ErrorClass = "retry_after" }},
		{"machine", func(j *jobstate.Job) { j.Machine = "a\xffb" }},
		{"state", func(j *jobstate.Job) { j.State = "\xc3" }},
		{"last_error", func(j *jobstate.Job) { j.LastError = "\xed\xa0\x80" }},
		{"idempotency_key", func(j *jobstate.Job) { j.IdempotencyKey = "\x80" }},
		{"fingerprint", func(j *jobstate.Job) { j.Fingerprint = "\xfe" }},
		{"owner", func(j *jobstate.Job) { j.Owner = "\xff" }},
		{"backoff", func(j *jobstate.Job) { j.Backoff.Factor = math.NaN() }},
		{"backoff", func(j *jobstate.Job) { j.Backoff.Factor = math.Inf(1) }},
		{"backoff", func(j *jobstate.Job) { j.Backoff.Kind = "linear" }},
		{"backoff", func(j *jobstate.Job) { j.Backoff.Initial = -time.Second }},
		{"created_at", func(j *jobstate.Job) { j.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"deadline", func(j *jobstate.Job) { j.Deadline = time.Time{}.Add(-time.Nanosecond) }},
		{"sweep_retry_at", func(j *jobstate.Job) {
			j.SweepRetryAt = time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -3600))
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			j := fullJob()
			tc.edit(&j)
			_, err := j.MarshalJSON()
			if !errors.Is(err, jobstate.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if want := " as JSON: " + tc.field + ": "; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to name the field (%q)", err, want)
			}
			if _, err := json.Marshal(j); !errors.Is(err, jobstate.ErrInvalidArgument) {
				t.Errorf("json.Marshal: err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	// The bounds themselves are written.
	j := jobstate.Job{CreatedAt: jobstate.MinTime, UpdatedAt: jobstate.MaxTime}
	out, err := j.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `"created_at":"0001-01-01T00:00:00.000000001Z","updated_at":"9999-12-31T23:59:59.999999999Z"`; !strings.Contains(string(out), want) {
		t.Errorf("MarshalJSON = %s, want it to hold %s", out, want)
	}
}

func FuzzJobJSON(f *testing.F) {
	// Short seed inputs of a few fields each, so that the inputs the
	// fuzzer derives from them stay short and quick to minimize.
	for _, s := range []string{
		`{"id":"01900000-0000-7000-8000-000000000001","machine":"render","state":"QUEUED","kind":"ready"}`,
		`{"outcome":"dead_lettered","version":-9223372036854775808,"attempt":1,"priority":1e3}`,
		`{"payload":"{\"doc\":7}","result_base64":"/wAQ"}`,
		`{"payload_base64":"aGk=","result":"\ud800"}`,
		`{"backoff":{"kind":"exponential","initial":"1ms","factor":1.5,"max":"876000h","jitter":"full"}}`,
		`{"backoff":{"kind":"fixed","initial":"1s"},"own_backoff":true,"cancel_requested":false}`,
		`{"last_error":"503","error_class":"retryable","idempotency_key":"k","owner":"u"}`,
		`{"created_at":"2026-01-02T04:04:05.25+01:00","deadline":"0001-01-01T00:00:00Z"}`,
		`{"not_before":"9999-12-31T23:59:59.999999999Z","wake_at":""}`,
		`{"committed":"01900000-0000-7000-8000-0000000000bb","sweep_failures":2,"x":[null]}`,
		`null`, `{}`, `[]`, `{"a":`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var j jobstate.Job
		if err := j.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, jobstate.ErrInvalidArgument) {
				t.Fatalf("UnmarshalJSON(%q): error %v does not wrap ErrInvalidArgument", data, err)
			}
			if !reflect.DeepEqual(j, jobstate.Job{}) {
				t.Fatalf("UnmarshalJSON(%q) failed but changed the job: %+v", data, j)
			}
			return
		}
		out, err := j.MarshalJSON()
		if err != nil {
			t.Fatalf("UnmarshalJSON(%q) gave %+v, which MarshalJSON refuses: %v", data, j, err)
		}
		var back jobstate.Job
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("UnmarshalJSON(%s) of MarshalJSON's output: %v", out, err)
		}
		if !reflect.DeepEqual(back, j) {
			t.Fatalf("input %q decoded to\n%#v\nwhich re-encodes to %s and decodes to\n%#v", data, j, out, back)
		}
	})
}

func ExampleJob_MarshalJSON() {
	eng, err := jsonEngine(time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "render", Payload: []byte(`{"doc":7}`), Owner: "user-1", Priority: 5}); err != nil {
		fmt.Println(err)
		return
	}
	claimed, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "render", Worker: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	// An API handler returns the job as it is.
	out, err := json.MarshalIndent(claimed.Job, "", "  ")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))

	// And a client reads it back.
	var job jobstate.Job
	if err := json.Unmarshal(out, &job); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(job.State, job.Kind, job.Attempt, job.LeaseExpiresAt)
	// Output:
	// {
	//   "id": "01900000-0000-7000-8000-000000000001",
	//   "machine": "render",
	//   "state": "RUNNING",
	//   "kind": "active",
	//   "outcome": "",
	//   "payload": "{\"doc\":7}",
	//   "version": 2,
	//   "attempt": 1,
	//   "retry_count": 0,
	//   "max_retries": 3,
	//   "owner": "user-1",
	//   "priority": 5,
	//   "created_at": "2026-03-01T09:30:00Z",
	//   "updated_at": "2026-03-01T09:30:00Z",
	//   "started_at": "2026-03-01T09:30:00Z",
	//   "leases": 1,
	//   "lease_expires_at": "2026-03-01T09:30:30Z",
	//   "heartbeat_at": "2026-03-01T09:30:00Z",
	//   "wake_at": "2026-03-01T09:30:30Z"
	// }
	// RUNNING active 1 2026-03-01 09:30:30 +0000 UTC
}
