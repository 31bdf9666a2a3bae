package jobstate_test

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// plainStore is memstore without its optional capabilities.
type plainStore struct{ jobstate.Store }

// TestCreateManyUnsupported: on a store without BatchCreator, CreateMany
// says so and creates nothing.
func TestCreateManyUnsupported(t *testing.T) {
	def, err := jobstate.NewDefinition(queueSpec())
	require.NoError(t, err)
	inner := memstore.New()
	eng, err := jobstate.New(plainStore{inner}, jobstate.WithMachines(def))
	require.NoError(t, err)
	_, err = eng.CreateMany(context.Background(), []jobstate.NewJob{{Machine: "queue"}})
	assert.ErrorIs(t, err, jobstate.ErrUnsupported)
	counts, err := inner.Count(context.Background(), "queue")
	require.NoError(t, err)
	assert.Empty(t, counts)
}

// TestCreateManyZeroEngine: a zero Engine refuses, as every operation
// does, without panicking.
func TestCreateManyZeroEngine(t *testing.T) {
	var eng jobstate.Engine
	_, err := eng.CreateMany(context.Background(), []jobstate.NewJob{{Machine: "queue"}})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}
