// Package jobstateotel reports jobstate's work through OpenTelemetry:
// metrics of transitions, queue latency, handler runs and jobs per state,
// and a span per handler run. It is a module of its own, so that the core
// library does not depend on OpenTelemetry.
//
// One Telemetry serves an engine and its workers, in three places:
//
//	tel, err := jobstateotel.New() // the global providers; or WithMeterProvider, WithTracerProvider
//	eng, err := jobstate.New(store, jobstate.WithMachines(queue),
//		jobstate.WithObserver(tel.Observer())) // transitions and queue latency
//	reg, err := tel.ObserveCounts(eng, "queue") // jobs per state, read when metrics are collected
//	defer reg.Unregister()
//	w, err := worker.New(eng,
//		worker.Handle("queue", tel.WrapHandler(process), 8)) // a span and a duration per run
//
// The instruments and their attributes are listed in the package's
// documentation page, docs/observability.md. Names follow the
// OpenTelemetry semantic conventions for messaging where they apply (a
// job is a message, its machine the destination, a handler run the
// "process" operation); the rest are prefixed with "jobstate.".
//
// A Telemetry holds no state beyond its instruments: it is safe for
// concurrent use, and several may coexist (one per engine, or one per
// provider in tests).
package jobstateotel
