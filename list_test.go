package jobstate_test

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
)

// A list cursor is bound to the query's filters, each of States, Kinds
// and Outcomes taken as a set: the same values in another order, or
// repeated, continue the listing; other values refuse the cursor.
func TestListCursorFiltersAreSets(t *testing.T) {
	ctx := context.Background()
	e, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err := e.Create(ctx, jobstate.NewJob{Machine: "queue"})
		require.NoError(t, err)
	}
	first := jobstate.ListQuery{
		Machine: "queue",
		States:  []jobstate.State{m.Created, m.Queued},
		Kinds:   []jobstate.Kind{jobstate.KindInitial, jobstate.KindReady},
		Limit:   1,
	}
	page, err := e.List(ctx, first, "")
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)

	same := first
	same.States = []jobstate.State{m.Queued, m.Created, m.Queued}
	same.Kinds = []jobstate.Kind{jobstate.KindReady, jobstate.KindInitial, jobstate.KindReady}
	_, err = e.List(ctx, same, page.Next)
	assert.NoError(t, err, "the same sets in another order")
	other := first
	other.Kinds = []jobstate.Kind{jobstate.KindInitial}
	_, err = e.List(ctx, other, page.Next)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "another set of kinds")

	for i := 0; i < 3; i++ {
		c, err := e.Create(ctx, jobstate.NewJob{Machine: "queue"})
		require.NoError(t, err)
		_, err = e.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
		require.NoError(t, err)
		_, err = e.Cancel(ctx, c.Job.ID, jobstate.Call{})
		require.NoError(t, err)
	}
	ended := jobstate.ListQuery{Machine: "queue", Outcomes: []jobstate.Outcome{jobstate.OutcomeSucceeded, jobstate.OutcomeFailed}, Limit: 1}
	page, err = e.List(ctx, ended, "")
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	ended.Outcomes = []jobstate.Outcome{jobstate.OutcomeFailed, jobstate.OutcomeSucceeded, jobstate.OutcomeFailed}
	_, err = e.List(ctx, ended, page.Next)
	assert.NoError(t, err, "the same outcomes in another order")
	ended.Outcomes = []jobstate.Outcome{jobstate.OutcomeFailed}
	_, err = e.List(ctx, ended, page.Next)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "another set of outcomes")
}
