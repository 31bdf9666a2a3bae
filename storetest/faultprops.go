package storetest

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
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// RunFaults checks, with rapid, what the engine promises whatever fails
// around it, on the store wrapped in a FaultyStore: random valid machines
// whose guards refuse and whose effects fail at random, driven by random
// operations while the store fails at random points.
//
//   - A refused operation changes nothing (except an *IncompleteError,
//     which says what it kept, and the sweep's push-back of a job it could
//     not write).
//   - Every effect runs at most once for what it belongs to (the commit
//     effect per job, the creation effect per job, a once-only effect per
//     job, a rule effect per recorded move), and an effect that ran is
//     recorded.
//
// Two variants: "Direct", where effects act at once (as on memstore) and
// the store fails only before the engine's function runs; and
// "Transactional", where effects act through OnCommit (as effects writing
// in a SQL store's transaction) and the store also fails after the
// function returned. In the direct variant a rule effect that ran before
// another effect of the same move failed is not undone (see the
// specification); rule effects are checked there for "recorded ⇒ ran",
// and for "ran ⇒ recorded, at most once" on the committing write.
func RunFaults(t *testing.T, newStore NewStore) {
	t.Run("Direct", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { runFaultModel(rt, t, newStore, false) })
	})
	t.Run("Transactional", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { runFaultModel(rt, t, newStore, true) })
	})
}

// firing identifies one move, for counting its rule effect.
type firing struct {
	job     uuid.UUID
	version int64
	event   jobstate.Event
}

// faultModel drives one engine over a FaultyStore.
type faultModel struct {
	ctx    context.Context
	eng    *jobstate.Engine
	inner  jobstate.Store
	clock  *jobstate.ManualClock
	def    *jobstate.Definition
	tx     bool
	events []jobstate.Event

	mu       sync.Mutex
	rng      *rand.Rand
	quiet    bool // no faults: the model's own reads and set-up
	pFault   float64
	pFxFail  float64
	ids      []uuid.UUID
	leases   []jobstate.Lease
	commits  map[uuid.UUID]int
	creates  map[uuid.UUID]int
	onces    map[uuid.UUID]int
	rules    map[firing]int
	injected int
}

func (md *faultModel) chance(p float64) bool {
	md.mu.Lock()
	defer md.mu.Unlock()
	return !md.quiet && md.rng.Float64() < p
}

// count records that an effect ran, at once or when its write is applied.
func (md *faultModel) count(ctx context.Context, bump func()) {
	act := func() {
		md.mu.Lock()
		bump()
		md.mu.Unlock()
	}
	if md.tx {
		OnCommit(ctx, act)
		return
	}
	act()
}

var errEffect = errors.New("effect failed (injected)")

// effect returns an effect that fails at random, or counts itself.
func (md *faultModel) effect(bump func(ctx context.Context, j jobstate.Job)) jobstate.EffectFunc {
	return func(ctx context.Context, j jobstate.Job) error {
		if md.chance(md.pFxFail) {
			return errEffect
		}
		md.count(ctx, func() { bump(ctx, j) })
		return nil
	}
}

