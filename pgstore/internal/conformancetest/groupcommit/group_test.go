// The conformance suite's Update paths on pgstore stores with group
// commit: a test binary of its own, beside the default store's, so that
// the two run side by side.
package groupcommit_test

import (
	"os"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformanceGroupCommit runs the conformance suite on stores with
// group commit: the parts that write through Update (the contract, its
// concurrency, the engine with its stress test, the hardening, batches
// and the vectors, the stress and nested-creation tests at 2,000 jobs),
// and the plans, which only a store with group commit applies to commits;
// the whole suite at full size with JOBSTATE_CONFORMANCE_FULL=1.
// (The properties, faults, listing and notification parts go through the
// same Update path the others check, and are run in full on the default
// store by TestConformance.)
func TestConformanceGroupCommit(t *testing.T) {
	newStore := func(t *testing.T) jobstate.Store {
		return pgtest.StoreWith(t, pgstore.Options{GroupCommit: 32})
	}
	if os.Getenv("JOBSTATE_CONFORMANCE_FULL") == "1" {
		storetest.Run(t, newStore)
		return
	}
	// The stress and nested-creation tests at a fifth of their size: the
	// default store runs them in full.
	small := []storetest.Option{storetest.WithStressJobs(2_000), storetest.WithNestedKeys(2_000)}
	t.Run("Contract", func(t *testing.T) { storetest.RunContract(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { storetest.RunConcurrency(t, newStore) })
	t.Run("Engine", func(t *testing.T) { storetest.RunEngine(t, newStore, small...) })
	t.Run("Hardening", func(t *testing.T) { storetest.RunHardening(t, newStore, small...) })
	t.Run("Batch", func(t *testing.T) { storetest.RunBatch(t, newStore) })
	t.Run("Vectors", func(t *testing.T) { conformance.Run(t, newStore) })
	// Commit plans are applied only with group commit.
	t.Run("Plans", func(t *testing.T) { storetest.RunPlans(t, newStore) })
}
