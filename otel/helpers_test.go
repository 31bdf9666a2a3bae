package jobstateotel_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobstate/jobstate"
	jobstateotel "github.com/jobstate/jobstate/otel"
)

// rig is a Telemetry on SDK providers whose output the test reads: a
// manual metric reader and a span recorder.
type rig struct {
	t      *testing.T
	tel    *jobstateotel.Telemetry
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newRig(t *testing.T, opts ...jobstateotel.Option) *rig {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	all := append([]jobstateotel.Option{jobstateotel.WithMeterProvider(mp), jobstateotel.WithTracerProvider(tp)}, opts...)
	tel, err := jobstateotel.New(all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &rig{t: t, tel: tel, reader: reader, spans: spans, tp: tp}
}

// collect reads the metrics, failing the test on an error.
func (r *rig) collect() metricdata.ResourceMetrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("collect: %v", err)
	}
	return rm
}

// metric returns the named metric, or nil.
func metric(rm metricdata.ResourceMetrics, name string) *metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for i := range sm.Metrics {
			if sm.Metrics[i].Name == name {
				return &sm.Metrics[i]
			}
		}
	}
	return nil
}

// enc encodes an attribute set as "k=v,k=v", sorted by key.
func enc(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// attrs encodes attributes as enc does.
func attrs(kv ...attribute.KeyValue) string { return enc(attribute.NewSet(kv...)) }

// sums returns the data points of an int64 sum, by encoded attributes.
func (r *rig) sums(rm metricdata.ResourceMetrics, name string, monotonic bool) map[string]int64 {
	r.t.Helper()
	m := metric(rm, name)
	if m == nil {
		r.t.Fatalf("no metric %q", name)
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		r.t.Fatalf("metric %q is a %T, want an int64 sum", name, m.Data)
	}
	if sum.IsMonotonic != monotonic {
		r.t.Errorf("metric %q: monotonic %v, want %v", name, sum.IsMonotonic, monotonic)
	}
	out := make(map[string]int64)
	for _, dp := range sum.DataPoints {
		out[enc(dp.Attributes)] = dp.Value
	}
	return out
}

// hist is one histogram data point, summarised.
type hist struct {
	Count uint64
	Sum   float64
}

// histograms returns the data points of a float64 histogram, by encoded
// attributes, after checking its unit.
func (r *rig) histograms(rm metricdata.ResourceMetrics, name string) map[string]hist {
	r.t.Helper()
	m := metric(rm, name)
	if m == nil {
		r.t.Fatalf("no metric %q", name)
	}
	if m.Unit != "s" {
		r.t.Errorf("metric %q: unit %q, want s", name, m.Unit)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		r.t.Fatalf("metric %q is a %T, want a float64 histogram", name, m.Data)
	}
	out := make(map[string]hist)
	for _, dp := range h.DataPoints {
		out[enc(dp.Attributes)] = hist{Count: dp.Count, Sum: dp.Sum}
	}
	return out
}

// ended returns the ended spans with that name, in the order they ended.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttrs returns a span's attributes by key, as strings.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := make(map[string]string)
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// wantAttrs checks that got has every key of want with its value.
func wantAttrs(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if g, ok := got[k]; !ok || g != want[k] {
			t.Errorf("%s: attribute %s = %q (present %v), want %q", what, k, g, ok, want[k])
		}
	}
}

// eventNames lists a span's event names.
func eventNames(s sdktrace.ReadOnlySpan) string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return strings.Join(names, ",")
}

// queueMachine is the README's machine without its cancel rule, with the
// retries given and a 1 s fixed backoff.
func queueMachine(t *testing.T, retries int) *jobstate.Definition {
	t.Helper()
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: retries, Backoff: jobstate.FixedBackoff(time.Second)}},
	})
	if err != nil {
		t.Fatalf("definition: %v", err)
	}
	return def
}
