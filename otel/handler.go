package jobstateotel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/worker"
)

// operation is the messaging operation a handler run is.
const operation = "process"

// WrapHandler returns h wrapped so that each run has a span and a
// duration. Its method value is a worker middleware,
// func(worker.Handler) worker.Handler:
//
//	worker.Handle("queue", tel.WrapHandler(process), 8)
//
// Each run gets a consumer span named "process <machine>", started as the
// root of a new trace (the worker's context lives as long as the process,
// so a span in it is linked to, not made the parent), with the job's id,
// machine, state at claim, attempt and worker as attributes, and the
// messaging attributes of the semantic conventions. The handler's
// context carries the span, so the spans the handler starts are its
// children, and the moves it makes through its Task appear as its events
// (see WithSpanEvents).
//
// When the handler returns an error, the span records it and its status
// is Error; a snooze (worker.Snooze) is not an error. When the handler
// panics, the span records the panic value and the stack, its status is
// Error, and the panic goes on to the runtime, which fails the execution
// with a *worker.PanicError as usual. The run's duration, on the system
// clock, goes to messaging.process.duration with the result (success,
// error, panic, snooze) and, for an error or a panic, its type
// (error.type: the Go type of the innermost error of the chain, or
// *worker.PanicError).
//
// A nil h gives nil, which worker.New then reports.
func (t *Telemetry) WrapHandler(h worker.Handler) worker.Handler {
	if h == nil {
		return nil
	}
	return &handler{t: t, next: h}
}

// handler is a worker.Handler that observes the runs of another.
type handler struct {
	t    *Telemetry
	next worker.Handler
}

// Work runs the wrapped handler inside a span and records its duration.
func (h *handler) Work(ctx context.Context, task *worker.Task) (res jobstate.CommitInput, err error) {
	job, lease := task.Job(), task.Lease()
	id, name := job.ID.String(), task.Worker()
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithNewRoot(),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String(System),
			semconv.MessagingOperationName(operation),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationName(job.Machine),
			semconv.MessagingMessageID(id),
			semconv.MessagingClientID(name),
			AttrJobID.String(id),
			AttrMachine.String(job.Machine),
			AttrState.String(string(job.State)),
			AttrAttempt.Int(lease.Token),
			AttrWorker.String(name),
		),
	}
	if ambient := trace.SpanContextFromContext(ctx); ambient.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ambient}))
	}
	ctx, span := h.t.tracer.Start(ctx, operation+" "+job.Machine, opts...)
	start := time.Now()
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		if v == nil {
			// runtime.Goexit: the handler ended its goroutine.
			h.t.finish(ctx, span, start, job.Machine, run{goexit: true})
			return
		}
		h.t.finish(ctx, span, start, job.Machine, run{panicked: true, value: v, stack: debug.Stack()})
		panic(v) // the runtime turns it into a *worker.PanicError
	}()
	res, err = h.next.Work(ctx, task)
	returned = true
	h.t.finish(ctx, span, start, job.Machine, run{err: err})
	return res, err
}

// run is how one handler run ended.
type run struct {
	err      error
	panicked bool
	value    any
	stack    []byte
	goexit   bool
}

// finish records the end of a run on its span, ends the span, and records
// the run's duration.
func (t *Telemetry) finish(ctx context.Context, span trace.Span, start time.Time, machine string, r run) {
	elapsed := time.Since(start)
	var result string
	var errType attribute.KeyValue
	var snooze *worker.SnoozeError
	switch {
	case r.panicked:
		result = ResultPanic
		errType = semconv.ErrorType(&worker.PanicError{})
		msg := fmt.Sprint(r.value)
		span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
			semconv.ExceptionType(fmt.Sprintf("%T", r.value)),
			semconv.ExceptionMessage(msg),
			semconv.ExceptionStacktrace(string(r.stack)),
		))
		span.SetStatus(codes.Error, "handler panicked: "+msg)
	case r.goexit:
		result = ResultError
		errType = semconv.ErrorTypeOther
		span.SetStatus(codes.Error, "handler exited its goroutine (runtime.Goexit) without returning")
	case r.err == nil:
		result = ResultSuccess
	case errors.As(r.err, &snooze):
		result = ResultSnooze
	default:
		result = ResultError
		errType = errorType(r.err)
		span.RecordError(r.err)
		span.SetStatus(codes.Error, r.err.Error())
	}
	span.SetAttributes(AttrResult.String(result))
	if errType.Valid() {
		span.SetAttributes(errType)
	}
	if cause := context.Cause(ctx); cause != nil {
		span.SetAttributes(AttrCause.String(cause.Error()))
	}
	span.End()

	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName(operation),
		semconv.MessagingDestinationName(machine),
		AttrMachine.String(machine),
		AttrResult.String(result),
	)
	if errType.Valid() {
		attrs = append(attrs, errType)
	}
	t.process.Record(ctx, elapsed.Seconds(), metric.WithAttributes(attrs...))
}

// errorType returns the error.type of err: the Go type of the innermost
// error of its chain (errors.Unwrap), which names the cause rather than a
// wrapper (fmt.Errorf's, or jobstate.Permanent's).
func errorType(err error) attribute.KeyValue {
	for i := 0; i < 100; i++ {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return semconv.ErrorType(err)
}
