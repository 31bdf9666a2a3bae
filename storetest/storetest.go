// Package storetest is the conformance suite every jobstate.Store must pass.
//
// A store's own test calls Run with a constructor of fresh, empty stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) jobstate.Store { return memstore.New() })
//	}
//
// The suite checks every clause of the Store contract directly, the same
// clauses under concurrency (run it with -race), the engine's lifecycle on
// the store (leases, the commit boundary, retries, idempotency, recovery),
// the invariants of the specification as property-based tests with
// pgregory.net/rapid over random definitions and random operation
// sequences, the same with faults injected around the store (FaultyStore),
// and replays the language-neutral conformance vectors.
//
// The suite is a module of its own, github.com/jobstate/jobstate/storetest,
// released with the library at the same version: a store's tests require
// it, and the libraries it uses (testify, rapid) never reach the module
// graph of a program that uses the library or a store without the suite.
package storetest

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// NewStore makes a fresh, empty store for one test. It may register
// cleanups with t.Cleanup.
type NewStore func(t *testing.T) jobstate.Store

// Run runs the whole suite against stores made by newStore; opts change
// the sizes of its heavier tests.
func Run(t *testing.T, newStore NewStore, opts ...Option) {
	t.Run("Contract", func(t *testing.T) { RunContract(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { RunConcurrency(t, newStore) })
	t.Run("Engine", func(t *testing.T) { RunEngine(t, newStore, opts...) })
	t.Run("Hardening", func(t *testing.T) { RunHardening(t, newStore, opts...) })
	t.Run("Properties", func(t *testing.T) { RunProperties(t, newStore) })
	t.Run("Faults", func(t *testing.T) { RunFaults(t, newStore) })
	t.Run("List", func(t *testing.T) { RunList(t, newStore) })
	t.Run("Batch", func(t *testing.T) { RunBatch(t, newStore) })
	t.Run("CreateBatch", func(t *testing.T) { RunCreateBatch(t, newStore) })
	t.Run("Notify", func(t *testing.T) { RunNotify(t, newStore) })
	t.Run("KeyLimits", func(t *testing.T) { RunKeyLimits(t, newStore) })
	t.Run("Plans", func(t *testing.T) { RunPlans(t, newStore) })
	t.Run("Vectors", func(t *testing.T) { conformance.Run(t, newStore) })
	// Three generated scenarios of each of the corpus's machines; the
	// conformance package replays the whole corpus on memstore.
	t.Run("Generated", func(t *testing.T) { conformance.RunGenerated(t, newStore, generatedPerStore) })
}

// generatedPerStore is how many generated scenarios every store replays.
const generatedPerStore = 117

// Epoch is the fake clock's starting time in every test of the suite.
var Epoch = enginesuite.Epoch()
