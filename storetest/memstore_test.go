package storetest_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/storetest"
)

// TestConformance runs the whole suite (storetest.Run: the Store
// contract, its concurrency, the engine's behaviour with its hardening
// cases and properties, faults, listing, batches, notification, key
// limits and the conformance vectors) on memstore, the reference store.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) jobstate.Store { return memstore.New() })
}
