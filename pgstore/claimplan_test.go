package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// noPlans is a store that does not apply claim plans: its claims call the
// engine's function for every candidate.
type noPlans struct{ *pgstore.Store }

func (noPlans) AppliesClaimPlans() bool { return false }

// planMachine is the work machine with retries, and deadlines that expire
// a queued or running job.
func planMachine() jobstate.Spec {
	s := machines.WorkSpec("plan", machines.WorkRetries(3))
	s.States = append(s.States, jobstate.StateSpec{Name: "expired", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired})
	s.Rules = append(s.Rules, jobstate.Rule{From: []jobstate.State{machines.WQueued, machines.WRunning}, Event: jobstate.EventExpire, To: "expired"})
	return s
}

// counter is an id source whose ids count the calls.
func counter() func() (uuid.UUID, error) {
	var n uint64
	return func() (uuid.UUID, error) {
		n++
		var id uuid.UUID
		for i := range 8 {
			id[15-i] = byte(n >> (8 * i))
		}
		id[6], id[8] = 0x70, 0x80
		return id, nil
	}
}

// TestClaimPlanAsTheFunction: the same jobs (with and without concurrency
// keys, priorities, not-befores and deadlines), claimed, succeeded, failed
// and retried, and swept as the clock passes their deadlines and leases,
// read back alike from a store that applies claim plans and from one that
// calls the claim function for every candidate (executions' ids aside,
// which the two engines draw in different orders); and the first batch
// takes its jobs by the plan.
func TestClaimPlanAsTheFunction(t *testing.T) {
	ctx := context.Background()
	def, err := jobstate.NewDefinition(planMachine())
	must(t, err)
	start := time.Date(2026, 11, 28, 2, 0, 0, 123456789, time.UTC)
	type side struct {
		eng    *jobstate.Engine
		clock  *jobstate.ManualClock
		leases map[uuid.UUID]jobstate.Lease
	}
	open := func(store jobstate.Store) *side {
		clock := jobstate.NewManualClock(start)
		eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock), jobstate.WithIDs(counter()))
		must(t, err)
		return &side{eng: eng, clock: clock, leases: map[uuid.UUID]jobstate.Lease{}}
	}
	planned, plain := open(pgtest.Store(t)), open(noPlans{pgtest.Store(t)})
	both := []*side{planned, plain}

	rnd := rand.New(rand.NewPCG(7, 28))
	var jobs []jobstate.NewJob
	for i := range 40 {
		nj := jobstate.NewJob{Machine: "plan", Priority: rnd.IntN(3), Payload: []byte(fmt.Sprint(i))}
		if i%5 == 1 {
			nj.ConcurrencyKey = fmt.Sprintf("k%d", i%3)
		}
		if i%7 == 2 {
			nj.NotBefore = start.Add(time.Duration(rnd.IntN(90)) * time.Second)
		}
		if i%4 == 3 {
			nj.Deadline = start.Add(time.Duration(30+rnd.IntN(300)) * time.Second)
		}
		jobs = append(jobs, nj)
	}
	var ids []uuid.UUID
	for _, s := range both {
		created, err := s.eng.CreateMany(ctx, jobs)
		must(t, err)
		ids = ids[:0]
		for _, c := range created {
			ids = append(ids, c.Job.ID)
		}
	}

	first := true
	for round := range 30 {
		n := 1 + rnd.IntN(8)
		fail := rnd.IntN(3) == 0
		advance := time.Duration(rnd.IntN(40)) * time.Second
		for _, s := range both {
			claimed, err := s.eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "plan", Worker: "w"}, n)
			if errors.Is(err, jobstate.ErrNoJob) {
				claimed = nil
			} else {
				must(t, err)
			}
			if first && s == planned {
				// The engine drew the plan's ids right after the jobs'.
				for i, c := range claimed {
					if want := uint64(len(jobs) + i + 1); c.Lease.ExecID[15] != byte(want) {
						t.Fatalf("job %d of the first batch has execution %v: not the plan's", i, c.Lease.ExecID)
					}
				}
			}
			for i, c := range claimed {
				if i%2 == 0 {
					s.leases[c.Job.ID] = c.Lease
					continue
				}
				if fail {
					_, err = s.eng.Fail(ctx, c.Lease, errors.New("flaky"))
				} else {
					_, err = s.eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
				}
				must(t, err)
			}
			s.clock.Advance(advance)
			_, err = s.eng.Sweep(ctx)
			must(t, err)
		}
		first = false
		compareSides(t, round, planned.eng, plain.eng, ids)
	}
}

// compareSides fails the test unless every job of ids reads back alike
// from a and b, executions' ids aside.
func compareSides(t *testing.T, round int, a, b *jobstate.Engine, ids []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		ja, err := a.Get(ctx, id)
		must(t, err)
		jb, err := b.Get(ctx, id)
		must(t, err)
		ja.Committed, jb.Committed = uuid.Nil, uuid.Nil
		if !reflect.DeepEqual(ja, jb) {
			t.Fatalf("round %d: job %s\nwith plans %+v\nwithout    %+v", round, id, ja, jb)
		}
		xa, err := a.Executions(ctx, id)
		must(t, err)
		xb, err := b.Executions(ctx, id)
		must(t, err)
		for i := range xa {
			xa[i].ID = uuid.Nil
		}
		for i := range xb {
			xb[i].ID = uuid.Nil
		}
		if !reflect.DeepEqual(xa, xb) {
			t.Fatalf("round %d: job %s executions\nwith plans %+v\nwithout    %+v", round, id, xa, xb)
		}
		ha, err := a.History(ctx, id)
		must(t, err)
		hb, err := b.History(ctx, id)
		must(t, err)
		for i := range ha {
			ha[i].ExecID = uuid.Nil
		}
		for i := range hb {
			hb[i].ExecID = uuid.Nil
		}
		if !reflect.DeepEqual(ha, hb) {
			t.Fatalf("round %d: job %s history\nwith plans %+v\nwithout    %+v", round, id, ha, hb)
		}
	}
}
