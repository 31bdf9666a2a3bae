// Package tickmachine is the machine and the schedule of pgstore's test
// of periodic jobs across processes (TestPeriodicThreeProcesses), shared
// by the test and its worker program, pgstore/internal/periodicworker.
package tickmachine

import (
	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
)

// Name is the machine's name.
const Name = "tick"

// Schedule is the name the worker processes register their periodic
// schedule under: the jobs' idempotency keys are
// worker.PeriodKey(Schedule, start).
const Schedule = "tick"

// Spec is queued → running → done, retried without limit, holding its
// idempotency keys for the job's life (so that a period has one job
// however many processes create it). Its lease outlasts the test's
// waits: a job held by a killed process comes back when the process,
// restarted under its name, recovers its leases at start. It is the work
// machine of internal/machines.
func Spec() jobstate.Spec {
	return machines.WorkSpec(Name, machines.WorkRetries(jobstate.Unlimited), machines.WorkAbandoning())
}
