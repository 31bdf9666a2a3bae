package pgstore_test

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
