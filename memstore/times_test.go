package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// farTimes are instants in increasing order across the whole accepted
// range, most of them outside the years 1678-2262 that a count of
// nanoseconds in an int64 (UnixNano) can hold.
func farTimes() []time.Time {
	return []time.Time{
		jobstate.MinTime,
		time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC),
		time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1677, 9, 21, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775808, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
		jobstate.MaxTime.Add(-time.Nanosecond),
		jobstate.MaxTime,
	}
}

// TestTimesOrderedExactly: every index orders instants from year 1 to
// 9999 exactly, the zero time (none) first.
func TestTimesOrderedExactly(t *testing.T) {
	ctx := context.Background()
	times := farTimes()
	n := len(times)

	t.Run("claim order by due time", func(t *testing.T) {
		s := New()
		var want []uuid.UUID
		for i := n - 1; i >= 0; i-- { // inserted latest first
			j := readyJob("m", times[i])
			put(t, s, j)
			want = append([]uuid.UUID{j.ID}, want...)
		}
		assert.Equal(t, want, offered(t, s, "m", jobstate.MaxTime))
	})

	t.Run("claims of jobs not before far times", func(t *testing.T) {
		s := New()
		var ids []uuid.UUID
		for i := n - 1; i >= 0; i-- {
			j := readyJob("m", jobstate.MinTime)
			j.NotBefore = times[i]
			ids = append([]uuid.UUID{put(t, s, j).ID}, ids...)
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		assert.Equal(t, ids[:5], offered(t, s, "m", now), "due by 2026: year 1 to 2000, in order; the year-9999 job blocks nothing")
		for i, id := range ids {
			assert.Equal(t, id, claim(t, s, "m", times[i]), "claimed at %s", times[i])
		}
	})

	t.Run("due wake times", func(t *testing.T) {
		s := New()
		var want []jobstate.DueJob
		for i := n - 1; i >= 0; i-- {
			j := put(t, s, wakeJob("m", times[i]))
			want = append([]jobstate.DueJob{{ID: j.ID, WakeAt: j.WakeAt}}, want...)
		}
		for i := range times {
			got, err := s.Due(ctx, jobstate.DueQuery{Now: times[i]})
			require.NoError(t, err)
			assert.Equal(t, want[:i+1], got, "due at %s", times[i])
		}
		got, err := s.Due(ctx, jobstate.DueQuery{Now: jobstate.MaxTime, AfterWake: times[3], AfterID: want[3].ID, Limit: 2})
		require.NoError(t, err)
		assert.Equal(t, want[4:6], got)
	})

	t.Run("stale heartbeats", func(t *testing.T) {
		s := New()
		var want []uuid.UUID
		for i := n - 1; i >= 0; i-- {
			j := readyJob("m", jobstate.MinTime)
			j.State, j.Kind, j.Leases, j.HeartbeatAt = "run", jobstate.KindActive, 1, times[i]
			want = append([]uuid.UUID{put(t, s, j).ID}, want...)
		}
		for i := range times {
			got, err := s.Stale(ctx, "", times[i], 0)
			require.NoError(t, err)
			assert.Equal(t, want[:i], jobIDs(got), "stale before %s", times[i])
		}
	})

	t.Run("prune by completion", func(t *testing.T) {
		s := New()
		var want []uuid.UUID
		for i := n - 1; i >= 0; i-- {
			want = append([]uuid.UUID{put(t, s, terminalJob("m", times[i])).ID}, want...)
		}
		for i := range times {
			got, err := s.Prune(ctx, times[i], 0)
			require.NoError(t, err)
			assert.Equal(t, min(i, 1), got, "pruned before %s", times[i])
			for k, id := range want {
				_, err := s.Get(ctx, id)
				assert.Equal(t, k < i, err != nil, "job %d after pruning before %s", k, times[i])
			}
		}
	})

	t.Run("zero time first", func(t *testing.T) {
		key := func(at time.Time) item { return item{at: instantOf(at)} }
		assert.Equal(t, -1, compareItems(key(time.Time{}), key(jobstate.MinTime)))
		for i := 1; i < n; i++ {
			assert.Equal(t, -1, compareItems(key(times[i-1]), key(times[i])), "%s before %s", times[i-1], times[i])
		}
		assert.Equal(t, -1, compareItems(item{at: beforeAll}, key(time.Time{})))
		assert.Equal(t, 1, compareItems(item{at: afterAll}, key(jobstate.MaxTime)))
		// The same instant in another location is the same key.
		assert.Zero(t, compareItems(key(times[7]), key(times[7].In(time.FixedZone("x", 3600)))))
		// A monotonic clock reading plays no part.
		now := time.Now()
		assert.Zero(t, compareItems(key(now), key(now.Round(0))))
	})
}

func jobIDs(jobs []jobstate.Job) []uuid.UUID {
	out := []uuid.UUID{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
