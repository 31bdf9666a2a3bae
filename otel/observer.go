package jobstateotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobstate/jobstate"
)

// Observer returns the engine observer that counts transitions and
// records queue latency, and adds transition events to the caller's span
// (see WithSpanEvents). Give it to the engine:
//
//	jobstate.New(store, jobstate.WithMachines(defs...), jobstate.WithObserver(tel.Observer()))
//
// For each committed transition it adds one to jobstate.transitions, with
// the machine, the event, the target state and, for a move into a
// terminal state, its outcome. For each claim it records in
// jobstate.queue.duration the time from the job's due time (Job.DueAt:
// its creation, or the end of its backoff or schedule) to the claim
// record's time, both on the engine's clock. It runs in the engine
// caller's goroutine and never blocks.
func (t *Telemetry) Observer() jobstate.Observer { return t.observe }

func (t *Telemetry) observe(ctx context.Context, job jobstate.Job, tr jobstate.Transition) {
	machine := AttrMachine.String(job.Machine)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, machine, AttrEvent.String(string(tr.Event)), AttrState.String(string(tr.To)))
	if o := outcome(job, tr); o != "" {
		attrs = append(attrs, AttrOutcome.String(string(o)))
	}
	t.transitions.Add(ctx, 1, metric.WithAttributes(attrs...))

	if tr.Event == jobstate.EventClaim {
		wait := tr.At.Sub(job.DueAt())
		if wait < 0 {
			wait = 0 // a claim cannot precede its due time; a clock step back can
		}
		t.queue.Record(ctx, wait.Seconds(), metric.WithAttributes(machine))
	}

	if !t.events {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	ev := append(attrs,
		AttrJobID.String(tr.JobID.String()),
		AttrFromState.String(string(tr.From)),
		AttrVersion.Int64(tr.Version),
	)
	span.AddEvent(SpanEventTransition, trace.WithAttributes(ev...))
}

// outcome returns the outcome of the transition's target state when it is
// terminal. The job given to an observer is the job as written, after the
// last transition of the write; a transition that is not the last (its
// target is not the job's state) led to a state the write then left, which
// cannot be terminal, since no rule leaves a terminal state.
func outcome(job jobstate.Job, tr jobstate.Transition) jobstate.Outcome {
	if tr.To == job.State && job.Kind == jobstate.KindTerminal {
		return job.Outcome
	}
	return ""
}
