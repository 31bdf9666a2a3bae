package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// RunPlans checks, with rapid, that a store applying claim or commit
// plans (jobstate.ClaimPlanner, jobstate.CommitPlanner) leaves every job
// as the engine's functions would. Random machines are driven by random
// sequences of batch creations and claims, successes (some whose effect
// fails), failures, heartbeats, starts, sweeps and clock moves, the same
// sequence on two stores made by newStore: one seen with its plans, one
// through a wrapper that reports none. After every step the answers (the
// kind of each error, the jobs each claim took, each effect's calls) and
// every job, execution, transition and effect record must be alike,
// execution ids aside (the engines draw them in different orders). A
// store that applies no plans is compared with itself. The store must
// claim and create in batches (BatchClaimer, BatchCreator), through which
// plans reach it.
func RunPlans(t *testing.T, newStore NewStore) {
	// Two stores for every case: each case's jobs are of a machine of
	// its own, with ids no other case drew.
	a, b := newStore(t), newStore(t)
	_, claims := a.(jobstate.BatchClaimer)
	_, creates := a.(jobstate.BatchCreator)
	if !claims || !creates {
		t.Skip("plans reach a store through ClaimBatch and CreateBatch, and this one lacks one of them")
	}
	ids := [2]func() (uuid.UUID, error){enginesuite.CountingIDs(), enginesuite.CountingIDs()}
	cases := 0
	rapid.Check(t, func(rt *rapid.T) {
		cases++
		runTwins(rt, fmt.Sprintf("plans%d", cases), [2]jobstate.Store{a, b}, ids)
	})
}

// planSwitch is a store seen with its plans (plans set) or without: it
// forwards the Store methods, ClaimBatch and CreateBatch, and reports the
// inner store's planners only with plans set.
type planSwitch struct {
	jobstate.Store
	plans bool
}

// ClaimBatch implements jobstate.BatchClaimer.
func (p planSwitch) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	return p.Store.(jobstate.BatchClaimer).ClaimBatch(ctx, q, n, fn)
}

// CreateBatch implements jobstate.BatchCreator.
func (p planSwitch) CreateBatch(ctx context.Context, keys []jobstate.BatchKey, fn jobstate.BatchCreateFunc) ([]jobstate.Created, error) {
	return p.Store.(jobstate.BatchCreator).CreateBatch(ctx, keys, fn)
}

// AppliesClaimPlans implements jobstate.ClaimPlanner.
func (p planSwitch) AppliesClaimPlans() bool {
	cp, ok := p.Store.(jobstate.ClaimPlanner)
	return p.plans && ok && cp.AppliesClaimPlans()
}

// AppliesCommitPlans implements jobstate.CommitPlanner.
func (p planSwitch) AppliesCommitPlans() bool {
	cp, ok := p.Store.(jobstate.CommitPlanner)
	return p.plans && ok && cp.AppliesCommitPlans()
}

// UpdatePlanned implements jobstate.CommitPlanner; the engine calls it
// only when AppliesCommitPlans reports true.
func (p planSwitch) UpdatePlanned(ctx context.Context, id uuid.UUID, plan *jobstate.CommitPlan, effect jobstate.EffectFunc, fn jobstate.UpdateFunc) (jobstate.Job, []jobstate.Transition, error) {
	return p.Store.(jobstate.CommitPlanner).UpdatePlanned(ctx, id, plan, effect, fn)
}

// twin is one side of runTwins: an engine on its store, its clock, and
// what it was given, in order (jobs created, leases granted), with the
// calls of the commit effect per job.
type twin struct {
	eng     *jobstate.Engine
	store   jobstate.Store
	clock   *jobstate.ManualClock
	ids     []uuid.UUID
	leases  []jobstate.Lease
	effects map[uuid.UUID]int
}

// twins runs each step on both sides: a with plans, b without.
type twins struct {
	ctx     context.Context
	machine string
	a, b    *twin
}

