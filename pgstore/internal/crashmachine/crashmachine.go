// Package crashmachine names the machines of pgstore's crash tests, shared
// by the tests and their worker processes; both are the work machine of
// internal/machines.
package crashmachine

import (
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
)

// Name is the machine's name.
const Name = "crash"

// Spec is queued → running → done, retried without limit, with a short
// lease so that the jobs of killed workers come back soon.
func Spec() jobstate.Spec {
	return machines.WorkSpec(Name, machines.WorkLease(time.Second), machines.WorkRetries(jobstate.Unlimited), machines.WorkAbandoning())
}

// RuntimeName is the name of RuntimeSpec's machine.
const RuntimeName = "crash_runtime"

// RuntimeSpec is Spec with a lease of a minute, for the crash test of the
// worker runtime: a job held by a killed worker comes back only when the
// worker, restarted under its name, recovers its leases at start, and a
// job held by a stopped worker only when the worker gives it back, not
// by its lease lapsing during the test.
func RuntimeSpec() jobstate.Spec {
	s := Spec()
	s.Name = RuntimeName
	s.Policy.LeaseTTL = time.Minute
	return s
}
