package memstore_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) jobstate.Store { return memstore.New() })
}