func runFaultModel(rt *rapid.T, t *testing.T, newStore NewStore, tx bool) {
	spec, events := genMachine(rt)
	md := &faultModel{
		ctx: context.Background(), inner: newStore(t), clock: jobstate.NewManualClock(Epoch), tx: tx, events: events,
		rng:     rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1)),
		pFault:  rapid.SampledFrom([]float64{0, 0.05, 0.15}).Draw(rt, "pFault"),
		pFxFail: rapid.SampledFrom([]float64{0.1, 0.3, 0.5}).Draw(rt, "pEffectFails"),
		commits: map[uuid.UUID]int{}, creates: map[uuid.UUID]int{}, onces: map[uuid.UUID]int{}, rules: map[firing]int{},
	}
	ruleFx := md.effect(func(ctx context.Context, j jobstate.Job) {
		f, ok := jobstate.FiringOf(ctx)
		if !ok {
			panic("rule effect without its firing")
		}
		md.rules[firing{f.Transition.JobID, f.Transition.Version, f.Transition.Event}]++
	})
	for i := range spec.Rules {
		spec.Rules[i].Effect = ruleFx
	}
	spec.Create.Effect = md.effect(func(_ context.Context, j jobstate.Job) { md.creates[j.ID]++ })
	spec.Effects = append(spec.Effects, jobstate.EffectSpec{Name: "notify", Run: md.effect(func(_ context.Context, j jobstate.Job) { md.onces[j.ID]++ })})
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		rt.Fatalf("generated machine is invalid: %v", err)
	}
	md.def = def
	store := Faulty(md.inner, func(p FaultPoint) bool {
		if p == FaultAfterFunc && !md.tx {
			return false
		}
		if md.chance(md.pFault) {
			md.mu.Lock()
			md.injected++
			md.mu.Unlock()
			return true
		}
		return false
	})
	md.eng, err = jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(md.clock), jobstate.WithRandom(func() float64 { return 0 }))
	if err != nil {
		rt.Fatal(err)
	}
	commitFx := md.effect(func(_ context.Context, j jobstate.Job) { md.commits[j.ID]++ })
	// The actions never skip (see model.create): without a lease or a job
	// they act on one that does not exist, a bad argument.
	lease := func(rt *rapid.T) jobstate.Lease {
		if len(md.leases) == 0 {
			return jobstate.Lease{JobID: uuid.New(), ExecID: uuid.New(), Token: 1, Owner: "nobody", TTL: time.Second}
		}
		return rapid.SampledFrom(md.leases).Draw(rt, "lease")
	}
	job := func(rt *rapid.T) uuid.UUID {
		if len(md.ids) == 0 {
			return uuid.New()
		}
		return rapid.SampledFrom(md.ids).Draw(rt, "job")
	}
	rt.Repeat(map[string]func(*rapid.T){
		"create": func(rt *rapid.T) {
			if len(md.ids) >= 5 {
				md.clock.Advance(time.Second) // enough jobs
				return
			}
			nj := jobstate.NewJob{Machine: "gen"}
			if rapid.Bool().Draw(rt, "ttl") {
				nj.TTL = time.Duration(rapid.IntRange(1, 30).Draw(rt, "ttlSeconds")) * time.Second
			}
			md.op(rt, "create", true, func() error {
				c, err := md.eng.Create(md.ctx, nj)
				if err == nil {
					md.ids = append(md.ids, c.Job.ID)
				}
				return err
			})
		},
		"fire": func(rt *rapid.T) {
			id, ev, arg := job(rt), rapid.SampledFrom(md.events).Draw(rt, "event"), rapid.IntRange(0, 3).Draw(rt, "arg")
			md.op(rt, "fire "+string(ev), true, func() error {
				_, err := md.eng.Fire(md.ctx, id, ev, jobstate.Call{Actor: "user", Args: arg})
				return err
			})
		},
		"apply": func(rt *rapid.T) {
			id := job(rt)
			md.op(rt, "apply", true, func() error {
				_, err := md.eng.Apply(md.ctx, id, "notify", jobstate.Call{Actor: "user"})
				return err
			})
		},
		"claim": func(rt *rapid.T) {
			md.op(rt, "claim", true, func() error {
				c, err := md.eng.Claim(md.ctx, jobstate.ClaimRequest{Machine: "gen", Worker: "w1"})
				if err == nil {
					md.leases = append(md.leases, c.Lease)
				}
				return err
			})
		},
		"work": func(rt *rapid.T) {
			// A worker's whole turn: claim, then commit, succeed or fail at
			// once, so that the commit paths are reached often.
			end := rapid.SampledFrom([]string{"succeed", "succeed", "commit", "fail"}).Draw(rt, "end")
			md.op(rt, "work: claim", true, func() error {
				c, err := md.eng.Claim(md.ctx, jobstate.ClaimRequest{Machine: "gen", Worker: "w1"})
				if err == nil {
					md.leases = append(md.leases, c.Lease)
				}
				return err
			})
			if len(md.leases) == 0 {
				return
			}
			l := md.leases[len(md.leases)-1]
			md.op(rt, "work: "+end, true, func() error {
				var err error
				switch end {
				case "succeed":
					_, err = md.eng.Succeed(md.ctx, l, jobstate.CommitInput{Effect: commitFx})
				case "commit":
					_, err = md.eng.Commit(md.ctx, l, jobstate.CommitInput{Effect: commitFx})
				case "fail":
					_, err = md.eng.Fail(md.ctx, l, errors.New("transient"))
				}
				return err
			})
		},
		"claimJob": func(rt *rapid.T) {
			id := job(rt)
			md.op(rt, "claimJob", true, func() error {
				c, err := md.eng.ClaimJob(md.ctx, id, jobstate.ClaimRequest{Worker: "w2"})
				if err == nil {
					md.leases = append(md.leases, c.Lease)
				}
				return err
			})
		},
		"commit": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "commit", true, func() error {
				_, err := md.eng.Commit(md.ctx, l, jobstate.CommitInput{Effect: commitFx})
				return err
			})
		},
		"succeed": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "succeed", true, func() error {
				_, err := md.eng.Succeed(md.ctx, l, jobstate.CommitInput{Effect: commitFx})
				return err
			})
		},
		"finish": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "finish", true, func() error { _, err := md.eng.Finish(md.ctx, l); return err })
		},
		"fail": func(rt *rapid.T) {
			l, permanent := lease(rt), rapid.Bool().Draw(rt, "permanent")
			md.op(rt, "fail", true, func() error {
				cause := errors.New("transient")
				if permanent {
					cause = jobstate.Permanent(cause)
				}
				_, err := md.eng.Fail(md.ctx, l, cause)
				return err
			})
		},
		"snooze": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "snooze", true, func() error { _, err := md.eng.Snooze(md.ctx, l, time.Second); return err })
		},
		"advance": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "advance", true, func() error { _, err := md.eng.Advance(md.ctx, l, "step", jobstate.Call{}); return err })
		},
		"heartbeat": func(rt *rapid.T) {
			l := lease(rt)
			md.op(rt, "heartbeat", true, func() error { _, err := md.eng.Heartbeat(md.ctx, l); return err })
		},
		"sweep": func(rt *rapid.T) {
			md.op(rt, "sweep", false, func() error { _, err := md.eng.Sweep(md.ctx); return err })
		},
		"recover": func(rt *rapid.T) {
			md.op(rt, "recover", false, func() error { _, err := md.eng.RecoverWorker(md.ctx, "w1"); return err })
		},
		"tick": func(rt *rapid.T) {
			md.clock.Advance(time.Duration(rapid.IntRange(1, 15).Draw(rt, "seconds")) * time.Second)
		},
		"": md.check,
	})
	// Without faults, a sweep far in the future ends every lease.
	md.quiet = true
	md.clock.Advance(24 * time.Hour)
	if _, err := md.eng.Sweep(md.ctx); err != nil {
		rt.Fatalf("final sweep: %v", err)
	}
	md.check(rt)
}

