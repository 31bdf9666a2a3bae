package storetest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// testReturnedCopies checks the ownership clause for what a store returns:
// the slices belong to the caller, who may modify them.
func testReturnedCopies(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	j := insert(t, s, mkJob(Epoch))
	_, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		w := next(cur.Job, "r", jobstate.KindActive)
		w.Executions = []jobstate.Execution{{ID: uuid.New(), JobID: j.ID, Attempt: 1, Status: jobstate.ExecLeased}}
		w.Effects = []jobstate.EffectRecord{{Name: "fx"}}
		return w, nil
	})
	require.NoError(t, err)
	before := load(t, s, j.ID)
	h, _ := s.History(ctx, j.ID)
	h[0].To = "tampered"
	x, _ := s.Executions(ctx, j.ID)
	x[0].Status = jobstate.ExecAborted
	e, _ := s.Effects(ctx, j.ID)
	e[0].Name = "tampered"
	assert.Equal(t, before, load(t, s, j.ID), "slices returned by a store belong to the caller")
}
