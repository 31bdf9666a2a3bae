// Package jobstatetest helps users test their machines and handlers: an
// engine on memstore with a manual clock in one call (New), a worker that
// runs on that clock and is driven synchronously until no job is due
// (Env.Drain, Env.Run, Env.RunFor), and assertions with readable failure
// messages about a job's state, its history, its single commit, the
// effects applied (Ledger) and its effect records.
//
// Nothing sleeps: time moves only when the test moves the Clock, which is
// both the engine's clock and the worker's timer source.
//
//	e := jobstatetest.New(t, jobstate.WithMachines(def))
//	job := e.Create(jobstate.NewJob{Machine: "docs"})
//	e.Run("docs", handler)
//	e.AssertState(job.ID, "SUCCEEDED")
package jobstatetest
