package jobstateotel

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobstate/jobstate"
)

// ScopeName is the instrumentation scope of the meters and tracers this
// package makes: the module's import path.
const ScopeName = "github.com/jobstate/jobstate/otel"

// The names of the instruments (see docs/observability.md).
const (
	// MetricTransitions counts committed transitions (Int64Counter, unit
	// "{transition}"), by machine, event, target state and outcome.
	MetricTransitions = "jobstate.transitions"
	// MetricQueueDuration is the time from a job's due time (Job.DueAt) to
	// its claim, on the engine's clock (Float64Histogram, unit "s"), by
	// machine.
	MetricQueueDuration = "jobstate.queue.duration"
	// MetricJobs is the number of jobs per state (Int64ObservableUpDownCounter,
	// unit "{job}"), read from Engine.Counts at each collection, by
	// machine, state and kind of state.
	MetricJobs = "jobstate.jobs"
	// MetricProcessDuration is the duration of a handler run
	// (Float64Histogram, unit "s"): the messaging semantic conventions'
	// messaging.process.duration.
	MetricProcessDuration = "messaging.process.duration"
)

// The attributes of jobstate's own namespace. The messaging.* and
// error.type attributes come from the semantic conventions.
const (
	// AttrJobID is a job's id (a UUID in its canonical text form).
	AttrJobID = attribute.Key("jobstate.job.id")
	// AttrMachine is the name of a job's machine.
	AttrMachine = attribute.Key("jobstate.machine")
	// AttrEvent is the event of a transition ("claim", "succeed", a user
	// event).
	AttrEvent = attribute.Key("jobstate.event")
	// AttrState is a state: the target of a transition, the state a job was
	// claimed into, or the state counted.
	AttrState = attribute.Key("jobstate.state")
	// AttrFromState is the state a transition left (span events only).
	AttrFromState = attribute.Key("jobstate.state.from")
	// AttrKind is the kind of the state counted ("ready", "active", ...).
	AttrKind = attribute.Key("jobstate.state.kind")
	// AttrOutcome is the outcome of a transition into a terminal state
	// ("succeeded", "failed", ...); absent for other transitions.
	AttrOutcome = attribute.Key("jobstate.outcome")
	// AttrAttempt is the attempt number of a run: the lease's fencing
	// token, the job's Attempt at claim.
	AttrAttempt = attribute.Key("jobstate.attempt")
	// AttrWorker is the name of the worker running a job.
	AttrWorker = attribute.Key("jobstate.worker")
	// AttrVersion is the job version a transition wrote (span events only).
	AttrVersion = attribute.Key("jobstate.version")
	// AttrResult is what a handler run returned: ResultSuccess,
	// ResultError, ResultPanic or ResultSnooze.
	AttrResult = attribute.Key("jobstate.run.result")
	// AttrCause is why the runtime cancelled a handler's context
	// (context.Cause): a lost lease, a cancelled job, a timeout, a
	// shutdown. Set on the run's span only when its context was cancelled.
	AttrCause = attribute.Key("jobstate.run.cancel_cause")
)

// The values of AttrResult.
const (
	// ResultSuccess: the handler returned a nil error; the runtime commits.
	ResultSuccess = "success"
	// ResultError: the handler returned an error; the runtime fails the
	// execution.
	ResultError = "error"
	// ResultPanic: the handler panicked; the runtime fails the execution
	// with a *worker.PanicError.
	ResultPanic = "panic"
	// ResultSnooze: the handler returned worker.Snooze; the runtime gives
	// the job back without counting a failure.
	ResultSnooze = "snooze"
)

// SpanEventTransition is the name of the span event the Observer adds to
// the span of the context a transition was made in (see WithSpanEvents).
const SpanEventTransition = "jobstate.transition"

// System is the value of messaging.system on spans and on
// messaging.process.duration.
const System = "jobstate"

// Option configures a Telemetry (see New).
type Option func(*config) error

type config struct {
	mp     metric.MeterProvider
	tp     trace.TracerProvider
	events bool
}

// WithMeterProvider sets the meter provider. The default is the global
// one (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", jobstate.ErrInvalidArgument)
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider sets the tracer provider. The default is the global
// one (otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", jobstate.ErrInvalidArgument)
		}
		c.tp = tp
		return nil
	}
}

// WithSpanEvents sets whether the Observer adds a span event
// (SpanEventTransition) for each transition to the recording span of the
// context the operation ran in: the span of the request that created a
// job then names the job, and a handler's span lists the moves made
// through its Task. The default is true. Turn it off when the contexts
// given to the engine carry long-lived spans.
func WithSpanEvents(on bool) Option {
	return func(c *config) error {
		c.events = on
		return nil
	}
}

// Telemetry records jobstate's metrics and spans on the providers it was
// made with. Make one with New; use Observer, WrapHandler and
// ObserveCounts to connect it. It is safe for concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
	events bool

	transitions metric.Int64Counter
	queue       metric.Float64Histogram
	process     metric.Float64Histogram
	jobs        metric.Int64ObservableUpDownCounter
}

// New returns a Telemetry with its instruments made. Errors: a nil
// option or provider (jobstate.ErrInvalidArgument), or a provider
// refusing an instrument.
func New(opts ...Option) (*Telemetry, error) {
	c := config{events: true}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("jobstateotel: %w: option #%d is nil", jobstate.ErrInvalidArgument, i+1)
		}
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("jobstateotel: %w", err)
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	t := &Telemetry{
		meter:  c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		tracer: c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		events: c.events,
	}
	var errs []error
	var err error
	t.transitions, err = t.meter.Int64Counter(MetricTransitions,
		metric.WithDescription("Committed transitions of jobs."),
		metric.WithUnit("{transition}"))
	errs = append(errs, err)
	t.queue, err = t.meter.Float64Histogram(MetricQueueDuration,
		metric.WithDescription("Time from a job's due time to its claim."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets()...))
	errs = append(errs, err)
	t.process, err = t.meter.Float64Histogram(MetricProcessDuration,
		metric.WithDescription("Duration of processing operation."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets()...))
	errs = append(errs, err)
	t.jobs, err = t.meter.Int64ObservableUpDownCounter(MetricJobs,
		metric.WithDescription("Jobs per state."),
		metric.WithUnit("{job}"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("jobstateotel: make instruments: %w", err)
	}
	return t, nil
}

// durationBuckets returns the histograms' bucket boundaries, in seconds:
// the semantic conventions' advice for durations (5 ms to 10 s), extended
// to an hour for queues and long handlers.
func durationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300, 900, 3600}
}