// runTwins runs one case on stores (the first seen with its plans, the
// second without), with a machine named machine, and the id sources ids.
func runTwins(rt *rapid.T, machine string, stores [2]jobstate.Store, ids [2]func() (uuid.UUID, error)) {
	spec, _ := genMachine(rt)
	spec.Name = machine
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		rt.Fatalf("generated machine is invalid: %v", err)
	}
	open := func(k int) *twin {
		store := planSwitch{Store: stores[k], plans: k == 0}
		clock := jobstate.NewManualClock(Epoch)
		eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock),
			jobstate.WithIDs(ids[k]), jobstate.WithRandom(func() float64 { return 0 }))
		if err != nil {
			rt.Fatal(err)
		}
		return &twin{eng: eng, store: store, clock: clock, effects: map[uuid.UUID]int{}}
	}
	tw := &twins{ctx: context.Background(), machine: machine, a: open(0), b: open(1)}
	rt.Repeat(map[string]func(*rapid.T){
		"create":    tw.create,
		"claim":     tw.claim,
		"succeed":   tw.leaseOp("succeed"),
		"fail":      tw.leaseOp("fail"),
		"heartbeat": tw.leaseOp("heartbeat"),
		"start":     tw.leaseOp("start"),
		"sweep":     tw.sweep,
		"tick":      tw.tick,
		"":          tw.compare,
	})
	tw.compare(rt)
}

func (tw *twins) create(rt *rapid.T) {
	if len(tw.a.ids) >= 8 {
		tw.tick(rt)
		return
	}
	n := rapid.IntRange(1, 3).Draw(rt, "jobs")
	jobs := make([]jobstate.NewJob, n)
	for i := range jobs {
		jobs[i] = jobstate.NewJob{Machine: tw.machine, Priority: rapid.IntRange(0, 1).Draw(rt, "priority")}
		if rapid.Bool().Draw(rt, "scheduled") {
			jobs[i].NotBefore = tw.a.clock.Now().Add(time.Duration(rapid.IntRange(1, 20).Draw(rt, "delay")) * time.Second)
		}
		if rapid.Bool().Draw(rt, "ttl") {
			jobs[i].TTL = time.Duration(rapid.IntRange(5, 60).Draw(rt, "ttlSeconds")) * time.Second
		}
	}
	for _, s := range []*twin{tw.a, tw.b} {
		got, err := s.eng.CreateMany(tw.ctx, jobs)
		if err != nil {
			rt.Fatalf("create: %v", err)
		}
		for _, c := range got {
			s.ids = append(s.ids, c.Job.ID)
		}
	}
}

func (tw *twins) claim(rt *rapid.T) {
	n := rapid.IntRange(1, 4).Draw(rt, "batch")
	worker := rapid.SampledFrom([]string{"w1", "w2"}).Draw(rt, "worker")
	var took [2][]int
	var errs [2]string
	for k, s := range []*twin{tw.a, tw.b} {
		got, err := s.eng.ClaimMany(tw.ctx, jobstate.ClaimRequest{Machine: tw.machine, Worker: worker}, n)
		errs[k] = errorKind(rt, err)
		for _, c := range got {
			took[k] = append(took[k], s.index(rt, c.Job.ID))
			s.leases = append(s.leases, c.Lease)
		}
	}
	if errs[0] != errs[1] || !reflect.DeepEqual(took[0], took[1]) {
		rt.Fatalf("claim of %d: with plans took jobs %v (%s), without %v (%s)", n, took[0], errs[0], took[1], errs[1])
	}
}

