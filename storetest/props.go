package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// RunProperties checks the invariants of the specification (§5) with rapid: random
// valid machines driven by random operation sequences on the store.
func RunProperties(t *testing.T, newStore NewStore) {
	t.Run("Lifecycle", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { runModel(rt, t, newStore) })
	})
	t.Run("BoundedRetry", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propBoundedRetry(rt, t, newStore) })
	})
	t.Run("IdempotentCreate", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propIdempotency(rt, t, newStore) })
	})
	t.Run("Texts", func(t *testing.T) { propTexts(t, newStore) })
}

// model drives one engine over one store and checks invariants after
// every step.
type model struct {
	rt      *rapid.T
	ctx     context.Context
	def     *jobstate.Definition
	eng     *jobstate.Engine
	store   jobstate.Store
	clock   *jobstate.ManualClock
	events  []jobstate.Event
	ids     []uuid.UUID
	leases  []jobstate.Lease
	last    map[uuid.UUID]state // as seen after the previous step
	effects map[uuid.UUID]int   // commit effects applied, per job
	mu      sync.Mutex
}

func runModel(rt *rapid.T, t *testing.T, newStore NewStore) {
	spec, events := genMachine(rt)
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		rt.Fatalf("generated machine is invalid: %v", err)
	}
	md := &model{
		rt: rt, ctx: context.Background(), def: def, store: newStore(t),
		clock: jobstate.NewManualClock(Epoch), events: events,
		last: make(map[uuid.UUID]state), effects: make(map[uuid.UUID]int),
	}
	md.eng, err = jobstate.New(md.store, jobstate.WithMachines(def), jobstate.WithClock(md.clock), jobstate.WithRandom(func() float64 { return 0 }))
	if err != nil {
		rt.Fatal(err)
	}
	rt.Repeat(map[string]func(*rapid.T){
		"create":     md.create,
		"createMany": md.createMany,
		"fire":       md.fire,
		"claim":      md.claim,
		"claimJob":   md.claimJob,
		"heartbeat":  md.leaseOp("heartbeat"),
		"start":      md.leaseOp("start"),
		"commit":     md.leaseOp("commit"),
		"finish":     md.leaseOp("finish"),
		"succeed":    md.leaseOp("succeed"),
		"fail":       md.leaseOp("fail"),
		"permanent":  md.leaseOp("permanent"),
		"snooze":     md.leaseOp("snooze"),
		"advance":    md.leaseOp("advance"),
		"sweep":      md.sweep,
		"tick":       md.tick,
		"":           md.check,
	})
	md.finalSweep()
}

func (md *model) effect(_ context.Context, j jobstate.Job) error {
	md.mu.Lock()
	md.effects[j.ID]++
	md.mu.Unlock()
	return nil
}

// do runs op, and if it fails checks that nothing changed anywhere. Jobs
// are read through the engine first, so that lazy expiry, which any
// operation on an overdue job applies first, has happened already.
func (md *model) do(rt *rapid.T, name string, op func() error) {
	for _, id := range md.ids {
		if _, err := md.eng.Get(md.ctx, id); err != nil {
			rt.Fatal(err)
		}
	}
	md.check(rt)
	before := md.loadAll()
	err := op()
	if err == nil {
		return
	}
	if after := md.loadAll(); !reflect.DeepEqual(before, after) {
		rt.Fatalf("%s failed with %v but changed stored state", name, err)
	}
	md.checkErr(rt, name, err)
}

// checkErr fails on an error that is no documented refusal.
func (md *model) checkErr(rt *rapid.T, name string, err error) {
	for _, want := range []error{
		jobstate.ErrInvalidTransition, jobstate.ErrTerminal, jobstate.ErrGuardRefused,
		jobstate.ErrLeaseLost, jobstate.ErrAlreadyCommitted, jobstate.ErrNotClaimable,
		jobstate.ErrNoJob, jobstate.ErrInvalidArgument,
	} {
		if errors.Is(err, want) {
			return
		}
	}
	rt.Fatalf("%s: undocumented error %v", name, err)
}

func (md *model) loadAll() map[uuid.UUID]state {
	out := make(map[uuid.UUID]state, len(md.ids))
	for _, id := range md.ids {
		out[id] = md.load(id)
	}
	return out
}

