package storetest

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

func newMemStore(*testing.T) jobstate.Store { return memstore.New() }

// FuzzOperations drives random operation sequences over random valid
// machines on memstore, checking the invariants after every step and that
// every job can still be ended at the end (the Lifecycle property, fed by
// the fuzzer's bytes instead of rapid's generator):
//
//	go test -run '^$' -fuzz FuzzOperations ./storetest/
func FuzzOperations(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rapid.MakeFuzz(func(rt *rapid.T) { runModel(rt, t, newMemStore) })(t, data)
	})
}

// FuzzFaults is FuzzOperations with faults injected around the store and
// in the machine's guards and effects (the Faults property, both
// variants).
//
//	go test -run '^$' -fuzz FuzzFaults ./storetest/
func FuzzFaults(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rapid.MakeFuzz(func(rt *rapid.T) {
			runFaultModel(rt, t, newMemStore, rapid.Bool().Draw(rt, "transactional"))
		})(t, data)
	})
}

// FuzzTexts feeds the fuzzer's bytes to the Texts property on memstore:
// keys, owners, fingerprints, actors, reasons, worker names, list filters
// and handlers' error texts of any bytes and length are stored whole or
// refused whole, and a failure always ends its execution.
//
//	go test -run '^$' -fuzz FuzzTexts ./storetest/
func FuzzTexts(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rapid.MakeFuzz(newTextsRun(t, newMemStore).check)(t, data)
	})
}
