package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// BenchmarkList measures the first page of 50 jobs of a listing through
// the engine, among 1,000,000 jobs loaded as TestPlansAtScale loads them
// (7 machines, 1,000 owners; per machine about 1,430 failed, 12,860 done
// and 128,570 queued jobs; 1,000 jobs per owner):
//
//	go test ./pgstore -run '^$' -bench List -benchmem
func BenchmarkList(b *testing.B) {
	s := pgtest.Store(b)
	loadScale(b, s, 1_000_000)
	// The machines loadScale's jobs belong to: a listing by machine
	// names a machine the engine knows.
	var defs []*jobstate.Definition
	for i := range 7 {
		def, err := jobstate.NewDefinition(machines.WorkSpec(fmt.Sprintf("m%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		defs = append(defs, def)
	}
	eng, err := jobstate.New(s, jobstate.WithMachines(defs...))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		q    jobstate.ListQuery
	}{
		{"machine+state", jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed"}}},
		{"machine+state/newest", jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed"}, Desc: true}},
		{"machine+2states/newest", jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed", "done"}, Desc: true}},
		{"machine+state/large", jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"queued"}}},
		{"owner", jobstate.ListQuery{Owner: "user7"}},
		{"owner/newest", jobstate.ListQuery{Owner: "user7", Desc: true}},
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
	b.Run("machine+state/page-20", func(b *testing.B) {
		q := jobstate.ListQuery{Machine: "m3", States: []jobstate.State{"failed"}, Limit: 50}
		cursor := ""
		for p := 0; p < 20; p++ {
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