func (md *model) load(id uuid.UUID) state {
	var s state
	var err error
	if s.Job, err = md.store.Get(md.ctx, id); err != nil {
		md.rt.Fatal(err)
	}
	if s.Execs, err = md.store.Executions(md.ctx, id); err != nil {
		md.rt.Fatal(err)
	}
	if s.History, err = md.store.History(md.ctx, id); err != nil {
		md.rt.Fatal(err)
	}
	if s.Effects, err = md.store.Effects(md.ctx, id); err != nil {
		md.rt.Fatal(err)
	}
	return s
}

// The actions never skip: a byte stream from the fuzzer may choose the same
// impossible action again and again, and rapid gives up after too many
// skips. An action that has nothing to act on does the nearest useful
// thing instead.

func (md *model) create(rt *rapid.T) {
	if len(md.ids) >= 6 {
		md.tick(rt) // enough jobs
		return
	}
	nj := jobstate.NewJob{Machine: "gen", Priority: rapid.IntRange(0, 2).Draw(rt, "priority")}
	if rapid.Bool().Draw(rt, "ttl") {
		nj.TTL = time.Duration(rapid.IntRange(1, 60).Draw(rt, "ttlSeconds")) * time.Second
	}
	if rapid.Bool().Draw(rt, "scheduled") {
		nj.NotBefore = md.clock.Now().Add(time.Duration(rapid.IntRange(1, 20).Draw(rt, "delay")) * time.Second)
	}
	c, err := md.eng.Create(md.ctx, nj)
	if err != nil {
		rt.Fatal(err)
	}
	md.ids = append(md.ids, c.Job.ID)
}

// createMany creates one to three jobs with Engine.CreateMany, on a store
// with the BatchCreator capability (create, otherwise).
func (md *model) createMany(rt *rapid.T) {
	if _, ok := md.store.(jobstate.BatchCreator); !ok || len(md.ids) >= 4 {
		md.create(rt)
		return
	}
	n := rapid.IntRange(1, 3).Draw(rt, "many")
	jobs := make([]jobstate.NewJob, n)
	for i := range jobs {
		jobs[i] = jobstate.NewJob{Machine: "gen", Priority: rapid.IntRange(0, 2).Draw(rt, "priority")}
		if rapid.Bool().Draw(rt, "scheduled") {
			jobs[i].NotBefore = md.clock.Now().Add(time.Duration(rapid.IntRange(1, 20).Draw(rt, "delay")) * time.Second)
		}
	}
	got, err := md.eng.CreateMany(md.ctx, jobs)
	if err != nil {
		rt.Fatal(err)
	}
	if len(got) != n {
		rt.Fatalf("CreateMany of %d jobs returned %d", n, len(got))
	}
	for _, c := range got {
		if c.Existing {
			rt.Fatalf("CreateMany of jobs without keys returned job %s as existing", c.Job.ID)
		}
		md.ids = append(md.ids, c.Job.ID)
	}
}

func (md *model) job(rt *rapid.T) uuid.UUID {
	if len(md.ids) == 0 {
		md.create(rt)
	}
	return rapid.SampledFrom(md.ids).Draw(rt, "job")
}

func (md *model) fire(rt *rapid.T) {
	id := md.job(rt)
	ev := rapid.SampledFrom(md.events).Draw(rt, "event")
	arg := rapid.IntRange(0, 3).Draw(rt, "arg")
	md.do(rt, "fire "+string(ev), func() error {
		_, err := md.eng.Fire(md.ctx, id, ev, jobstate.Call{Actor: "user", Args: arg})
		return err
	})
}

func (md *model) claim(rt *rapid.T) {
	worker := rapid.SampledFrom([]string{"w1", "w2", "w3"}).Draw(rt, "worker")
	md.do(rt, "claim", func() error {
		c, err := md.eng.Claim(md.ctx, jobstate.ClaimRequest{Machine: "gen", Worker: worker})
		if err == nil {
			if c.Job.NotBefore.After(md.clock.Now()) {
				rt.Fatalf("claimed job %s before its not-before", c.Job.ID)
			}
			md.leases = append(md.leases, c.Lease)
		}
		return err
	})
}

func (md *model) claimJob(rt *rapid.T) {
	id := md.job(rt)
	md.do(rt, "claimJob", func() error {
		c, err := md.eng.ClaimJob(md.ctx, id, jobstate.ClaimRequest{Worker: "w9"})
		if err == nil {
			md.leases = append(md.leases, c.Lease)
		}
		return err
	})
}

