package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

// BenchmarkClaimPerKey measures a claim and a finish in a steady state of
// 10,000 queued jobs with 100 executions in flight: each operation claims
// the next job, succeeds the oldest in flight, and creates a job of the
// claimed job's key to keep the backlog's shape.
//
//   - none: no concurrency keys (the baseline);
//   - keys1000: 1,000 keys limited to 1 each, the jobs spread over them;
//   - hotkey: one key limited to 1 holds 9,000 of the jobs, ahead of the
//     others in claim order, and 1,000 other keys one job each: every
//     claim passes over the hot key's backlog to reach the others.
func BenchmarkClaimPerKey(b *testing.B) {
	const jobs, inFlight = 10_000, 100
	cases := []struct {
		name  string
		limit int
		key   func(i int) string
	}{
		{"none", 0, func(int) string { return "" }},
		{"keys1000", 1, func(i int) string { return fmt.Sprint("k", i%1000) }},
		{"hotkey", 1, func(i int) string {
			if i < 9000 {
				return "hot"
			}
			return fmt.Sprint("k", i)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			spec := jobstate.Spec{
				Name: "keyed",
				States: []jobstate.StateSpec{
					{Name: "QUEUED", Kind: jobstate.KindReady},
					{Name: "RUNNING", Kind: jobstate.KindActive},
					{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
					{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
				},
				Initial: "QUEUED",
				Rules: []jobstate.Rule{
					{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
					{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "DONE"},
					{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
				},
				Policy: jobstate.Policy{LeaseTTL: time.Hour, MaxPerKey: c.limit},
			}
			def, err := jobstate.NewDefinition(spec)
			if err != nil {
				b.Fatal(err)
			}
			clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			eng, err := jobstate.New(New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			create := func(key string) {
				clock.Advance(time.Microsecond)
				if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "keyed", ConcurrencyKey: key}); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < jobs; i++ {
				create(c.key(i))
			}
			req := jobstate.ClaimRequest{Machine: "keyed", Worker: "w"}
			var flight []jobstate.Lease
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl, err := eng.Claim(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				flight = append(flight, cl.Lease)
				if len(flight) > inFlight {
					if _, err := eng.Succeed(ctx, flight[0], jobstate.CommitInput{}); err != nil {
						b.Fatal(err)
					}
					flight = flight[1:]
				}
				create(cl.Job.ConcurrencyKey)
			}
		})
	}
}
