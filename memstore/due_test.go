package memstore

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// dueOrder orders by (WakeAt, ID), for the model.
func dueOrder(a, b jobstate.DueJob) int {
	if c := a.WakeAt.Compare(b.WakeAt); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// wakeJob returns a job of machine m waking at wake.
func wakeJob(m string, wake time.Time) jobstate.Job {
	j := readyJob(m, sec(0))
	j.State, j.Kind, j.WakeAt = "wait", jobstate.KindWaiting, wake
	return j
}

func due(t testing.TB, s *Store, q jobstate.DueQuery) []jobstate.DueJob {
	t.Helper()
	got, err := s.Due(context.Background(), q)
	if err != nil {
		t.Fatalf("due: %v", err)
	}
	return got
}

// TestDueCursorAndMachines: Due returns the due jobs of the machines
// asked for, after the cursor, in (WakeAt, ID) order, up to the limit;
// paging with the last one as cursor visits each once, ties included.
func TestDueCursorAndMachines(t *testing.T) {
	s := New()
	var all []jobstate.DueJob
	for i := 0; i < 30; i++ {
		m := []string{"a", "b", "c"}[i%3]
		j := put(t, s, wakeJob(m, sec(i/4))) // four jobs per instant, across machines
		if m != "c" {
			all = append(all, jobstate.DueJob{ID: j.ID, WakeAt: j.WakeAt})
		}
	}
	put(t, s, wakeJob("a", sec(100)))                   // not due
	put(t, s, readyJob("a", sec(0)))                    // no wake time
	put(t, s, wakeJob("zzz", sec(0)))                   // another machine
	put(t, s, wakeJob("a", sec(0).AddDate(7000, 0, 0))) // far future
	slices.SortFunc(all, dueOrder)

	q := jobstate.DueQuery{Now: sec(50), Machines: []string{"b", "a", "a", "unknown"}}
	require.Equal(t, all, due(t, s, q))
	for _, limit := range []int{1, 3, 4, 7} {
		q.Limit = limit
		q.AfterWake, q.AfterID = time.Time{}, uuid.UUID{}
		var pages []jobstate.DueJob
		for {
			page := due(t, s, q)
			require.LessOrEqual(t, len(page), limit)
			if len(page) == 0 {
				break
			}
			pages = append(pages, page...)
			last := page[len(page)-1]
			q.AfterWake, q.AfterID = last.WakeAt, last.ID
		}
		assert.Equal(t, all, pages, "limit %d", limit)
	}
	// A cursor within a tie: the rest of the tie, then the later ones.
	q = jobstate.DueQuery{Now: sec(50), Machines: []string{"a", "b"}, AfterWake: all[5].WakeAt, AfterID: all[5].ID}
	assert.Equal(t, all[6:], due(t, s, q))
	assert.Len(t, due(t, s, jobstate.DueQuery{Now: sec(50)}), 31, "no machines: every machine's")
	assert.Empty(t, due(t, s, jobstate.DueQuery{Now: sec(0).Add(-time.Nanosecond)}))
}

// FuzzDueModel checks Due against a model over random wake times, edits,
// machine sets, cursors and limits.
func FuzzDueModel(f *testing.F) {
	addInputs(f, 100, 512)
	f.Fuzz(func(rt *testing.T, data []byte) {
		d := &draws{data: data}
		s := New()
		machines := []string{"a", "b", "c"}
		model := map[uuid.UUID]jobstate.Job{}
		var ids []uuid.UUID
		wake := func(label string) time.Time {
			if d.IntRange(0, 5) == 0 {
				return time.Time{}
			}
			return sec(d.IntRange(0, 20))
		}
		for i, n := 0, d.IntRange(0, 40); i < n; i++ {
			j := put(rt, s, wakeJob(pick(d, machines), wake("wake")))
			model[j.ID] = j
			ids = append(ids, j.ID)
		}
		for i, n := 0, d.IntRange(1, 20); i < n; i++ {
			if len(ids) > 0 && d.Bool() {
				id := pick(d, ids)
				model[id] = change(rt, s, id, func(j *jobstate.Job) { j.WakeAt = wake("newWake") })
				continue
			}
			q := jobstate.DueQuery{
				Now:      sec(d.IntRange(0, 21)),
				Machines: pickN(d, append(machines, "none"), 0, 4),
				Limit:    d.IntRange(-1, 5),
			}
			if len(ids) > 0 && d.Bool() {
				j := model[pick(d, ids)]
				q.AfterWake, q.AfterID = j.WakeAt, j.ID
			} else if d.Bool() {
				q.AfterWake = sec(d.IntRange(0, 20))
			}
			var want []jobstate.DueJob
			cursor := jobstate.DueJob{ID: q.AfterID, WakeAt: q.AfterWake}
			for _, j := range model {
				dj := jobstate.DueJob{ID: j.ID, WakeAt: j.WakeAt}
				if !j.WakeAt.IsZero() && !j.WakeAt.After(q.Now) && (len(q.Machines) == 0 || slices.Contains(q.Machines, j.Machine)) &&
					(q.AfterWake.IsZero() || dueOrder(dj, cursor) > 0) {
					want = append(want, dj)
				}
			}
			slices.SortFunc(want, dueOrder)
			if q.Limit > 0 && len(want) > q.Limit {
				want = want[:q.Limit]
			}
			require.Equal(rt, want, due(rt, s, q))
		}
	})
}
