package jobstate_test

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
	"github.com/jobstate/jobstate/memstore"
)

// planning is a store that applies commit plans the way the contract
// says, on top of its inner store's Update: the reference a store's own
// application is held to.
type planning struct {
	jobstate.Store
	applied int
}

func (p *planning) AppliesCommitPlans() bool { return true }

func (p *planning) UpdatePlanned(ctx context.Context, id uuid.UUID, cp *jobstate.CommitPlan, effect jobstate.EffectFunc, fn jobstate.UpdateFunc) (jobstate.Job, []jobstate.Transition, error) {
	var recs []jobstate.Transition
	job, err := p.Update(ctx, id, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		recs = nil
		m, x, ok := cp.Covers(&cur)
		if !ok {
			return fn(ctx, cur)
		}
		w := cp.Apply(cur, m, *x)
		if effect != nil {
			if err := effect(ctx, w.Job); err != nil {
				return jobstate.Write{}, err
			}
		}
		recs = w.Transitions
		return w, nil
	})
	if err != nil {
		return jobstate.Job{}, nil, err
	}
	if recs != nil {
		p.applied++
	}
	return job, recs, nil
}

// TestCommitPlanAsTheFunction: random sequences of claims, starts,
// heartbeats, successes (with an effect that records the job it sees),
// failures, cancellations and sweeps, on two machines (one requiring a
// start), leave the same jobs, executions, history, observed transitions,
// answers and effects on a store that applies commit plans as on one
// that calls Succeed's function; and the plans were applied.
func TestCommitPlanAsTheFunction(t *testing.T) {
	strict := machines.WorkSpec("strict", machines.WorkRetries(2))
	strict.Policy.RequireStart = true
	specs := []jobstate.Spec{machines.WorkSpec("work", machines.WorkRetries(2)), strict}
	var defs []*jobstate.Definition
	for _, s := range specs {
		d, err := jobstate.NewDefinition(s)
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	type side struct {
		eng     *jobstate.Engine
		clock   *jobstate.ManualClock
		seen    []string
		effects []string
	}
	start := time.Date(2026, 11, 28, 2, 30, 0, 42, time.UTC)
	for seed := range uint64(6) {
		planner := &planning{Store: memstore.New()}
		open := func(store jobstate.Store) *side {
			s := &side{clock: jobstate.NewManualClock(start)}
			var n uint64
			ids := func() (uuid.UUID, error) {
				n++
				return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d", n)), nil
			}
			eng, err := jobstate.New(store, jobstate.WithMachines(defs...), jobstate.WithClock(s.clock), jobstate.WithIDs(ids),
				jobstate.WithObserver(func(_ context.Context, j jobstate.Job, tr jobstate.Transition) {
					s.seen = append(s.seen, fmt.Sprintf("%v %+v", j.Version, tr))
				}))
			if err != nil {
				t.Fatal(err)
			}
			s.eng = eng
			return s
		}
		a, b := open(planner), open(memstore.New())
		rnd := rand.New(rand.NewPCG(seed, 11))
		var leases [2][]jobstate.Lease
		var jobs []uuid.UUID
		for step := range 200 {
			op := rnd.IntN(9)
			machine := specs[rnd.IntN(2)].Name
			pick := rnd.Int()
			advance := time.Duration(rnd.IntN(50)) * time.Second
			var answers [2]string
			for k, s := range []*side{a, b} {
				ctx := context.Background()
				take := func() (jobstate.Lease, bool) {
					if len(leases[k]) == 0 {
						return jobstate.Lease{}, false
					}
					i := pick % len(leases[k])
					l := leases[k][i]
					leases[k] = append(leases[k][:i], leases[k][i+1:]...)
					return l, true
				}
				var res any
				var err error
				switch op {
				case 0, 1:
					var c jobstate.Created
					c, err = s.eng.Create(ctx, jobstate.NewJob{Machine: machine})
					if err == nil && k == 0 {
						jobs = append(jobs, c.Job.ID)
					}
					res = c.Job
				case 2:
					var c jobstate.Claimed
					c, err = s.eng.Claim(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"})
					if err == nil {
						leases[k] = append(leases[k], c.Lease)
					}
					res = c.Job
				case 3:
					if l, ok := take(); ok {
						res, err = s.eng.Start(ctx, l)
						leases[k] = append(leases[k], l)
					}
				case 4:
					if l, ok := take(); ok {
						res, err = s.eng.Heartbeat(ctx, l)
						leases[k] = append(leases[k], l)
					}
				case 5, 6:
					if l, ok := take(); ok {
						fail := pick%5 == 0
						res, err = s.eng.Succeed(ctx, l, jobstate.CommitInput{Result: []byte("r"), Effect: func(_ context.Context, j jobstate.Job) error {
							s.effects = append(s.effects, fmt.Sprintf("%v %v %v", j.ID, j.State, j.Version))
							if fail {
								return errors.New("effect failed")
							}
							return nil
						}})
						if fail {
							leases[k] = append(leases[k], l)
						}
					}
				case 7:
					if l, ok := take(); ok {
						res, err = s.eng.Fail(ctx, l, errors.New("flaky"))
					}
				case 8:
					s.clock.Advance(advance)
					res, err = s.eng.Sweep(ctx)
				}
				answers[k] = fmt.Sprintf("%+v %v", res, err)
			}
			if answers[0] != answers[1] {
				t.Fatalf("seed %d step %d op %d:\nwith plans %s\nwithout    %s", seed, step, op, answers[0], answers[1])
			}
		}
		for _, id := range jobs {
			for _, read := range []func(*jobstate.Engine) (any, error){
				func(e *jobstate.Engine) (any, error) { return e.Get(context.Background(), id) },
				func(e *jobstate.Engine) (any, error) { return e.Executions(context.Background(), id) },
				func(e *jobstate.Engine) (any, error) { return e.History(context.Background(), id) },
			} {
				x, errA := read(a.eng)
				y, errB := read(b.eng)
				if errA != nil || errB != nil || !reflect.DeepEqual(x, y) {
					t.Fatalf("seed %d: job %s reads\n%+v (%v)\n%+v (%v)", seed, id, x, errA, y, errB)
				}
			}
		}
		if !reflect.DeepEqual(a.seen, b.seen) || !reflect.DeepEqual(a.effects, b.effects) {
			t.Fatalf("seed %d: observers or effects differ:\n%v\n%v\n%v\n%v", seed, a.seen, b.seen, a.effects, b.effects)
		}
		if planner.applied == 0 {
			t.Fatalf("seed %d: no commit plan applied", seed)
		}
	}
}