// leaseOp returns a step running op with a lease granted earlier, the
// same grant on both sides: live, or stale (a repeated delivery).
func (tw *twins) leaseOp(op string) func(*rapid.T) {
	return func(rt *rapid.T) {
		if len(tw.a.leases) == 0 {
			tw.claim(rt)
			return
		}
		i := rapid.IntRange(0, len(tw.a.leases)-1).Draw(rt, "lease")
		failing := rapid.Bool().Draw(rt, "effectFails")
		var errs [2]string
		for k, s := range []*twin{tw.a, tw.b} {
			l := s.leases[i]
			var err error
			switch op {
			case "succeed":
				effect := func(_ context.Context, j jobstate.Job) error {
					s.effects[j.ID]++
					if failing {
						return errPlannedEffect
					}
					return nil
				}
				_, err = s.eng.Succeed(tw.ctx, l, jobstate.CommitInput{Effect: effect, Result: []byte("done")})
			case "fail":
				_, err = s.eng.Fail(tw.ctx, l, errors.New("transient"))
			case "heartbeat":
				var nl jobstate.Lease
				if nl, err = s.eng.Heartbeat(tw.ctx, l); err == nil {
					s.leases[i] = nl
				}
			case "start":
				_, err = s.eng.Start(tw.ctx, l)
			}
			errs[k] = errorKind(rt, err)
		}
		if errs[0] != errs[1] {
			rt.Fatalf("%s with lease %d: with plans %s, without %s", op, i, errs[0], errs[1])
		}
	}
}

// errPlannedEffect is the error of a commit effect that fails.
var errPlannedEffect = errors.New("effect refused")

func (tw *twins) sweep(rt *rapid.T) {
	var reports [2]string
	for k, s := range []*twin{tw.a, tw.b} {
		r, err := s.eng.Sweep(tw.ctx)
		if err != nil {
			rt.Fatalf("sweep: %v", err)
		}
		reports[k] = fmt.Sprintf("%+v", r)
	}
	if reports[0] != reports[1] {
		rt.Fatalf("sweep: with plans %s, without %s", reports[0], reports[1])
	}
}

func (tw *twins) tick(rt *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 15).Draw(rt, "seconds")) * time.Second
	tw.a.clock.Advance(d)
	tw.b.clock.Advance(d)
}

// compare fails unless every job reads back alike on both sides, with
// ids replaced by the job's place in creation order and execution ids
// left out, and the commit effect was called as often.
func (tw *twins) compare(rt *rapid.T) {
	if len(tw.a.ids) != len(tw.b.ids) {
		rt.Fatalf("with plans %d jobs, without %d", len(tw.a.ids), len(tw.b.ids))
	}
	for i := range tw.a.ids {
		sa, sb := tw.a.load(rt, i), tw.b.load(rt, i)
		if !reflect.DeepEqual(sa, sb) {
			rt.Fatalf("job %d:\nwith plans %+v\nwithout    %+v", i, sa, sb)
		}
		if ea, eb := tw.a.effects[tw.a.ids[i]], tw.b.effects[tw.b.ids[i]]; ea != eb {
			rt.Fatalf("job %d: the effect ran %d times with plans, %d without", i, ea, eb)
		}
	}
}

// index returns the place of job id in s's creation order.
func (s *twin) index(rt *rapid.T, id uuid.UUID) int {
	for i, x := range s.ids {
		if x == id {
			return i
		}
	}
	rt.Fatalf("job %s was never created", id)
	return -1
}

// load reads job i of s as compare compares it.
func (s *twin) load(rt *rapid.T, i int) state {
	st := enginesuite.Load(rt, s.store, s.ids[i])
	st.Job.ID, st.Job.Committed = uuid.Nil, uuid.Nil
	for k := range st.Execs {
		st.Execs[k].ID, st.Execs[k].JobID = uuid.Nil, uuid.Nil
	}
	for k := range st.History {
		st.History[k].JobID, st.History[k].ExecID = uuid.Nil, uuid.Nil
	}
	for k := range st.Effects {
		st.Effects[k].ExecID = uuid.Nil
	}
	return st
}

// errorKind names the documented error err matches ("" for nil); any
// other error fails the test.
func errorKind(rt *rapid.T, err error) string {
	if err == nil {
		return ""
	}
	for _, k := range []error{
		jobstate.ErrInvalidTransition, jobstate.ErrTerminal, jobstate.ErrGuardRefused,
		jobstate.ErrLeaseLost, jobstate.ErrAlreadyCommitted, jobstate.ErrNotClaimable,
		jobstate.ErrNoJob, jobstate.ErrInvalidArgument, errPlannedEffect,
	} {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	rt.Fatalf("undocumented error: %v", err)
	return ""
}
