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

// claimOrder is the contract's claim order, for the model.
func claimOrder(a, b jobstate.Job) int {
	if a.Priority != b.Priority {
		if a.Priority > b.Priority {
			return -1
		}
		return 1
	}
	if c := a.DueAt().Compare(b.DueAt()); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// TestClaimPriorityOvertakesOlder: a high-priority job is claimed before
// older low-priority ones, even when they were due earlier.
func TestClaimPriorityOvertakesOlder(t *testing.T) {
	s := New()
	var low []uuid.UUID
	for i := 0; i < 3; i++ {
		j := readyJob("m", sec(i))
		j.NotBefore = sec(i)
		low = append(low, put(t, s, j).ID)
	}
	high := readyJob("m", sec(10))
	high.NotBefore, high.Priority = sec(10), 5
	put(t, s, high)
	assert.Equal(t, append([]uuid.UUID{high.ID}, low...), offered(t, s, "m", sec(20)))
	assert.Equal(t, high.ID, claim(t, s, "m", sec(20)))
}

// TestClaimRetriedNotStarved: among equal priorities the job due earlier
// wins, so a retried job whose backoff has ended is claimed before fresh
// jobs created after that; a stream of them cannot starve it.
func TestClaimRetriedNotStarved(t *testing.T) {
	s := New()
	retried := readyJob("m", sec(0))
	put(t, s, retried)
	retried = change(t, s, retried.ID, func(j *jobstate.Job) { j.NotBefore = sec(10) }) // backoff until 10 s
	now := 20
	for i := 0; i < 50; i++ {
		put(t, s, readyJob("m", sec(11+i%5))) // fresh jobs, created after the backoff ended
	}
	assert.Equal(t, retried.ID, claim(t, s, "m", sec(now)), "the retried job, due at 10 s, before fresh jobs due from 11 s")
	// A fresh job created before the backoff ended is due before it.
	early := put(t, s, readyJob("m", sec(5)))
	retried = change(t, s, retried.ID, func(j *jobstate.Job) { j.State, j.Kind, j.NotBefore = "q", jobstate.KindReady, sec(12) })
	assert.Equal(t, early.ID, claim(t, s, "m", sec(now)))
	assert.Equal(t, retried.ID, offered(t, s, "m", sec(now))[10],
		"due at 12 s: after the ten fresh jobs due at 11 s, before those due at 12 s (created later)")
}

// TestClaimNeverOffersNotDue: a job not yet due is never offered, even
// after a claim at a later time moved it to the available tree and the
// claim time goes back; it is not lost either.
func TestClaimNeverOffersNotDue(t *testing.T) {
	s := New()
	a := readyJob("m", sec(0))
	a.NotBefore, a.Priority = sec(100), 9
	put(t, s, a)
	b := put(t, s, readyJob("m", sec(0)))
	assert.Equal(t, []uuid.UUID{b.ID}, offered(t, s, "m", sec(50)))
	assert.Equal(t, []uuid.UUID{a.ID, b.ID}, offered(t, s, "m", sec(100)), "a is due at 100 s")
	assert.Equal(t, []uuid.UUID{b.ID}, offered(t, s, "m", sec(99)), "another engine's clock is behind: a is not due at 99 s")
	// A job written after the later claim, due between the two times.
	c := readyJob("m", sec(0))
	c.NotBefore = sec(80)
	put(t, s, c)
	assert.Equal(t, []uuid.UUID{b.ID}, offered(t, s, "m", sec(70)))
	assert.Equal(t, b.ID, claim(t, s, "m", sec(70)))
	assert.Equal(t, uuid.Nil, claim(t, s, "m", sec(70)), "nothing else is due at 70 s")
	assert.Equal(t, a.ID, claim(t, s, "m", sec(100)))
	assert.Equal(t, c.ID, claim(t, s, "m", sec(100)))
	assert.Equal(t, uuid.Nil, claim(t, s, "m", sec(1000)))
}

// FuzzClaimOrderModel checks ClaimNext against a model over random jobs,
// random edits and claim times that go back and forth.
func FuzzClaimOrderModel(f *testing.F) {
	addInputs(f, 100, 512)
	f.Fuzz(func(rt *testing.T, data []byte) {
		d := &draws{data: data}
		s := New()
		model := map[uuid.UUID]jobstate.Job{}
		var ids []uuid.UUID
		machines := []string{"a", "b"}
		edit := func(j *jobstate.Job) {
			j.Priority = d.IntRange(-2, 2)
			j.NotBefore = sec(d.IntRange(-1, 60))
			if d.Bool() {
				j.NotBefore = time.Time{}
			}
			if d.IntRange(0, 4) == 0 {
				j.State, j.Kind = "init", jobstate.KindInitial
			} else {
				j.State, j.Kind = "q", jobstate.KindReady
			}
		}
		for i, n := 0, d.IntRange(1, 30); i < n; i++ {
			j := readyJob(pick(d, machines), sec(d.IntRange(0, 40)))
			edit(&j)
			model[j.ID] = put(rt, s, j)
			ids = append(ids, j.ID)
		}
		want := func(m string, now int) []uuid.UUID {
			var due []jobstate.Job
			for _, j := range model {
				if j.Machine == m && j.Due(sec(now)) {
					due = append(due, j)
				}
			}
			slices.SortFunc(due, claimOrder)
			out := []uuid.UUID{}
			for _, j := range due {
				out = append(out, j.ID)
			}
			return out
		}
		for i, n := 0, d.IntRange(1, 40); i < n; i++ {
			m := pick(d, machines)
			now := d.IntRange(0, 80)
			switch d.IntRange(0, 2) {
			case 0:
				got := append([]uuid.UUID{}, offered(rt, s, m, sec(now))...)
				require.Equal(rt, want(m, now), got)
			case 1:
				w := want(m, now)
				got := claim(rt, s, m, sec(now))
				if len(w) == 0 {
					require.Equal(rt, uuid.Nil, got)
					continue
				}
				require.Equal(rt, w[0], got)
				model[got], _ = s.Get(context.Background(), got)
			case 2:
				id := pick(d, ids)
				model[id] = change(rt, s, id, edit)
			}
		}
	})
}
