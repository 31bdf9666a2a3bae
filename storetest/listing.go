package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// RunList checks the Lister capability through Engine.List: every filter,
// both orders in both directions, stable paging while other jobs are
// created and moved, and refusals of bad queries and cursors. It skips a
// store without the capability.
func RunList(t *testing.T, newStore NewStore) {
	if _, ok := newStore(t).(jobstate.Lister); !ok {
		t.Skip("the store has no Lister capability")
	}
	t.Run("Filters", func(t *testing.T) { testListFilters(t, newStore) })
	t.Run("Orders", func(t *testing.T) { testListOrders(t, newStore) })
	t.Run("StablePaging", func(t *testing.T) { testListStablePaging(t, newStore) })
	t.Run("Refusals", func(t *testing.T) { testListRefusals(t, newStore) })
	t.Run("MatchesModel", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propListMatchesModel(rt, t, newStore) })
	})
}

// listAll pages through a listing and returns the ids, in order.
func listAll(t *testing.T, eng *jobstate.Engine, q jobstate.ListQuery) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100000, "paging does not end")
		page, err := eng.List(context.Background(), q, cursor)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

func testListFilters(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.QueueSpec(), m.TransferSpec())
	var a, b, c, d, e jobstate.Job
	a = f.Create("queue", jobstate.NewJob{Owner: "alice", Key: "k-a"})
	f.Clock.Advance(time.Second)
	b = f.Create("queue", jobstate.NewJob{Owner: "bob"})
	f.Fire(b.ID, m.Submit, "bob")
	f.Clock.Advance(time.Second)
	c = f.Create("queue", jobstate.NewJob{Owner: "alice"})
	f.Fire(c.ID, m.Submit, "alice")
	f.Fire(c.ID, jobstate.EventCancel, "alice")
	f.Clock.Advance(time.Second)
	d = f.Create("transfer", jobstate.NewJob{Owner: "alice"})
	f.Clock.Advance(time.Second)
	e = f.Create("transfer", jobstate.NewJob{Owner: "carol"})
	f.Fire(e.ID, jobstate.EventCancel, "carol")
	c, e = f.Get(c.ID), f.Get(e.ID)
	ids := func(js ...jobstate.Job) []uuid.UUID {
		out := make([]uuid.UUID, 0, len(js))
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		q    jobstate.ListQuery
		want []uuid.UUID
	}{
		"all":               {jobstate.ListQuery{}, ids(a, b, c, d, e)},
		"machine":           {jobstate.ListQuery{Machine: "queue"}, ids(a, b, c)},
		"machine and state": {jobstate.ListQuery{Machine: "queue", States: []jobstate.State{m.Queued, m.Created}}, ids(a, b)},
		"kind":              {jobstate.ListQuery{Kinds: []jobstate.Kind{jobstate.KindTerminal}}, ids(c, e)},
		"outcome":           {jobstate.ListQuery{Outcomes: []jobstate.Outcome{jobstate.OutcomeCancelled}}, ids(e)},
		"owner":             {jobstate.ListQuery{Owner: "alice"}, ids(a, c, d)},
		"owner and machine": {jobstate.ListQuery{Owner: "alice", Machine: "transfer"}, ids(d)},
		"key":               {jobstate.ListQuery{Key: "k-a"}, ids(a)},
		"created range":     {jobstate.ListQuery{CreatedFrom: Epoch.Add(time.Second), CreatedTo: Epoch.Add(3 * time.Second)}, ids(b, c)},
		"updated range":     {jobstate.ListQuery{UpdatedFrom: Epoch.Add(4 * time.Second)}, ids(e)},
		"completed range":   {jobstate.ListQuery{CompletedFrom: Epoch, CompletedTo: Epoch.Add(3 * time.Second)}, ids(c)},
		"completed, open":   {jobstate.ListQuery{CompletedFrom: Epoch}, ids(c, e)},
		"nothing":           {jobstate.ListQuery{Owner: "nobody"}, nil},
	} {
		for _, limit := range []int{1, 2, 50} {
			q := tc.q
			q.Limit = limit
			assert.Equal(t, tc.want, listAll(t, f.Eng, q), "%s, pages of %d", name, limit)
		}
	}
	page, err := f.Eng.List(f.Ctx, jobstate.ListQuery{Machine: "queue", Limit: 2}, "")
	require.NoError(t, err)
	assert.Equal(t, f.Get(a.ID), page.Jobs[0], "listed jobs are the stored jobs")
	assert.NotEmpty(t, page.Next)
}

