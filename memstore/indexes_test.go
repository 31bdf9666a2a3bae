package memstore

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// FuzzIndexesMatchModel checks Count, Stale and Prune against a scan of a
// model over random writes that move jobs between states, kinds, leases,
// heartbeats and completion times, and between machines, so that every
// index follows every kind of change.
func FuzzIndexesMatchModel(f *testing.F) {
	addInputs(f, 100, 512)
	f.Fuzz(func(rt *testing.T, data []byte) {
		d := &draws{data: data}
		ctx := context.Background()
		s := New()
		machines := []string{"a", "b"}
		model := map[uuid.UUID]jobstate.Job{}
		var ids []uuid.UUID
		edit := func(j *jobstate.Job) {
			j.Machine = pick(d, machines)
			switch d.IntRange(0, 3) {
			case 0:
				j.State, j.Kind = "q", jobstate.KindReady
			case 1:
				j.State, j.Kind = "run", jobstate.KindActive
			case 2:
				j.State, j.Kind = "wait", jobstate.KindWaiting
			default:
				j.State, j.Kind = "done", jobstate.KindTerminal
			}
			j.Leases = d.IntRange(0, 2)
			j.HeartbeatAt = sec(d.IntRange(0, 10))
			j.CompletedAt = sec(d.IntRange(0, 10))
		}
		for i, n := 0, d.IntRange(1, 30); i < n; i++ {
			switch d.IntRange(0, 3) {
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
				id := pick(d, live)
				model[id] = change(rt, s, id, edit)
			case 3:
				cut := sec(d.IntRange(0, 11))
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
			before := sec(d.IntRange(0, 11))
			machine := pick(d, append(machines, ""))
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
