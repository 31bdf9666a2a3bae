package main

import (
	"bytes"
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// plainStore hides every optional capability of the store it wraps (the
// Lister among them): Market.List then walks the example's own listing.
type plainStore struct{ jobstate.Store }

// listingStore adds the Lister capability to a store, over the example's
// own listing of bounties, so that Market.List goes through Engine.List.
// It serves the queries Market.List makes: by machine, in creation order,
// after a cursor, a page at a time.
type listingStore struct {
	jobstate.Store
	db *DB
}

// List returns up to q.Limit bounties of q.Machine strictly after q.After,
// in (CreatedAt, ID) order.
func (s listingStore) List(ctx context.Context, q jobstate.ListQuery) ([]jobstate.Job, error) {
	var all []jobstate.Job
	for _, id := range s.db.Bounties() {
		j, err := s.Store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if q.Machine == "" || j.Machine == q.Machine {
			all = append(all, j)
		}
	}
	before := func(a, b jobstate.Job) bool {
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return bytes.Compare(a.ID[:], b.ID[:]) < 0
	}
	sort.Slice(all, func(i, k int) bool { return before(all[i], all[k]) })
	var out []jobstate.Job
	for _, j := range all {
		if (q.After != jobstate.ListCursor{}) && !before(jobstate.Job{CreatedAt: q.After.At, ID: q.After.ID}, j) {
			continue
		}
		if len(out) == q.Limit {
			break
		}
		out = append(out, j)
	}
	return out, nil
}

// TestLazyExpiryOnTheList checks rule T4 on the list (GET /jobs): a funded
// bounty past its deadline is listed expired, and stored expired, as a
// single read would leave it; a bounty nobody lists or reads stays funded
// (no scheduler). It runs on the store as it is, on a store without the
// Lister capability (the example's own listing, each bounty read through
// Engine.Get), and on one with it (Engine.List).
func TestLazyExpiryOnTheList(t *testing.T) {
	stores := []struct {
		name string
		make func(db *DB) jobstate.Store
	}{
		{"memstore", func(*DB) jobstate.Store { return memstore.New() }},
		{"without_Lister_each_listed_bounty_read_through_Engine.Get", func(*DB) jobstate.Store { return plainStore{memstore.New()} }},
		{"with_Lister_through_Engine.List", func(db *DB) jobstate.Store { return listingStore{Store: memstore.New(), db: db} }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			w := newWorldOn(t, st.make)
			if st.name == "with_Lister_through_Engine.List" {
				_, isLister := w.store.(jobstate.Lister)
				require.True(t, isLister)
			}
			overdue := w.fundedWith(terms(), epoch.Add(time.Hour))
			judged := w.fundedWith(terms(), epoch.Add(time.Hour))
			sub := w.submit(judged.ID, "alice", pass)
			open := w.post(terms(), epoch.Add(time.Hour)) // open bounties do not expire
			later := w.fundedWith(terms(), epoch.Add(3*time.Hour))
			w.clock.Advance(2 * time.Hour)
			for _, b := range []jobstate.Job{overdue, judged} {
				require.Equal(t, Funded, w.snap(b.ID).Job.State, "nothing expired it yet")
			}
			jobs, err := w.m.List(w.ctx)
			require.NoError(t, err)
			var got []jobstate.State
			for _, j := range jobs {
				got = append(got, j.State)
			}
			assert.Equal(t, []jobstate.State{Expired, Expired, Open, Funded}, got, "listed in the order posted, overdue ones expired")
			assert.Equal(t, Expired, w.snap(overdue.ID).Job.State, "the list's expiry is written")
			assert.Equal(t, Expired, w.snap(judged.ID).Job.State)
			assert.Equal(t, []string{"alice failed"}, w.statuses(judged.ID), "T4: its judging submission failed")
			assert.Equal(t, Open, w.snap(open.ID).Job.State)
			assert.Equal(t, Funded, w.snap(later.ID).Job.State)
			rec := w.last(overdue.ID)
			assert.Equal(t, []any{jobstate.EventExpire, jobstate.SweepActor}, []any{rec.Event, rec.Actor})
			_, err = w.m.Judge(w.ctx, sub)
			assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "a verdict after the list finds the bounty expired")
		})
	}
}
