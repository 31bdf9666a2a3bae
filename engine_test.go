package jobstate_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/storetest"
)

// TestEngine runs the engine's behaviour suite (every operation, the
// commit boundary and its failure modes, retries, idempotency, expiry,
// recovery, the hardening cases and the conformance vectors) on the
// reference store. Every store runs the same suite through storetest.Run.
func TestEngine(t *testing.T) {
	newStore := func(*testing.T) jobstate.Store { return memstore.New() }
	t.Run("Engine", func(t *testing.T) { storetest.RunEngine(t, newStore) })
	t.Run("Hardening", func(t *testing.T) { storetest.RunHardening(t, newStore) })
	t.Run("Properties", func(t *testing.T) { storetest.RunProperties(t, newStore) })
}
