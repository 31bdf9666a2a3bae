package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// propListMatchesModel checks that every listing, paged through with
// random page sizes, returns exactly the jobs a scan of all stored jobs
// finds for the same filters, in the same order: over random creations
// (owners, keys), random moves, and a clock that stands still, advances
// and steps back, so that equal and out-of-order times are met.
func propListMatchesModel(rt *rapid.T, t *testing.T, newStore NewStore) {
	ctx := context.Background()
	clock := jobstate.NewManualClock(Epoch)
	var defs []*jobstate.Definition
	for _, spec := range []jobstate.Spec{m.QueueSpec(), m.TransferSpec()} {
		d, err := jobstate.NewDefinition(spec)
		if err != nil {
			rt.Fatalf("definition: %v", err)
		}
		defs = append(defs, d)
	}
	eng, err := jobstate.New(newStore(t), jobstate.WithClock(clock), jobstate.WithMachines(defs...))
	if err != nil {
		rt.Fatalf("engine: %v", err)
	}
	var ids []uuid.UUID
	var states []jobstate.State
	for _, d := range defs {
		for _, st := range d.States() {
			states = append(states, st.Name)
		}
	}
	owners := []string{"", "ann", "bo", "cy"}
	keys := []string{"", "k1", "k2", "k3"}
	// check lists n random queries and compares them with a scan of every
	// job. Listing between writes checks that a store keeps its indexes
	// up to date, not only that it builds them.
	check := func(n int) {
		var all []jobstate.Job
		for _, id := range ids {
			j, err := eng.Get(ctx, id)
			if errors.Is(err, jobstate.ErrNotFound) {
				continue // pruned
			}
			if err != nil {
				rt.Fatalf("get: %v", err)
			}
			all = append(all, j)
		}
		for ; n > 0; n-- {
			q := drawListQuery(rt, defs, states, owners, keys)
			want := modelList(all, q)
			got := pageAll(rt, eng, q)
			if !slices.Equal(got, want) {
				rt.Fatalf("query %+v:\n got %v\nwant %v", q, got, want)
			}
		}
	}
	if rapid.Bool().Draw(rt, "listFirst") {
		check(1) // a store that builds its indexes on first use keeps them from here on
	}
	var leases []jobstate.Lease
	steps := rapid.IntRange(1, 60).Draw(rt, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 17).Draw(rt, "op") {
		case 0, 1, 2, 3:
			d := rapid.SampledFrom(defs).Draw(rt, "machine")
			c, err := eng.Create(ctx, jobstate.NewJob{
				Machine: d.Name(),
				Owner:   rapid.SampledFrom(owners).Draw(rt, "owner"),
				Key:     rapid.SampledFrom(keys).Draw(rt, "key"),
			})
			if err != nil {
				rt.Fatalf("create: %v", err)
			}
			if !c.Existing {
				ids = append(ids, c.Job.ID)
			}
		case 4, 5, 6:
			if len(ids) == 0 {
				continue
			}
			id := rapid.SampledFrom(ids).Draw(rt, "job")
			j, err := eng.Get(ctx, id)
			if errors.Is(err, jobstate.ErrNotFound) {
				continue // pruned
			}
			if err != nil {
				rt.Fatalf("get: %v", err)
			}
			d := defs[0]
			if j.Machine != d.Name() {
				d = defs[1]
			}
			evs := append(d.Events(j.State), jobstate.EventCancel)
			ev := rapid.SampledFrom(evs).Draw(rt, "event")
			if _, err := eng.Fire(ctx, id, ev, jobstate.Call{Actor: "u"}); err != nil && !errors.Is(err, jobstate.ErrInvalidTransition) && !errors.Is(err, jobstate.ErrInvalidArgument) {
				var te *jobstate.TransitionError
				if !errors.As(err, &te) {
					rt.Fatalf("fire %s: %v", ev, err)
				}
			}
		case 7, 8:
			clock.Advance(time.Duration(rapid.IntRange(0, 3).Draw(rt, "seconds")) * time.Second)
		case 9:
			clock.Advance(-time.Duration(rapid.IntRange(1, 2).Draw(rt, "back")) * time.Second)
		case 10, 11:
			// A claim, then heartbeats: writes that leave the state alone.
			d := rapid.SampledFrom(defs).Draw(rt, "claimMachine")
			if c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: d.Name(), Worker: "w"}); err == nil {
				leases = append(leases, c.Lease)
			}
		case 12:
			if len(leases) > 0 {
				i := rapid.IntRange(0, len(leases)-1).Draw(rt, "heartbeat")
				if l, err := eng.Heartbeat(ctx, leases[i]); err == nil {
					leases[i] = l
				}
			}
		case 15, 16, 17:
			check(1)
		case 14:
			if _, err := eng.Prune(ctx, time.Duration(rapid.IntRange(0, 3).Draw(rt, "pruneAge"))*time.Second, 0); err != nil && !errors.Is(err, jobstate.ErrUnsupported) {
				rt.Fatalf("prune: %v", err)
			}
		case 13:
			if len(leases) > 0 {
				l := rapid.SampledFrom(leases).Draw(rt, "finish")
				if rapid.Bool().Draw(rt, "succeed") {
					_, _ = eng.Succeed(ctx, l, jobstate.CommitInput{})
				} else {
					_, _ = eng.Fail(ctx, l, errors.New("boom"))
				}
			}
		}
	}
	check(rapid.IntRange(1, 8).Draw(rt, "queries"))
}

