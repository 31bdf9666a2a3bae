package jobstateotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	jobstateotel "github.com/jobstate/jobstate/otel"
	"github.com/jobstate/jobstate/worker"
)

var (
	machine  = attribute.String("jobstate.machine", "queue")
	msgAttrs = []attribute.KeyValue{
		attribute.String("messaging.system", "jobstate"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", "queue"),
		machine,
	}
)

func transition(event, state, outcome string) string {
	kv := []attribute.KeyValue{machine, attribute.String("jobstate.event", event), attribute.String("jobstate.state", state)}
	if outcome != "" {
		kv = append(kv, attribute.String("jobstate.outcome", outcome))
	}
	return attrs(kv...)
}

func processed(result, errType string) string {
	kv := append(append([]attribute.KeyValue(nil), msgAttrs...), attribute.String("jobstate.run.result", result))
	if errType != "" {
		kv = append(kv, attribute.String("error.type", errType))
	}
	return attrs(kv...)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSucceededRun runs one job through the worker, three seconds after
// it was created, and checks every instrument and the run's span.
func TestSucceededRun(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 3)), jobstate.WithObserver(r.tel.Observer()))
	reg, err := r.tel.ObserveCounts(e.Engine, "queue")
	if err != nil {
		t.Fatalf("ObserveCounts: %v", err)
	}
	defer func() { _ = reg.Unregister() }()

	job := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("scan.tiff")})
	e.Advance(3 * time.Second)
	var parent trace.SpanContext
	w := e.Worker(worker.Handle("queue", r.tel.WrapHandler(worker.HandlerFunc(func(ctx context.Context, task *worker.Task) (jobstate.CommitInput, error) {
		parent = trace.SpanContextFromContext(ctx)
		_, child := r.tp.Tracer("handler").Start(ctx, "ocr")
		child.End()
		return jobstate.CommitInput{Result: []byte("ok")}, nil
	})), 1))
	if n := e.Drain(w); n != 1 {
		t.Fatalf("drained %d jobs, want 1", n)
	}
	e.AssertState(job.ID, "SUCCEEDED")

	rm := r.collect()
	got := r.sums(rm, "jobstate.transitions", true)
	want := map[string]int64{
		transition("create", "QUEUED", ""):              1,
		transition("claim", "RUNNING", ""):              1,
		transition("succeed", "SUCCEEDED", "succeeded"): 1,
	}
	compareSums(t, "jobstate.transitions", got, want)

	queue := r.histograms(rm, "jobstate.queue.duration")
	if q := queue[attrs(machine)]; len(queue) != 1 || q.Count != 1 || !near(q.Sum, 3) {
		t.Errorf("jobstate.queue.duration = %v, want one claim 3 s after the job was due", queue)
	}
	proc := r.histograms(rm, "messaging.process.duration")
	if p := proc[processed("success", "")]; len(proc) != 1 || p.Count != 1 || p.Sum < 0 {
		t.Errorf("messaging.process.duration = %v, want one successful run", proc)
	}
	jobs := r.sums(rm, "jobstate.jobs", false)
	wantJobs := map[string]int64{}
	for _, s := range []struct{ state, kind string }{{"QUEUED", "ready"}, {"RUNNING", "active"}, {"RETRYING", "waiting"}, {"SUCCEEDED", "terminal"}, {"FAILED", "terminal"}} {
		wantJobs[attrs(machine, attribute.String("jobstate.state", s.state), attribute.String("jobstate.state.kind", s.kind))] = 0
	}
	wantJobs[attrs(machine, attribute.String("jobstate.state", "SUCCEEDED"), attribute.String("jobstate.state.kind", "terminal"))] = 1
	compareSums(t, "jobstate.jobs", jobs, wantJobs)

	spans := r.ended("process queue")
	if len(spans) != 1 {
		t.Fatalf("%d spans named %q, want 1 (all: %d)", len(spans), "process queue", len(r.spans.Ended()))
	}
	s := spans[0]
	if s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span kind %v, want consumer", s.SpanKind())
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("span status %v, want unset", s.Status())
	}
	if s.Parent().IsValid() {
		t.Errorf("span has parent %v, want a root", s.Parent())
	}
	if len(s.Links()) != 0 {
		t.Errorf("span has %d links, want none: the worker's context had no span", len(s.Links()))
	}
	wantAttrs(t, "run span", spanAttrs(s), map[string]string{
		"jobstate.job.id":            job.ID.String(),
		"jobstate.machine":           "queue",
		"jobstate.state":             "RUNNING",
		"jobstate.attempt":           "1",
		"jobstate.worker":            jobstatetest.WorkerName,
		"jobstate.run.result":        "success",
		"messaging.system":           "jobstate",
		"messaging.operation.name":   "process",
		"messaging.operation.type":   "process",
		"messaging.destination.name": "queue",
		"messaging.message.id":       job.ID.String(),
		"messaging.client.id":        jobstatetest.WorkerName,
	})
	if _, ok := spanAttrs(s)["error.type"]; ok {
		t.Errorf("a successful run's span has error.type")
	}
	if !parent.Equal(s.SpanContext()) {
		t.Errorf("the handler's context carries span %v, want the run's span %v", parent, s.SpanContext())
	}
	if child := r.ended("ocr"); len(child) != 1 || child[0].Parent().SpanID() != s.SpanContext().SpanID() {
		t.Errorf("the handler's own span is not a child of the run's span")
	}
}

