package memstore

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// TestIndexesMatchModel checks Count, Stale and Prune against a scan of a
// model over random writes that move jobs between states, kinds, leases,
// heartbeats and completion times, and between machines, so that every
// index follows every kind of change.
func TestIndexesMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		s := New()
		machines := []string{"a", "b"}
		model := map[uuid.UUID]jobstate.Job{}
		var ids []uuid.UUID
		edit := func(j *jobstate.Job) {
			j.Machine = rapid.SampledFrom(machines).Draw(rt, "machine")
			switch rapid.IntRange(0, 3).Draw(rt, "kind") {
			case 0:
				j.State, j.Kind = "q", jobstate.KindReady
			case 1:
				j.State, j.Kind = "run", jobstate.KindActive
			case 2:
				j.State, j.Kind = "wait", jobstate.KindWaiting
			default:
				j.State, j.Kind = "done", jobstate.KindTerminal
			}
			j.Leases = rapid.IntRange(0, 2).Draw(rt, "leases")
			j.HeartbeatAt = sec(rapid.IntRange(0, 10).Draw(rt, "heartbeat"))
			j.CompletedAt = sec(rapid.IntRange(0, 10).Draw(rt, "completed"))
		}
		for i, n := 0, rapid.IntRange(1, 30).Draw(rt, "steps"); i < n; i++ {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				j := readyJob("a", sec(0))
				edit(&j)
				model[j.ID] = put(rt, s, j)
				ids = append(ids, j.ID)
			case 2:
				live := slices.DeleteFunc(slices.Clone(ids), func(id uuid.UUID) bool { _, ok := model[id]; return !ok })
				if len(live) == 0 {
					continue
				}
				id := rapid.SampledFrom(live).Draw(rt, "edited")
				model[id] = change(rt, s, id, edit)
			case 3:
				cut := sec(rapid.IntRange(0, 11).Draw(rt, "pruneBefore"))
				n, err := s.Prune(ctx, cut, 0)
				require.NoError(rt, err)
				pruned := 0
				for id, j := range model {
					if j.Kind == jobstate.KindTerminal && j.CompletedAt.Before(cut) {
						delete(model, id)
						pruned++
					}
				}
				require.Equal(rt, pruned, n)
			}
			require.Equal(rt, len(model), s.Len())
			for _, m := range machines {
				want := map[jobstate.State]int{}
				for _, j := range model {
					if j.Machine == m {
						want[j.State]++
					}
				}
				got, err := s.Count(ctx, m)
				require.NoError(rt, err)
				require.Equal(rt, want, got, "counts of machine %s", m)
			}
			before := sec(rapid.IntRange(0, 11).Draw(rt, "staleBefore"))
			machine := rapid.SampledFrom(append(machines, "")).Draw(rt, "staleMachine")
			var want []jobstate.Job
			for _, j := range model {
				if j.Leases > 0 && j.HeartbeatAt.Before(before) && (machine == "" || j.Machine == machine) {
					want = append(want, j)
				}
			}
			slices.SortFunc(want, func(a, b jobstate.Job) int {
				if c := a.HeartbeatAt.Compare(b.HeartbeatAt); c != 0 {
					return c
				}
				return idOf(a.ID).compare(idOf(b.ID))
			})
			got, err := s.Stale(ctx, machine, before, 0)
			require.NoError(rt, err)
			require.Equal(rt, jobIDs(want), jobIDs(got), "stale before %s of machine %q", before, machine)
		}
	})
}
