// Package conformancetest runs the Store conformance suite (storetest)
// on sqlitestore. It is a module of its own, never released, so that the
// suite and the libraries it uses (testify, rapid) never reach
// sqlitestore's users; it builds from the tree through the replace
// directives of its go.mod.
package conformancetest_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/storetest"
)

// TestConformance runs the whole conformance suite, each test on a store
// in a new file. The suite checks the contract, not what survives a power
// loss: it runs with synchronous NORMAL, which keeps every commit across
// a crash of the process but does not wait for the disk at each one, so
// that its tens of thousands of transactions take seconds, not minutes.
// TestConformanceFull runs the contract's clauses with the default, FULL.
//
// Under the race detector, which slows the store's and the engine's code
// down several times, the stress test and the nested keyed creations run 2,000 jobs
// and keys instead of 10,000.
func TestConformance(t *testing.T) {
	var opts []storetest.Option
	if raceEnabled {
		opts = append(opts, storetest.WithStressJobs(2000), storetest.WithNestedKeys(2000))
	}
	storetest.Run(t, func(t *testing.T) jobstate.Store { return open(t, sqlitestore.Options{Synchronous: "NORMAL"}) }, opts...)
}

// TestConformanceFull runs the contract's clauses, their concurrency
// and the batch capabilities on stores with the default options
// (synchronous FULL: every commit waits for the disk).
func TestConformanceFull(t *testing.T) {
	newStore := func(t *testing.T) jobstate.Store { return open(t, sqlitestore.Options{}) }
	t.Run("Contract", func(t *testing.T) { storetest.RunContract(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { storetest.RunConcurrency(t, newStore) })
	t.Run("Batch", func(t *testing.T) { storetest.RunBatch(t, newStore) })
	t.Run("CreateBatch", func(t *testing.T) { storetest.RunCreateBatch(t, newStore) })
}
