package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// BenchmarkUpdate measures the store's own share of an engine operation:
// one Update that bumps the version and appends one record, over 10,000
// jobs in turn.
func BenchmarkUpdate(b *testing.B) {
	s := New()
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := make([]uuid.UUID, 10_000)
	for i := range ids {
		j := jobstate.Job{ID: uuid.New(), Machine: "m", State: "a", Kind: jobstate.KindInitial, Version: 1, CreatedAt: at}
		ids[i] = j.ID
		if _, _, err := s.Create(ctx, "m", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
			return jobstate.Write{Job: j}, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	recs := make([]jobstate.Transition, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := s.Update(ctx, ids[i%len(ids)], func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			j := cur.Job
			j.Version++
			recs[0] = jobstate.Transition{JobID: j.ID, Version: j.Version, From: "a", Event: "go", To: "a"}
			return jobstate.Write{Job: j, Transitions: recs}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