// drawListQuery draws a query over the fixture's machines, states,
// owners and keys, with time bounds around the times the jobs were given.
func drawListQuery(rt *rapid.T, defs []*jobstate.Definition, states []jobstate.State, owners, keys []string) jobstate.ListQuery {
	q := jobstate.ListQuery{Limit: rapid.IntRange(1, 7).Draw(rt, "limit")}
	if rapid.Bool().Draw(rt, "byMachine") {
		def := rapid.SampledFrom(defs).Draw(rt, "qmachine")
		q.Machine = def.Name()
		states = nil // a state the machine lacks is refused
		for _, st := range def.States() {
			states = append(states, st.Name)
		}
	}
	if rapid.Bool().Draw(rt, "byState") {
		q.States = rapid.SliceOfNDistinct(rapid.SampledFrom(states), 1, 3, func(s jobstate.State) jobstate.State { return s }).Draw(rt, "qstates")
	}
	if rapid.IntRange(0, 3).Draw(rt, "byKind") == 0 {
		q.Kinds = []jobstate.Kind{rapid.SampledFrom([]jobstate.Kind{jobstate.KindInitial, jobstate.KindReady, jobstate.KindActive, jobstate.KindWaiting, jobstate.KindTerminal}).Draw(rt, "qkind")}
	}
	if rapid.IntRange(0, 3).Draw(rt, "byOutcome") == 0 {
		q.Outcomes = []jobstate.Outcome{rapid.SampledFrom([]jobstate.Outcome{jobstate.OutcomeSucceeded, jobstate.OutcomeFailed, jobstate.OutcomeCancelled}).Draw(rt, "qoutcome")}
	}
	if rapid.IntRange(0, 2).Draw(rt, "byOwner") == 0 {
		q.Owner = rapid.SampledFrom(owners[1:]).Draw(rt, "qowner")
	}
	if rapid.IntRange(0, 3).Draw(rt, "byKey") == 0 {
		q.Key = rapid.SampledFrom(keys[1:]).Draw(rt, "qkey")
	}
	bound := func(name string) time.Time {
		if rapid.IntRange(0, 3).Draw(rt, name) != 0 {
			return time.Time{}
		}
		return Epoch.Add(time.Duration(rapid.IntRange(-2, 20).Draw(rt, name+"At")) * time.Second)
	}
	q.CreatedFrom, q.CreatedTo = bound("createdFrom"), bound("createdTo")
	q.UpdatedFrom, q.UpdatedTo = bound("updatedFrom"), bound("updatedTo")
	q.CompletedFrom, q.CompletedTo = bound("completedFrom"), bound("completedTo")
	for _, r := range []struct{ from, to *time.Time }{{&q.CreatedFrom, &q.CreatedTo}, {&q.UpdatedFrom, &q.UpdatedTo}, {&q.CompletedFrom, &q.CompletedTo}} {
		if !r.from.IsZero() && !r.to.IsZero() && !r.to.After(*r.from) {
			*r.to = r.from.Add(time.Second)
		}
	}
	if rapid.Bool().Draw(rt, "byUpdated") {
		q.Order = jobstate.OrderUpdated
	}
	q.Desc = rapid.Bool().Draw(rt, "desc")
	return q
}

// pageAll pages through a listing and returns the ids, in order.
func pageAll(rt *rapid.T, eng *jobstate.Engine, q jobstate.ListQuery) []uuid.UUID {
	var ids []uuid.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			rt.Fatalf("paging does not end")
		}
		page, err := eng.List(context.Background(), q, cursor)
		if err != nil {
			rt.Fatalf("list %+v: %v", q, err)
		}
		if len(page.Jobs) > q.Limit {
			rt.Fatalf("page of %d jobs for a limit of %d", len(page.Jobs), q.Limit)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

// modelList is the listing of q computed by a scan of every job.
func modelList(all []jobstate.Job, q jobstate.ListQuery) []uuid.UUID {
	in := func(t, from, to time.Time) bool {
		return (from.IsZero() || !t.Before(from)) && (to.IsZero() || t.Before(to))
	}
	var keep []jobstate.Job
	for _, j := range all {
		switch {
		case q.Machine != "" && j.Machine != q.Machine,
			len(q.States) > 0 && !slices.Contains(q.States, j.State),
			len(q.Kinds) > 0 && !slices.Contains(q.Kinds, j.Kind),
			len(q.Outcomes) > 0 && !slices.Contains(q.Outcomes, j.Outcome),
			q.Owner != "" && j.Owner != q.Owner,
			q.Key != "" && j.IdempotencyKey != q.Key,
			!in(j.CreatedAt, q.CreatedFrom, q.CreatedTo),
			!in(j.UpdatedAt, q.UpdatedFrom, q.UpdatedTo),
			(!q.CompletedFrom.IsZero() || !q.CompletedTo.IsZero()) && (j.Kind != jobstate.KindTerminal || !in(j.CompletedAt, q.CompletedFrom, q.CompletedTo)):
			continue
		}
		keep = append(keep, j)
	}
	at := func(j jobstate.Job) time.Time {
		if q.Order == jobstate.OrderUpdated {
			return j.UpdatedAt
		}
		return j.CreatedAt
	}
	slices.SortFunc(keep, func(a, b jobstate.Job) int {
		c := at(a).Compare(at(b))
		if c == 0 {
			c = bytes.Compare(a.ID[:], b.ID[:])
		}
		if q.Desc {
			return -c
		}
		return c
	})
	out := make([]uuid.UUID, 0, len(keep))
	for _, j := range keep {
		out = append(out, j.ID)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