func testListOrders(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.QueueSpec())
	var created []uuid.UUID
	for i := 0; i < 7; i++ {
		created = append(created, f.Create("queue", jobstate.NewJob{}).ID)
		f.Clock.Advance(time.Second)
	}
	// Update in another order: 3, 0, 5.
	var updated []uuid.UUID
	for _, i := range []int{1, 2, 4, 6} {
		updated = append(updated, created[i])
	}
	for _, i := range []int{3, 0, 5} {
		f.Fire(created[i], m.Submit, "u")
		f.Clock.Advance(time.Second)
		updated = append(updated, created[i])
	}
	rev := func(in []uuid.UUID) []uuid.UUID {
		out := make([]uuid.UUID, len(in))
		for i, id := range in {
			out[len(in)-1-i] = id
		}
		return out
	}
	for _, limit := range []int{1, 3, 100} {
		assert.Equal(t, created, listAll(t, f.Eng, jobstate.ListQuery{Limit: limit}))
		assert.Equal(t, rev(created), listAll(t, f.Eng, jobstate.ListQuery{Desc: true, Limit: limit}))
		assert.Equal(t, updated, listAll(t, f.Eng, jobstate.ListQuery{Order: jobstate.OrderUpdated, Limit: limit}))
		assert.Equal(t, rev(updated), listAll(t, f.Eng, jobstate.ListQuery{Order: jobstate.OrderUpdated, Desc: true, Limit: limit}))
	}
}

// testListStablePaging pages through 10,000 jobs while other goroutines
// create jobs and move existing ones: no job is returned twice, and every
// job that existed before the paging began is returned.
func testListStablePaging(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.QueueSpec())
	const n = 10000
	before := make(map[uuid.UUID]bool, n)
	var ids []uuid.UUID
	for i := 0; i < n; i++ {
		j := f.Create("queue", jobstate.NewJob{})
		before[j.ID] = true
		ids = append(ids, j.ID)
		if i%100 == 0 {
			f.Clock.Advance(time.Millisecond)
		}
	}
	for _, desc := range []bool{false, true} {
		t.Run(fmt.Sprintf("desc=%v", desc), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // creates
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := f.Eng.Create(context.Background(), jobstate.NewJob{Machine: "queue"}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			go func() { // moves existing jobs
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i = (i + 7919) % n {
					ev := m.Submit
					if j, err := f.Eng.Get(context.Background(), ids[i]); err == nil && j.State == m.Queued {
						ev = jobstate.EventCancel
					}
					_, _ = f.Eng.Fire(context.Background(), ids[i], ev, jobstate.Call{})
				}
			}()
			seen := make(map[uuid.UUID]bool)
			cursor := ""
			for {
				page, err := f.Eng.List(context.Background(), jobstate.ListQuery{Machine: "queue", Desc: desc, Limit: 97}, cursor)
				require.NoError(t, err)
				for _, j := range page.Jobs {
					require.False(t, seen[j.ID], "job %s returned twice", j.ID)
					seen[j.ID] = true
				}
				if page.Next == "" {
					break
				}
				cursor = page.Next
			}
			cancel()
			wg.Wait()
			for id := range before {
				require.True(t, seen[id], "job %s, there before the paging and after, was skipped", id)
			}
		})
	}
}

// flip returns another base64url character than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func testListRefusals(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.QueueSpec())
	for i := 0; i < 3; i++ {
		f.Create("queue", jobstate.NewJob{})
	}
	page, err := f.Eng.List(f.Ctx, jobstate.ListQuery{Limit: 1}, "")
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	for name, q := range map[string]jobstate.ListQuery{
		"limit too large": {Limit: jobstate.MaxListLimit + 1},
		"negative limit":  {Limit: -1},
		"unknown order":   {Order: "priority"},
		"invalid kind":    {Kinds: []jobstate.Kind{0}},
		"unknown outcome": {Outcomes: []jobstate.Outcome{"won"}},
		"inverted range":  {CreatedFrom: Epoch.Add(time.Hour), CreatedTo: Epoch},
		"empty range":     {UpdatedFrom: Epoch, UpdatedTo: Epoch},
		"year 10000":      {CreatedTo: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		_, err := f.Eng.List(f.Ctx, q, "")
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
	}
	for name, c := range map[string]string{
		"garbage":      "not a cursor",
		"truncated":    page.Next[:len(page.Next)-2],
		"tampered":     page.Next[:5] + flip(page.Next[5]) + page.Next[6:],
		"empty base64": "AAAA",
		"other order":  page.Next, // used below with another query
	} {
		q := jobstate.ListQuery{Limit: 1}
		if name == "other order" {
			q.Desc = true
		}
		_, err := f.Eng.List(f.Ctx, q, c)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
	}
	_, err = f.Eng.List(f.Ctx, jobstate.ListQuery{Limit: 1, Owner: "x"}, page.Next)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a cursor of another filter")
}