func compareSums(t *testing.T, name string, got, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s{%s} = %d, want %d", name, k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s{%s} = %d, not expected", name, k, v)
		}
	}
}

// TestFailingRun runs a job whose handler always fails, with one retry:
// both runs' spans have status Error, the transitions count a retry and
// a failure, and the second claim waited 4 s past the end of the 1 s
// backoff (due time = NotBefore).
func TestFailingRun(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 1)), jobstate.WithObserver(r.tel.Observer()))
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	w := e.Worker(worker.Handle("queue", r.tel.WrapHandler(worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, errors.New("scanner offline")
	})), 1))
	e.Drain(w)
	e.AssertState(job.ID, "RETRYING")
	e.Advance(5 * time.Second)
	e.Drain(w)
	e.AssertState(job.ID, "FAILED")

	rm := r.collect()
	compareSums(t, "jobstate.transitions", r.sums(rm, "jobstate.transitions", true), map[string]int64{
		transition("create", "QUEUED", ""):     1,
		transition("claim", "RUNNING", ""):     2,
		transition("retry", "RETRYING", ""):    1,
		transition("requeue", "QUEUED", ""):    1,
		transition("fail", "FAILED", "failed"): 1,
	})
	queue := r.histograms(rm, "jobstate.queue.duration")
	if q := queue[attrs(machine)]; q.Count != 2 || !near(q.Sum, 4) {
		t.Errorf("jobstate.queue.duration = %v, want 2 claims, 0 s and 4 s after they were due", queue)
	}
	proc := r.histograms(rm, "messaging.process.duration")
	if p := proc[processed("error", "*errors.errorString")]; len(proc) != 1 || p.Count != 2 {
		t.Errorf("messaging.process.duration = %v, want two failed runs", proc)
	}

	spans := r.ended("process queue")
	if len(spans) != 2 {
		t.Fatalf("%d run spans, want 2", len(spans))
	}
	for i, s := range spans {
		if s.Status().Code != codes.Error || s.Status().Description != "scanner offline" {
			t.Errorf("run %d: status %v, want Error %q", i+1, s.Status(), "scanner offline")
		}
		if got := eventNames(s); got != "exception" {
			t.Errorf("run %d: events %q, want the recorded error", i+1, got)
		}
		wantAttrs(t, "failed run span", spanAttrs(s), map[string]string{
			"jobstate.attempt":    []string{"1", "2"}[i],
			"jobstate.run.result": "error",
			"error.type":          "*errors.errorString",
			"jobstate.job.id":     job.ID.String(),
		})
	}
}

