package storetest

import (
	"context"
	"testing"
	"time"

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

// testWritesCopied checks the ownership clause from the other side: a
// store copies what it keeps of a Write (its job, records, executions and
// effects) before the call returns, since the engine reuses those values'
// memory for its next operation. Every call that takes a Write is followed
// by scribbling over it, and what the store holds must not change.
func testWritesCopied(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	scribble := func(w *jobstate.Write) {
		w.Job.State, w.Job.Version, w.Job.Machine = "scribbled", 99, "scribbled"
		for i := range w.Transitions {
			w.Transitions[i].To, w.Transitions[i].Version = "scribbled", 99
		}
		for i := range w.Executions {
			w.Executions[i].Status, w.Executions[i].Attempt = jobstate.ExecAborted, 99
		}
		for i := range w.Effects {
			w.Effects[i].Name = "scribbled"
		}
	}
	j := mkJob(Epoch)
	var cw *jobstate.Write
	_, created, err := s.Create(ctx, j.Machine, "", func(context.Context, *jobstate.Job) (*jobstate.Write, error) {
		cw = creation(j)
		return cw, nil
	})
	require.NoError(t, err)
	require.True(t, created)
	before := load(t, s, j.ID)
	scribble(cw)
	assert.Equal(t, before, load(t, s, j.ID), "Create kept a Write it did not copy")

	x := jobstate.Execution{ID: uuid.New(), JobID: j.ID, Attempt: 1, Owner: "w", Status: jobstate.ExecLeased, LeaseExpiresAt: Epoch.Add(time.Minute)}
	var uw jobstate.Write
	_, err = s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		uw = next(cur.Job, "r", jobstate.KindActive)
		uw.Executions = []jobstate.Execution{x}
		uw.Effects = []jobstate.EffectRecord{{Name: "fx", ExecID: x.ID, At: Epoch}}
		return uw, nil
	})
	require.NoError(t, err)
	before = load(t, s, j.ID)
	scribble(&uw)
	assert.Equal(t, before, load(t, s, j.ID), "Update kept a Write it did not copy")

	k := insert(t, s, mkJob(Epoch))
	var nw jobstate.Write
	_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: Epoch}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		nw = next(cur.Job, "r", jobstate.KindActive)
		nw.Executions = []jobstate.Execution{{ID: uuid.New(), JobID: cur.Job.ID, Attempt: 1, Owner: "w", Status: jobstate.ExecLeased, LeaseExpiresAt: Epoch.Add(time.Minute)}}
		return nw, nil
	})
	require.NoError(t, err)
	before = load(t, s, k.ID)
	scribble(&nw)
	assert.Equal(t, before, load(t, s, k.ID), "ClaimNext kept a Write it did not copy")
}
