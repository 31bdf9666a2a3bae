package main

import (
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

// TestLazyExpiryOnTheList checks rule T4 on the list (GET /jobs): a funded
// bounty past its deadline is listed expired, and stored expired, as a
// single read would leave it; a bounty nobody lists or reads stays funded
// (no scheduler). It runs on memstore, which offers the Lister capability
// (Market.List pages through Engine.List), and on a store without it (the
// example's own listing, each bounty read through Engine.Get).
func TestLazyExpiryOnTheList(t *testing.T) {
	stores := []struct {
		name   string
		make   func(db *DB) jobstate.Store
		lister bool
	}{
		{"memstore_through_Engine.List", func(*DB) jobstate.Store { return memstore.New() }, true},
		{"without_Lister_each_listed_bounty_read_through_Engine.Get", func(*DB) jobstate.Store { return plainStore{memstore.New()} }, false},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			w := newWorldOn(t, st.make)
			_, isLister := w.store.(jobstate.Lister)
			require.Equal(t, st.lister, isLister)
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
