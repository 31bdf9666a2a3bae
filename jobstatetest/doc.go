// Package jobstatetest helps users test their machines and handlers: an
// engine with a manual clock in one call, on a memstore of its own (New)
// or on a store the test gives (NewWithStore), a worker that runs on that
// clock and is driven synchronously until no job is due (Env.Drain,
// Env.Run, Env.RunFor), and assertions with readable failure messages
// about a job's state, its history, its single commit, the effects
// applied (Ledger) and its effect records.
//
// Nothing sleeps: time moves only when the test moves the Clock, which is
// both the engine's clock and the worker's timer source.
//
//	e := jobstatetest.New(t, jobstate.WithMachines(def))
//	job := e.Create(jobstate.NewJob{Machine: "queue"})
//	e.Run("queue", handler)
//	e.AssertState(job.ID, "SUCCEEDED")
//
// To test a handler whose effect writes in the store's transaction on
// PostgreSQL, package pgstore/pgtest makes the same Env on a pgstore
// store in a schema of its own (pgtest.NewEnv). Package envtest holds the
// checks that an Env works on a store.
package jobstatetest