// leaseOp returns an action running one lease operation with a random
// lease ever granted, live or stale: replaying an old lease is duplicate
// delivery.
func (md *model) leaseOp(op string) func(*rapid.T) {
	return func(rt *rapid.T) {
		if len(md.leases) == 0 {
			md.claim(rt)
			return
		}
		l := rapid.SampledFrom(md.leases).Draw(rt, "lease")
		md.do(rt, op, func() error {
			var err error
			switch op {
			case "heartbeat":
				_, err = md.eng.Heartbeat(md.ctx, l)
			case "start":
				_, err = md.eng.Start(md.ctx, l)
			case "commit":
				_, err = md.eng.Commit(md.ctx, l, jobstate.CommitInput{Effect: md.effect})
			case "finish":
				_, err = md.eng.Finish(md.ctx, l)
			case "succeed":
				_, err = md.eng.Succeed(md.ctx, l, jobstate.CommitInput{Effect: md.effect})
			case "fail":
				_, err = md.eng.Fail(md.ctx, l, errors.New("transient"))
			case "permanent":
				_, err = md.eng.Fail(md.ctx, l, jobstate.Permanent(errors.New("bad")))
			case "snooze":
				_, err = md.eng.Snooze(md.ctx, l, 2*time.Second)
			case "advance":
				_, err = md.eng.Advance(md.ctx, l, "step", jobstate.Call{})
			}
			return err
		})
	}
}

func (md *model) sweep(rt *rapid.T) {
	if _, err := md.eng.Sweep(md.ctx); err != nil {
		rt.Fatalf("sweep: %v", err)
	}
}

func (md *model) tick(rt *rapid.T) {
	md.clock.Advance(time.Duration(rapid.IntRange(1, 15).Draw(rt, "seconds")) * time.Second)
}

// check verifies the invariants on every job against the previous step.
func (md *model) check(rt *rapid.T) {
	for _, id := range md.ids {
		cur := md.load(id)
		md.checkJob(rt, cur, md.last[id])
		md.last[id] = cur
	}
}

func (md *model) checkJob(rt *rapid.T, cur, prev state) {
	j := cur.Job
	// Invariant 1: monotonic.
	if st, err := md.def.Replay(cur.History); err != nil || st != j.State {
		rt.Fatalf("job %s: history replays to %q (%v), job is %q", j.ID, st, err, j.State)
	}
	if last := cur.History[len(cur.History)-1].Version; last > j.Version {
		rt.Fatalf("job %s: history version %d above job version %d", j.ID, last, j.Version)
	}
	spec, ok := md.def.State(j.State)
	if !ok || spec.Kind != j.Kind || spec.Outcome != j.Outcome {
		rt.Fatalf("job %s: kind %s outcome %q do not match state %q", j.ID, j.Kind, j.Outcome, j.State)
	}
	if prev.History != nil {
		if j.Version < prev.Job.Version {
			rt.Fatalf("job %s: version went back from %d to %d", j.ID, prev.Job.Version, j.Version)
		}
		if j.Version == prev.Job.Version && !reflect.DeepEqual(cur, prev) {
			rt.Fatalf("job %s changed without a new version", j.ID)
		}
		if j.Attempt < prev.Job.Attempt {
			rt.Fatalf("job %s: attempt went back from %d to %d", j.ID, prev.Job.Attempt, j.Attempt)
		}
		if !reflect.DeepEqual(cur.History[:len(prev.History)], prev.History) {
			rt.Fatalf("job %s: history is not append-only", j.ID)
		}
		if prev.Job.Terminal() && len(cur.History) != len(prev.History) {
			rt.Fatalf("job %s left terminal state %q", j.ID, prev.Job.State)
		}
	}
	// Invariant 10: the wake time is the formula's, for the job as written.
	if want := md.def.WakeAt(j); !j.WakeAt.Equal(want) {
		rt.Fatalf("job %s: wake time %s, the specification gives %s", j.ID, j.WakeAt, want)
	}
	// Invariant 3: bounded retry.
	if j.MaxRetries != jobstate.Unlimited && j.RetryCount > j.MaxRetries {
		rt.Fatalf("job %s: %d retries, max %d", j.ID, j.RetryCount, j.MaxRetries)
	}
	// Invariants 2 and 4: single commit, lease exclusivity.
	committed, live := 0, 0
	for _, x := range cur.Execs {
		if x.Status == jobstate.ExecCommitted || x.Status == jobstate.ExecDone {
			committed++
		}
		if x.Status.Live() {
			live++
		}
	}
	if committed > 1 {
		rt.Fatalf("job %s: %d executions committed", j.ID, committed)
	}
	if live > md.def.Policy().MaxExecutions || live != j.Leases {
		rt.Fatalf("job %s: %d live executions, job says %d, machine allows %d", j.ID, live, j.Leases, md.def.Policy().MaxExecutions)
	}
	// Invariant 7: the job's state is the projection of its executions.
	if err := jobstate.CheckProjection(j, cur.Execs); err != nil {
		rt.Fatal(err)
	}
	// The effect ran once for a committed job, never otherwise.
	md.mu.Lock()
	n := md.effects[j.ID]
	md.mu.Unlock()
	if (j.Committed != uuid.Nil && n != 1) || (j.Committed == uuid.Nil && n != 0) {
		rt.Fatalf("job %s: committed %v, effect ran %d times", j.ID, j.Committed != uuid.Nil, n)
	}
}

