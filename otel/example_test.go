package jobstateotel_test

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	jobstateotel "github.com/jobstate/jobstate/otel"
	"github.com/jobstate/jobstate/worker"
)

// An engine and a worker reporting to OpenTelemetry. Here the providers
// are the SDK's, read in memory; in a service they would export to a
// collector, or be left to the global providers (New with no option).
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }()

	tel, err := jobstateotel.New(jobstateotel.WithMeterProvider(mp), jobstateotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
		},
	})
	if err != nil {
		panic(err)
	}
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithObserver(tel.Observer()))
	if err != nil {
		panic(err)
	}
	reg, err := tel.ObserveCounts(eng, "queue")
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	process := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		if string(t.Job().Payload) == "corrupt.pdf" {
			return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unreadable"))
		}
		return jobstate.CommitInput{Result: []byte("text")}, nil
	})
	w, err := worker.New(eng, worker.WithName("queue-worker-1"), worker.Handle("queue", tel.WrapHandler(process), 1))
	if err != nil {
		panic(err)
	}
	for _, p := range []string{"scan.tiff", "corrupt.pdf"} {
		if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Payload: []byte(p)}); err != nil {
			panic(err)
		}
	}
	if _, err := w.Drain(ctx, 10); err != nil {
		panic(err)
	}

	var lines []string
	for _, s := range spans.GetSpans() {
		lines = append(lines, fmt.Sprintf("span %q: %s %s", s.Name, s.Status.Code, s.Status.Description))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				if dp.Value != 0 {
					lines = append(lines, fmt.Sprintf("%s %s = %d", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value))
				}
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				lines = append(lines, fmt.Sprintf("%s %s: %d recorded", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Count))
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// jobstate.jobs jobstate.machine=queue,jobstate.state=FAILED,jobstate.state.kind=terminal = 1
	// jobstate.jobs jobstate.machine=queue,jobstate.state=SUCCEEDED,jobstate.state.kind=terminal = 1
	// jobstate.queue.duration jobstate.machine=queue: 2 recorded
	// jobstate.transitions jobstate.event=claim,jobstate.machine=queue,jobstate.state=RUNNING = 2
	// jobstate.transitions jobstate.event=create,jobstate.machine=queue,jobstate.state=QUEUED = 2
	// jobstate.transitions jobstate.event=fail,jobstate.machine=queue,jobstate.outcome=failed,jobstate.state=FAILED = 1
	// jobstate.transitions jobstate.event=succeed,jobstate.machine=queue,jobstate.outcome=succeeded,jobstate.state=SUCCEEDED = 1
	// messaging.process.duration error.type=*errors.errorString,jobstate.machine=queue,jobstate.run.result=error,messaging.destination.name=queue,messaging.operation.name=process,messaging.system=jobstate: 1 recorded
	// messaging.process.duration jobstate.machine=queue,jobstate.run.result=success,messaging.destination.name=queue,messaging.operation.name=process,messaging.system=jobstate: 1 recorded
	// span "process queue": Error unreadable
	// span "process queue": Unset
}
