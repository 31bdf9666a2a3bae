package storetest

import (
	"testing"

	"github.com/jobstate/jobstate/internal/enginesuite"
)

// RunEngine runs the engine's lifecycle on the store: every operation, the
// commit boundary and its failure modes, retries, idempotency, expiry and
// recovery.
func RunEngine(t *testing.T, newStore NewStore, opts ...Option) {
	cfg := newConfig(opts)
	enginesuite.Run(t, enginesuite.NewStore(newStore), enginesuite.Sizes{StressJobs: cfg.stressJobs})
}