// TestPanickingRun: the span records the panic and has status Error, and
// the panic still reaches the runtime, which fails the execution with a
// *worker.PanicError and goes on with the next job.
func TestPanickingRun(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	bad := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("bad")})
	good := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("good")})
	w := e.Worker(worker.Handle("queue", r.tel.WrapHandler(worker.HandlerFunc(func(_ context.Context, task *worker.Task) (jobstate.CommitInput, error) {
		if string(task.Job().Payload) == "bad" {
			panic("kaboom")
		}
		return jobstate.CommitInput{}, nil
	})), 1))
	if n := e.Drain(w); n != 2 {
		t.Fatalf("drained %d jobs, want 2", n)
	}
	e.AssertState(bad.ID, "FAILED")
	e.AssertState(good.ID, "SUCCEEDED")
	if last := e.Get(bad.ID).LastError; !strings.Contains(last, "handler panicked: kaboom") {
		t.Errorf("the job's LastError is %q: the runtime did not see the panic", last)
	}

	rm := r.collect()
	proc := r.histograms(rm, "messaging.process.duration")
	if proc[processed("panic", "*worker.PanicError")].Count != 1 || proc[processed("success", "")].Count != 1 || len(proc) != 2 {
		t.Errorf("messaging.process.duration = %v, want one panic and one success", proc)
	}
	compareSums(t, "jobstate.transitions", r.sums(rm, "jobstate.transitions", true), map[string]int64{
		transition("create", "QUEUED", ""):              2,
		transition("claim", "RUNNING", ""):              2,
		transition("fail", "FAILED", "failed"):          1,
		transition("succeed", "SUCCEEDED", "succeeded"): 1,
	})

	for _, s := range r.ended("process queue") {
		a := spanAttrs(s)
		if a["jobstate.job.id"] != bad.ID.String() {
			if s.Status().Code != codes.Unset {
				t.Errorf("the good job's span has status %v", s.Status())
			}
			continue
		}
		if s.Status().Code != codes.Error || s.Status().Description != "handler panicked: kaboom" {
			t.Errorf("panicked run: status %v, want Error", s.Status())
		}
		wantAttrs(t, "panicked run span", a, map[string]string{"jobstate.run.result": "panic", "error.type": "*worker.PanicError"})
		evs := s.Events()
		if len(evs) != 1 || evs[0].Name != "exception" {
			t.Fatalf("panicked run: events %q, want one exception", eventNames(s))
		}
		ev := map[string]string{}
		for _, kv := range evs[0].Attributes {
			ev[string(kv.Key)] = kv.Value.Emit()
		}
		if ev["exception.message"] != "kaboom" || ev["exception.type"] != "string" || !strings.Contains(ev["exception.stacktrace"], "TestPanickingRun") {
			t.Errorf("exception event %v: want the panic value, its type and a stack through the handler", ev)
		}
	}
	if len(r.ended("process queue")) != 2 {
		t.Errorf("%d run spans, want 2", len(r.ended("process queue")))
	}
}

// TestSnoozedRun: a snooze is not an error.
func TestSnoozedRun(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	w := e.Worker(worker.Handle("queue", r.tel.WrapHandler(worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, worker.Snooze(time.Minute)
	})), 1))
	e.Drain(w)
	e.AssertState(job.ID, "RETRYING")
	spans := r.ended("process queue")
	if len(spans) != 1 || spans[0].Status().Code != codes.Unset || spanAttrs(spans[0])["jobstate.run.result"] != "snooze" {
		t.Fatalf("spans %v: want one snoozed run with status unset", spans)
	}
	proc := r.histograms(r.collect(), "messaging.process.duration")
	if proc[processed("snooze", "")].Count != 1 || len(proc) != 1 {
		t.Errorf("messaging.process.duration = %v, want one snooze", proc)
	}
}

// scanError is a handler's own error type.
type scanError struct{ page int }

func (e *scanError) Error() string { return fmt.Sprintf("page %d unreadable", e.page) }

// TestErrorTypeNamesTheCause: error.type is the type of the innermost
// error, not of the wrappers around it.
func TestErrorTypeNamesTheCause(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	e.Create(jobstate.NewJob{Machine: "queue"})
	e.Run("queue", r.tel.WrapHandler(worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, fmt.Errorf("ocr: %w", jobstate.Permanent(&scanError{page: 3}))
	})))
	const want = "*jobstateotel_test.scanError"
	spans := r.ended("process queue")
	if len(spans) != 1 || spanAttrs(spans[0])["error.type"] != want || spans[0].Status().Description != "ocr: page 3 unreadable" {
		t.Fatalf("spans %v: want one with error.type %s", spans, want)
	}
	if proc := r.histograms(r.collect(), "messaging.process.duration"); proc[processed("error", want)].Count != 1 {
		t.Errorf("messaging.process.duration = %v, want one run with error.type %s", proc, want)
	}
}

