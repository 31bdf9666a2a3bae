package jobstate_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
	"github.com/jobstate/jobstate/memstore"
)

// TestEngine runs the engine's behaviour suite (the lifecycles, the commit
// boundary and its failure modes, retries, idempotency, expiry, recovery
// and the stress test of crashing workers) on memstore, each test on a
// fresh store. The stress test runs 1,000 jobs here; storetest's
// TestConformance runs it at full size.
func TestEngine(t *testing.T) {
	enginesuite.Run(t, func(*testing.T) jobstate.Store { return memstore.New() }, enginesuite.Sizes{StressJobs: 1_000})
}