// op runs one operation. When refusals must change nothing (all but the
// sweep's), a failed operation is checked to have left every job as it
// was, unless it reports an incomplete write.
func (md *faultModel) op(rt *rapid.T, name string, atomic bool, run func() error) {
	md.quiet = true
	for _, id := range md.ids {
		// Apply any lazy expiry first, without faults: it is a write of its
		// own that precedes an operation.
		if _, err := md.eng.Get(md.ctx, id); err != nil {
			rt.Fatal(err)
		}
	}
	before := md.loadAll(rt)
	md.quiet = false
	err := run()
	md.quiet = true
	if err == nil || errors.Is(err, jobstate.ErrIncomplete) || !atomic {
		return
	}
	if after := md.loadAll(rt); !reflect.DeepEqual(before, after) {
		rt.Fatalf("%s failed with %v but changed stored state", name, err)
	}
}

func (md *faultModel) loadAll(rt *rapid.T) map[uuid.UUID]state {
	out := make(map[uuid.UUID]state, len(md.ids))
	for _, id := range md.ids {
		out[id] = md.load(rt, id)
	}
	return out
}

func (md *faultModel) load(rt *rapid.T, id uuid.UUID) state {
	var s state
	var err error
	if s.Job, err = md.inner.Get(md.ctx, id); err != nil {
		rt.Fatal(err)
	}
	if s.Execs, err = md.inner.Executions(md.ctx, id); err != nil {
		rt.Fatal(err)
	}
	if s.History, err = md.inner.History(md.ctx, id); err != nil {
		rt.Fatal(err)
	}
	if s.Effects, err = md.inner.Effects(md.ctx, id); err != nil {
		rt.Fatal(err)
	}
	return s
}

// check verifies that every effect ran at most once and was recorded.
func (md *faultModel) check(rt *rapid.T) {
	md.mu.Lock()
	defer md.mu.Unlock()
	known := make(map[uuid.UUID]bool, len(md.ids))
	recorded := make(map[firing]bool)
	for _, id := range md.ids {
		known[id] = true
		s := md.load(rt, id)
		if n := md.creates[id]; n != 1 {
			rt.Fatalf("job %s: creation effect ran %d times", id, n)
		}
		if n, c := md.commits[id], s.Job.Committed != uuid.Nil; n > 1 || (n == 1) != c {
			rt.Fatalf("job %s: commit effect ran %d times, committed %v", id, n, c)
		}
		notify := 0
		for _, e := range s.Effects {
			if e.Name == "notify" {
				notify++
			}
		}
		if n := md.onces[id]; n != notify || n > 1 {
			rt.Fatalf("job %s: once-only effect ran %d times, recorded %d", id, n, notify)
		}
		for _, tr := range s.History[1:] {
			f := firing{id, tr.Version, tr.Event}
			recorded[f] = true
			if n := md.rules[f]; n < 1 || (md.tx && n != 1) {
				rt.Fatalf("job %s: the effect of recorded move %s (version %d) ran %d times", id, tr.Event, tr.Version, n)
			}
		}
		if _, err := md.def.Replay(s.History); err != nil {
			rt.Fatal(err)
		}
	}
	for id := range md.creates {
		if !known[id] {
			rt.Fatalf("the creation effect ran for job %s, which was not created", id)
		}
	}
	for f, n := range md.rules {
		if !recorded[f] && (md.tx || f.event == jobstate.EventSucceed) {
			rt.Fatalf("job %s: the effect of move %s (version %d) ran %d times but the move is not recorded", f.job, f.event, f.version, n)
		}
		if f.event == jobstate.EventSucceed && n > 1 {
			rt.Fatalf("job %s: the succeed effect ran %d times", f.job, n)
		}
	}
}

// String describes the model, for failure messages.
func (md *faultModel) String() string {
	return fmt.Sprintf("faults: tx=%v pFault=%.2f pEffect=%.2f injected=%d", md.tx, md.pFault, md.pFxFail, md.injected)
}