// TestRunSpanLinksAmbientSpan: a span in the worker's context is linked
// to, not made the parent of, the run's span; and with span events on,
// the transitions made in a context with a span are events of that span.
func TestRunSpanLinksAmbientSpan(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	ctx, request := r.tp.Tracer("test").Start(context.Background(), "request")
	c, err := e.Engine.Create(ctx, jobstate.NewJob{Machine: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	request.End()
	ev := r.ended("request")[0].Events()
	if len(ev) != 1 || ev[0].Name != jobstateotel.SpanEventTransition {
		t.Fatalf("request span events %v, want one transition", ev)
	}
	got := map[string]string{}
	for _, kv := range ev[0].Attributes {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	wantAttrs(t, "create event", got, map[string]string{
		"jobstate.job.id": c.Job.ID.String(), "jobstate.event": "create", "jobstate.state": "QUEUED",
		"jobstate.machine": "queue", "jobstate.version": "1",
	})

	ctx, drain := r.tp.Tracer("test").Start(context.Background(), "drain")
	w := e.Worker(worker.Handle("queue", r.tel.WrapHandler(worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, nil
	})), 1))
	if _, err := w.Drain(ctx, 10); err != nil {
		t.Fatal(err)
	}
	drain.End()
	s := r.ended("process queue")[0]
	if s.Parent().IsValid() || s.SpanContext().TraceID() == drain.SpanContext().TraceID() {
		t.Errorf("the run's span is in the worker context's trace; want a new root")
	}
	if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != drain.SpanContext().SpanID() {
		t.Errorf("the run's span links %v, want the worker context's span", l)
	}
}

// TestAdvanceIsAnEventOfTheRunSpan: a move the handler makes through its
// Task with its context is an event of the run's span.
func TestAdvanceIsAnEventOfTheRunSpan(t *testing.T) {
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "OCR", Kind: jobstate.KindActive},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: "ocr", To: "OCR"},
			{From: []jobstate.State{"RUNNING", "OCR"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING", "OCR"}, Event: jobstate.EventFail, To: "FAILED"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(def), jobstate.WithObserver(r.tel.Observer()))
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	e.Run("queue", r.tel.WrapHandler(worker.HandlerFunc(func(ctx context.Context, task *worker.Task) (jobstate.CommitInput, error) {
		if _, err := task.Advance(ctx, "ocr", jobstate.Call{}); err != nil {
			return jobstate.CommitInput{}, err
		}
		return jobstate.CommitInput{}, nil
	})))
	e.AssertHistory(job.ID, "create", "claim", "ocr", "succeed")
	s := r.ended("process queue")[0]
	if got := eventNames(s); got != jobstateotel.SpanEventTransition {
		t.Fatalf("run span events %q, want one transition", got)
	}
	got := map[string]string{}
	for _, kv := range s.Events()[0].Attributes {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	wantAttrs(t, "advance event", got, map[string]string{
		"jobstate.job.id": job.ID.String(), "jobstate.event": "ocr", "jobstate.state.from": "RUNNING",
		"jobstate.state": "OCR", "jobstate.version": "3",
	})
	if _, ok := got["jobstate.outcome"]; ok {
		t.Errorf("a move between active states has an outcome: %v", got)
	}
}

// TestWithoutSpanEvents: WithSpanEvents(false) leaves callers' spans alone.
func TestWithoutSpanEvents(t *testing.T) {
	r := newRig(t, jobstateotel.WithSpanEvents(false))
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "request")
	if _, err := e.Engine.Create(ctx, jobstate.NewJob{Machine: "queue"}); err != nil {
		t.Fatal(err)
	}
	span.End()
	if ev := r.ended("request")[0].Events(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
	if got := r.sums(r.collect(), "jobstate.transitions", true); got[transition("create", "QUEUED", "")] != 1 {
		t.Errorf("jobstate.transitions = %v: the counter must not depend on span events", got)
	}
}

// plainStore hides every optional capability of the store it wraps,
// Counter among them.
type plainStore struct{ jobstate.Store }

// brokenCounter is a store whose Count fails.
type brokenCounter struct{ jobstate.Store }

var errCount = errors.New("count: connection refused")

func (brokenCounter) Count(context.Context, string) (map[jobstate.State]int, error) {
	return nil, errCount
}

// TestCountsUnsupported: on a store without Counter, collections report
// no jobs per state and no error; the other instruments work.
func TestCountsUnsupported(t *testing.T) {
	r := newRig(t)
	eng, err := jobstate.New(plainStore{memstore.New()}, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(r.tel.Observer()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Counts(context.Background(), "queue"); !errors.Is(err, jobstate.ErrUnsupported) {
		t.Fatalf("Counts: %v, want ErrUnsupported (the wrapper must hide Counter)", err)
	}
	reg, err := r.tel.ObserveCounts(eng, "queue")
	if err != nil {
		t.Fatalf("ObserveCounts: %v", err)
	}
	defer func() { _ = reg.Unregister() }()
	if _, err := eng.Create(context.Background(), jobstate.NewJob{Machine: "queue"}); err != nil {
		t.Fatal(err)
	}
	rm := r.collect()
	if m := metric(rm, "jobstate.jobs"); m != nil {
		t.Errorf("jobstate.jobs reported on a store without counts: %+v", m.Data)
	}
	if got := r.sums(rm, "jobstate.transitions", true); got[transition("create", "QUEUED", "")] != 1 {
		t.Errorf("jobstate.transitions = %v", got)
	}
}

// TestCountsError: a failing Count is the collection's error, wrapped.
func TestCountsError(t *testing.T) {
	r := newRig(t)
	eng, err := jobstate.New(brokenCounter{memstore.New()}, jobstate.WithMachines(queueMachine(t, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tel.ObserveCounts(eng, "queue"); err != nil {
		t.Fatalf("ObserveCounts: %v", err)
	}
	err = collectErr(r)
	if err == nil || !strings.Contains(err.Error(), `count the jobs of machine "queue": `+errCount.Error()) {
		t.Errorf("collect: %v, want the store's error naming the machine", err)
	}
}

// TestObserveCountsArguments: bad arguments are refused, and Unregister
// stops the reports.
func TestObserveCountsArguments(t *testing.T) {
	r := newRig(t)
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)))
	if _, err := r.tel.ObserveCounts(nil, "queue"); !errors.Is(err, jobstate.ErrInvalidArgument) {
		t.Errorf("nil engine: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.tel.ObserveCounts(&jobstate.Engine{}, "queue"); !errors.Is(err, jobstate.ErrInvalidArgument) {
		t.Errorf("zero engine: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.tel.ObserveCounts(e.Engine); !errors.Is(err, jobstate.ErrInvalidArgument) {
		t.Errorf("no machine: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.tel.ObserveCounts(e.Engine, "queue", "thumbs"); !errors.Is(err, jobstate.ErrUnknownMachine) || !strings.Contains(err.Error(), `"thumbs"`) {
		t.Errorf("unknown machine: %v, want ErrUnknownMachine naming it", err)
	}
	reg, err := r.tel.ObserveCounts(e.Engine, "queue", "queue")
	if err != nil {
		t.Fatal(err)
	}
	e.Create(jobstate.NewJob{Machine: "queue"})
	queued := attrs(machine, attribute.String("jobstate.state", "QUEUED"), attribute.String("jobstate.state.kind", "ready"))
	if got := r.sums(r.collect(), "jobstate.jobs", false); got[queued] != 1 || len(got) != 5 {
		t.Errorf("jobstate.jobs = %v, want one QUEUED job among 5 states (a machine named twice counted once)", got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if m := metric(r.collect(), "jobstate.jobs"); m != nil {
		t.Errorf("jobstate.jobs still reported after Unregister: %+v", m.Data)
	}
}

// TestNewOptions: bad options are refused; no option means the global
// providers.
func TestNewOptions(t *testing.T) {
	for name, opt := range map[string]jobstateotel.Option{
		"nil option":          nil,
		"nil meter provider":  jobstateotel.WithMeterProvider(nil),
		"nil tracer provider": jobstateotel.WithTracerProvider(nil),
	} {
		if _, err := jobstateotel.New(opt); !errors.Is(err, jobstate.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	tel, err := jobstateotel.New()
	if err != nil {
		t.Fatalf("New with the global providers: %v", err)
	}
	// The global providers are no-ops until set: everything must still work.
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine(t, 0)), jobstate.WithObserver(tel.Observer()))
	if _, err := tel.ObserveCounts(e.Engine, "queue"); err != nil {
		t.Fatal(err)
	}
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	e.Run("queue", tel.WrapHandler(worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, nil
	})))
	e.AssertState(job.ID, "SUCCEEDED")
	if tel.WrapHandler(nil) != nil {
		t.Errorf("WrapHandler(nil) is not nil: worker.New could not report it")
	}
}

// collectErr collects and returns the error.
func collectErr(r *rig) error {
	var rm metricdata.ResourceMetrics
	return r.reader.Collect(context.Background(), &rm)
}