// finalSweep checks invariant 6: after a sweep past every lease and
// deadline, no job is active under a dead lease, and a committed job is
// finished.
func (md *model) finalSweep() {
	rt := md.rt
	md.clock.Advance(24 * time.Hour)
	if _, err := md.eng.Sweep(md.ctx); err != nil {
		rt.Fatalf("final sweep: %v", err)
	}
	md.check(rt)
	for _, id := range md.ids {
		j := md.last[id].Job
		switch {
		case j.Kind == jobstate.KindActive:
			rt.Fatalf("job %s still active in %q after the final sweep", id, j.State)
		case j.Leases != 0:
			rt.Fatalf("job %s holds %d leases after the final sweep", id, j.Leases)
		case j.Committed != uuid.Nil && j.Outcome != jobstate.OutcomeSucceeded:
			rt.Fatalf("job %s committed but ended %q", id, j.State)
		case j.Kind == jobstate.KindWaiting && !j.NotBefore.After(md.clock.Now()):
			rt.Fatalf("job %s still waiting past its not-before", id)
		}
	}
	for _, id := range md.ids {
		md.drain(rt, id)
	}
}

// drain checks that nothing can get stuck: the job can be ended by the
// operations any user or worker has (cancel; a claim then a permanent
// failure; the sweep), whatever state it is left in.
func (md *model) drain(rt *rapid.T, id uuid.UUID) {
	for i := 0; i < 20; i++ {
		j, err := md.eng.Get(md.ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if j.Terminal() {
			return
		}
		if _, err := md.eng.Cancel(md.ctx, id, jobstate.Call{Actor: "user"}); err == nil {
			continue
		}
		switch j.Kind {
		case jobstate.KindInitial:
			for _, ev := range md.events {
				if _, err := md.eng.Fire(md.ctx, id, ev, jobstate.Call{Actor: "user", Args: 0}); err == nil {
					break
				}
			}
		case jobstate.KindReady:
			if j.NotBefore.After(md.clock.Now()) {
				md.clock.Set(j.NotBefore) // a retry not yet due
			}
			c, err := md.eng.ClaimJob(md.ctx, id, jobstate.ClaimRequest{Worker: "drain"})
			if errors.Is(err, jobstate.ErrNotClaimable) {
				// Past a deadline it can expire at: the sweep ends it.
				if _, err := md.eng.Sweep(md.ctx); err != nil {
					rt.Fatal(err)
				}
				continue
			}
			if err != nil {
				rt.Fatalf("job %s in ready state %q cannot be claimed: %v", id, j.State, err)
			}
			if _, err := md.eng.Fail(md.ctx, c.Lease, jobstate.Permanent(errors.New("drain"))); err != nil {
				rt.Fatalf("job %s: a permanent failure was refused: %v", id, err)
			}
		case jobstate.KindWaiting:
			if j.NotBefore.After(md.clock.Now()) {
				md.clock.Set(j.NotBefore)
			}
			if _, err := md.eng.Sweep(md.ctx); err != nil {
				rt.Fatal(err)
			}
		default:
			rt.Fatalf("job %s left in %s state %q after the final sweep", id, j.Kind, j.State)
		}
	}
	rt.Fatalf("job %s could not be ended", id)
}
