package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
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

// twinEngine returns an engine of def on store, with a clock of its own
// at start and enginesuite.CountingIDs, as each side of a twin test has.
func twinEngine(t *testing.T, store jobstate.Store, def *jobstate.Definition, start time.Time) (*jobstate.Engine, *jobstate.ManualClock) {
	t.Helper()
	clock := jobstate.NewManualClock(start)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock), jobstate.WithIDs(enginesuite.CountingIDs()))
	must(t, err)
	return eng, clock
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
		eng, clock := twinEngine(t, store, def, start)
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
	for _, id := range ids {
		sa, sb := sideRecords(t, a, id), sideRecords(t, b, id)
		if !reflect.DeepEqual(sa, sb) {
			t.Fatalf("round %d: job %s\nwith plans %+v\nwithout    %+v", round, id, sa, sb)
		}
	}
}

// sideRecords reads job id, its executions and its history from e, with
// the ids of its executions left out.
func sideRecords(t *testing.T, e *jobstate.Engine, id uuid.UUID) enginesuite.State {
	t.Helper()
	ctx := context.Background()
	var s enginesuite.State
	var err error
	s.Job, err = e.Get(ctx, id)
	must(t, err)
	s.Execs, err = e.Executions(ctx, id)
	must(t, err)
	s.History, err = e.History(ctx, id)
	must(t, err)
	s.Job.Committed = uuid.Nil
	for i := range s.Execs {
		s.Execs[i].ID = uuid.Nil
	}
	for i := range s.History {
		s.History[i].ExecID = uuid.Nil
	}
	return s
}

// noCommitPlans is a store with group commit that applies neither claim
// nor commit plans.
type noCommitPlans struct{ *pgstore.Store }

func (noCommitPlans) AppliesClaimPlans() bool  { return false }
func (noCommitPlans) AppliesCommitPlans() bool { return false }

// TestCommitPlanAsTheFunction: with group commit, successes made
// concurrently (so that they share groups), some after a start, some of
// leases that lapsed, with an effect that writes a row in the group's
// transaction and fails for some jobs, leave the same jobs, executions,
// history, effect rows, calls of the effect and answers on a store that
// applies commit plans as on one that calls Succeed's function; a failing
// effect undoes its job's commit and nothing else, and no effect is called
// again because another failed.
func TestCommitPlanAsTheFunction(t *testing.T) {
	ctx := context.Background()
	def, err := jobstate.NewDefinition(planMachine())
	must(t, err)
	start := time.Date(2026, 11, 28, 2, 20, 0, 7, time.UTC)
	pool := pgtest.Pool(t)
	type side struct {
		eng   *jobstate.Engine
		clock *jobstate.ManualClock
		table string
		mu    sync.Mutex
		calls map[uuid.UUID]int // the effect's calls, by job
	}
	open := func(store *pgstore.Store, plans bool) *side {
		var st jobstate.Store = store
		if !plans {
			st = noCommitPlans{store}
		}
		eng, clock := twinEngine(t, st, def, start)
		table := store.Schema() + ".effect_rows"
		_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (job_id uuid, version bigint, state text)")
		must(t, err)
		return &side{eng: eng, clock: clock, table: table, calls: map[uuid.UUID]int{}}
	}
	planned := open(pgtest.StoreWith(t, pgstore.Options{GroupCommit: 16}), true)
	plain := open(pgtest.StoreWith(t, pgstore.Options{GroupCommit: 16}), false)
	rnd := rand.New(rand.NewPCG(3, 20))
	var ids []uuid.UUID
	for _, s := range []*side{planned, plain} {
		jobs := make([]jobstate.NewJob, 60)
		for i := range jobs {
			jobs[i] = jobstate.NewJob{Machine: "plan"}
		}
		created, err := s.eng.CreateMany(ctx, jobs)
		must(t, err)
		ids = ids[:0]
		for _, c := range created {
			ids = append(ids, c.Job.ID)
		}
	}
	fails := map[uuid.UUID]bool{}
	for _, id := range ids {
		fails[id] = rnd.IntN(6) == 0
	}
	for round := range 8 {
		n := 4 + rnd.IntN(8)
		startSome, lapse := rnd.IntN(2) == 0, rnd.IntN(4) == 0
		answers := [2]map[uuid.UUID]string{{}, {}}
		for k, s := range []*side{planned, plain} {
			claimed, err := s.eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "plan", Worker: "w"}, n)
			if errors.Is(err, jobstate.ErrNoJob) {
				continue
			}
			must(t, err)
			if startSome {
				for _, c := range claimed[:len(claimed)/2] {
					_, err := s.eng.Start(ctx, c.Lease)
					must(t, err)
				}
			}
			if lapse {
				s.clock.Advance(2 * time.Minute)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			for _, c := range claimed {
				wg.Add(1)
				go func() {
					defer wg.Done()
					j, err := s.eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok"), Effect: func(ctx context.Context, j jobstate.Job) error {
						s.mu.Lock()
						s.calls[j.ID]++
						s.mu.Unlock()
						tx, ok := pgstore.Tx(ctx)
						if !ok {
							return errors.New("no transaction in the effect's context")
						}
						if _, err := tx.Exec(ctx, "INSERT INTO "+s.table+" VALUES ($1, $2, $3)", j.ID, j.Version, string(j.State)); err != nil {
							return err
						}
						if fails[j.ID] {
							return errors.New("effect refused")
						}
						return nil
					}})
					mu.Lock()
					answers[k][c.Job.ID] = fmt.Sprintf("%v %v %v", j.State, j.Version, kindOf(err))
					mu.Unlock()
				}()
			}
			wg.Wait()
			_, err = s.eng.Sweep(ctx)
			must(t, err)
		}
		if !reflect.DeepEqual(answers[0], answers[1]) {
			t.Fatalf("round %d answers\nwith plans %v\nwithout    %v", round, answers[0], answers[1])
		}
		compareSides(t, round, planned.eng, plain.eng, ids)
		var rows [2][]string
		for k, s := range []*side{planned, plain} {
			r, err := pool.Query(ctx, "SELECT job_id::text || ' ' || version || ' ' || state FROM "+s.table+" ORDER BY 1")
			must(t, err)
			rows[k], err = pgx.CollectRows(r, pgx.RowTo[string])
			must(t, err)
		}
		if !reflect.DeepEqual(rows[0], rows[1]) {
			t.Fatalf("round %d effect rows\nwith plans %v\nwithout    %v", round, rows[0], rows[1])
		}
		if !reflect.DeepEqual(planned.calls, plain.calls) {
			t.Fatalf("round %d: the effects were called\nwith plans %v\nwithout    %v", round, planned.calls, plain.calls)
		}
	}
}

// kindOf names what err says, without the ids it names.
func kindOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jobstate.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, jobstate.ErrAlreadyCommitted):
		return "already committed"
	}
	return err.Error()
}
