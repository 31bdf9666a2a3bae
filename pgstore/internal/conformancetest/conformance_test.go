// Package conformancetest runs the whole Store conformance suite
// (storetest) on pgstore as configured by default. It is a test binary of
// its own, beside groupcommit's (which runs the suite's Update paths on
// stores with group commit) and pgstore's: the suite is the longest part
// of pgstore's tests, and apart the binaries run side by side, each well
// within go test's timeout. The module it is in holds pgstore's tests
// that need the suite or a test-only library (network: goleak; copycols:
// rapid), so that pgstore's own go.mod requires none of them.
package conformancetest_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformance runs the whole conformance suite, each test on a store
// in a fresh schema of the binary's one cluster.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) jobstate.Store { return pgtest.Store(t) })
}
