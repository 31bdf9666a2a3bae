package jobstateotel

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.opentelemetry.io/otel/metric"

	"github.com/jobstate/jobstate"
)

// ObserveCounts reports the number of jobs of each of the machines in
// each state, as jobstate.jobs, read from eng.Counts whenever metrics are
// collected (an asynchronous instrument: nothing runs between
// collections). Every state of a machine's table is reported, with zero
// when it has no job, so that a state emptied shows 0 rather than
// vanishing; a state the store counts that the table no longer declares is
// reported too, without a kind.
//
// On a store without the Counter capability (errors.Is
// jobstate.ErrUnsupported) a collection reports nothing for the engine and
// no error. Other errors of Counts are returned to the reader, wrapped,
// and the other machines are reported all the same.
//
// Call Unregister on the result to stop. Each machine of an engine
// should be observed once. Errors: a nil engine (or one not made by
// jobstate.New), no machine, a machine the engine does not know
// (jobstate.ErrUnknownMachine), or the meter refusing the callback.
func (t *Telemetry) ObserveCounts(eng *jobstate.Engine, machines ...string) (metric.Registration, error) {
	if eng == nil || eng.Store() == nil {
		return nil, fmt.Errorf("jobstateotel: %w: nil engine: make one with jobstate.New", jobstate.ErrInvalidArgument)
	}
	if len(machines) == 0 {
		return nil, fmt.Errorf("jobstateotel: %w: no machine to count", jobstate.ErrInvalidArgument)
	}
	defs := make([]*jobstate.Definition, 0, len(machines))
	seen := make(map[string]bool, len(machines))
	for _, m := range machines {
		if seen[m] {
			continue
		}
		seen[m] = true
		def, ok := eng.Machine(m)
		if !ok {
			return nil, fmt.Errorf("jobstateotel: count machine %q: %w", m, jobstate.ErrUnknownMachine)
		}
		defs = append(defs, def)
	}
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		return t.observeCounts(ctx, o, eng, defs)
	}, t.jobs)
	if err != nil {
		return nil, fmt.Errorf("jobstateotel: register the jobs-per-state callback: %w", err)
	}
	return reg, nil
}

// observeCounts observes the jobs per state of each machine of defs.
func (t *Telemetry) observeCounts(ctx context.Context, o metric.Observer, eng *jobstate.Engine, defs []*jobstate.Definition) error {
	var errs []error
	for _, def := range defs {
		counts, err := eng.Counts(ctx, def.Name())
		switch {
		case errors.Is(err, jobstate.ErrUnsupported):
			return nil // a store capability: no machine of this engine can be counted
		case err != nil:
			errs = append(errs, fmt.Errorf("jobstateotel: count the jobs of machine %q: %w", def.Name(), err))
			continue
		}
		machine := AttrMachine.String(def.Name())
		declared := make(map[jobstate.State]bool)
		for _, s := range def.States() {
			declared[s.Name] = true
			o.ObserveInt64(t.jobs, int64(counts[s.Name]), metric.WithAttributes(
				machine, AttrState.String(string(s.Name)), AttrKind.String(s.Kind.String())))
		}
		var extra []jobstate.State
		for s := range counts {
			if !declared[s] {
				extra = append(extra, s)
			}
		}
		sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
		for _, s := range extra {
			o.ObserveInt64(t.jobs, int64(counts[s]), metric.WithAttributes(machine, AttrState.String(string(s))))
		}
	}
	return errors.Join(errs...)
}
