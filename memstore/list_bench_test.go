package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// listBenchJobs is the number of jobs BenchmarkList pages over.
const listBenchJobs = 1_000_000

var listBench struct {
	once  sync.Once
	store *Store
}

// listBenchStore returns a store of 1,000,000 jobs of one machine, spread
// over four states (60 % succeeded, 20 % failed, 15 % queued, 5 %
// running) and 20,000 owners (50 jobs each), created a millisecond apart.
func listBenchStore(b *testing.B) *Store {
	listBench.once.Do(func() {
		s := New()
		ctx := context.Background()
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < listBenchJobs; i++ {
			st, kind := jobstate.State("succeeded"), jobstate.KindTerminal
			switch r := i % 20; {
			case r < 4:
				st = "failed"
			case r < 7:
				st, kind = "queued", jobstate.KindReady
			case r < 8:
				st, kind = "running", jobstate.KindActive
			}
			created := at.Add(time.Duration(i) * time.Millisecond)
			j := jobstate.Job{
				ID: uuid.New(), Machine: "docs", State: st, Kind: kind, Version: 1,
				Owner:     fmt.Sprintf("user-%d", i%20_000),
				CreatedAt: created, UpdatedAt: created.Add(time.Duration(i%7) * time.Second),
			}
			if _, _, err := s.Create(ctx, "docs", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
				return jobstate.Write{Job: j}, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		// The first listing builds the indexes; keep it out of the timings.
		if _, err := s.List(ctx, jobstate.ListQuery{Limit: 1}); err != nil {
			b.Fatal(err)
		}
		listBench.store = s
	})
	return listBench.store
}

// BenchmarkList measures the first page of 50 (and a page deep in the
// listing) among 1,000,000 jobs, through the engine as a service calls
// it, for the common filters.
func BenchmarkList(b *testing.B) {
	s := listBenchStore(b)
	eng, err := jobstate.New(s)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		q    jobstate.ListQuery
	}{
		{"machine+state", jobstate.ListQuery{Machine: "docs", States: []jobstate.State{"failed"}}},
		{"machine+state/newest", jobstate.ListQuery{Machine: "docs", States: []jobstate.State{"failed"}, Desc: true}},
		{"machine+2states/updated", jobstate.ListQuery{Machine: "docs", States: []jobstate.State{"queued", "running"}, Order: jobstate.OrderUpdated, Desc: true}},
		{"owner", jobstate.ListQuery{Owner: "user-4242"}},
		{"owner/updated", jobstate.ListQuery{Owner: "user-4242", Order: jobstate.OrderUpdated, Desc: true}},
		{"machine", jobstate.ListQuery{Machine: "docs"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := c.q
			q.Limit = 50
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				page, err := eng.List(ctx, q, "")
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Jobs) != 50 {
					b.Fatalf("page of %d jobs", len(page.Jobs))
				}
			}
		})
	}
	b.Run("machine+state/page-1000", func(b *testing.B) {
		q := jobstate.ListQuery{Machine: "docs", States: []jobstate.State{"failed"}, Limit: 50}
		cursor := ""
		for p := 0; p < 1000; p++ {
			page, err := eng.List(ctx, q, cursor)
			if err != nil {
				b.Fatal(err)
			}
			cursor = page.Next
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			page, err := eng.List(ctx, q, cursor)
			if err != nil || len(page.Jobs) != 50 {
				b.Fatal(err, len(page.Jobs))
			}
		}
	})
}
