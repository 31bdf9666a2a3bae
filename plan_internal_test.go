package jobstate

import (
	"context"

	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
)

// planSpec has two ready states whose claims a plan covers (to different
// active states, one of them expiring), a ready state whose claim has a
// guard and one whose claim has an effect (neither covered), and deadlines.
func planSpec() Spec {
	guard := func(context.Context, GuardInput) error { return nil }
	effect := func(context.Context, Job) error { return nil }
	return Spec{
		Name:    "p",
		Initial: "a",
		States: []StateSpec{
			{Name: "a", Kind: KindReady}, {Name: "b", Kind: KindReady},
			{Name: "g", Kind: KindReady}, {Name: "f", Kind: KindReady},
			{Name: "ra", Kind: KindActive}, {Name: "rb", Kind: KindActive},
			{Name: "done", Kind: KindTerminal, Outcome: OutcomeSucceeded},
			{Name: "failed", Kind: KindTerminal, Outcome: OutcomeFailed},
			{Name: "gone", Kind: KindTerminal, Outcome: OutcomeExpired},
		},
		Rules: []Rule{
			{From: []State{"a"}, Event: EventClaim, To: "ra"},
			{From: []State{"b"}, Event: EventClaim, To: "rb"},
			{From: []State{"g"}, Event: EventClaim, To: "ra", Guard: guard},
			{From: []State{"f"}, Event: EventClaim, To: "rb", Effect: effect},
			{From: []State{"ra", "rb"}, Event: EventSucceed, To: "done"},
			{From: []State{"ra", "rb"}, Event: EventFail, To: "failed"},
			{From: []State{"a"}, Event: "shift", To: "b"},
			{From: []State{"b"}, Event: "shift", To: "g"},
			{From: []State{"g"}, Event: "shift", To: "f"},
			{From: []State{"a", "rb"}, Event: EventExpire, To: "gone"},
		},
		Policy: Policy{LeaseTTL: time.Minute, MaxExecutions: 2},
	}
}

// The claim moves of a machine are those without guard or effect, each to
// a state of its own.
func TestClaimMoves(t *testing.T) {
	def, err := NewDefinition(planSpec())
	if err != nil {
		t.Fatal(err)
	}
	want := []ClaimMove{{From: "a", To: "ra"}, {From: "b", To: "rb"}}
	if !reflect.DeepEqual(def.moves, want) {
		t.Fatalf("moves %+v, want %+v", def.moves, want)
	}
	if !reflect.DeepEqual(def.expiringStates, []State{"a", "rb"}) {
		t.Fatalf("expiring %v", def.expiringStates)
	}
}

// FuzzClaimPlan: for every job a plan covers, the plan's write is the
// engine's claim of it; a job it does not cover is one the engine's
// claim refuses, or one in a state the plan leaves to the function.
func FuzzClaimPlan(f *testing.F) {
	f.Add(uint8(0), int64(5), int64(2), int64(0), int64(-1), int64(0), uint8(0), false, uint8(0))
	f.Add(uint8(1), int64(9), int64(0), int64(3), int64(30), int64(-7), uint8(2), true, uint8(1))
	f.Add(uint8(0), int64(1), int64(1), int64(0), int64(0), int64(100), uint8(1), false, uint8(3))
	def, err := NewDefinition(planSpec())
	if err != nil {
		f.Fatal(err)
	}
	start := time.Date(2026, 11, 28, 1, 2, 3, 456789123, time.UTC)
	f.Fuzz(func(t *testing.T, state uint8, version, attempt, sweeps, deadlineSec, startedSec int64, past uint8, cancel bool, leases uint8) {
		now := start
		states := []State{"a", "b", "g", "f"}
		job := Job{
			ID: uuid.New(), Machine: "p", State: states[int(state)%len(states)], Kind: KindReady,
			Version: 1 + abs(version)%1000, Attempt: int(abs(attempt) % 50),
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Minute), CancelRequested: cancel,
			SweepFailures: int(abs(sweeps) % 5),
		}
		if sweeps%2 == 1 {
			job.SweepRetryAt = now.Add(time.Second)
		}
		if deadlineSec != 0 {
			job.Deadline = now.Add(time.Duration(deadlineSec%7200) * time.Second)
		}
		if startedSec != 0 {
			job.StartedAt = now.Add(-time.Duration(abs(startedSec)%7200+1) * time.Second)
		}
		var execs []Execution
		for i := 0; i < int(past%4); i++ {
			execs = append(execs, Execution{ID: uuid.New(), JobID: job.ID, Attempt: i + 1, Status: ExecAborted, FinishedAt: now.Add(-time.Second)})
		}
		if leases%4 == 3 && len(execs) > 0 {
			execs[len(execs)-1].Status, execs[len(execs)-1].LeaseExpiresAt = ExecLeased, now.Add(time.Second)
			job.Leases = 1
		}
		cur := Snapshot{Job: job, Executions: execs}
		id := uuid.New()
		e := &Engine{newID: func() (uuid.UUID, error) { return id, nil }}
		ttl := 90 * time.Second
		cp := ClaimPlan{Moves: def.moves, Expiring: def.expiringStates, Worker: "w", Now: now, LeaseExpiresAt: after(now, ttl)}

		var p plan
		want, _, err := e.claim(context.Background(), def, &cur, ClaimRequest{Worker: "w"}, ttl, now, &p)
		m, covered := cp.Covers(&cur.Job)
		if !covered {
			if err == nil && (job.State == "a" || job.State == "b") && job.Leases == 0 {
				t.Fatalf("the engine claims %+v, which the plan does not cover", job)
			}
			return
		}
		if err != nil {
			t.Fatalf("the plan covers %+v, which the engine refuses: %v", job, err)
		}
		want.MaxPerKey = 0
		got := cp.Apply(cur, m, id)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plan wrote\n%+v\nthe engine\n%+v", got, want)
		}
	})
}

func abs(n int64) int64 {
	if n < 0 {
		if n == -n {
			return 0
		}
		return -n
	}
	return n
}

// FuzzCommitPlan: for every job a commit plan covers, the plan's write is
// the engine's Succeed of it; a job it does not cover is one Succeed
// refuses, or one whose commit the plan leaves to the function (a rival
// execution still live).
func FuzzCommitPlan(f *testing.F) {
	f.Add(uint8(0), uint8(0), true, int64(30), false, false, false, []byte("r"), uint8(0))
	f.Add(uint8(1), uint8(1), true, int64(-3), false, true, true, []byte(nil), uint8(1))
	f.Add(uint8(0), uint8(2), false, int64(5), true, false, false, []byte("x"), uint8(2))
	start := time.Date(2026, 11, 28, 2, 10, 0, 987654321, time.UTC)
	f.Fuzz(func(t *testing.T, state, status uint8, tokenOK bool, leaseSec int64, rival, started, requireStart bool, result []byte, sweeps uint8) {
		spec := planSpec()
		spec.Policy.RequireStart = requireStart
		def, err := NewDefinition(spec)
		if err != nil {
			t.Fatal(err)
		}
		now := start
		states := []State{"ra", "rb", "a"}
		statuses := []ExecStatus{ExecLeased, ExecInProgress, ExecCommitted, ExecDone, ExecAborted}
		job := Job{
			ID: uuid.New(), Machine: "p", State: states[int(state)%len(states)], Version: 4, Attempt: 2,
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Minute), StartedAt: now.Add(-time.Minute),
			LastError: "earlier", ErrorClass: ClassRetryable, SweepFailures: int(sweeps % 3),
		}
		job.Kind = def.states[def.stateIndex(job.State)].spec.Kind
		x := Execution{ID: uuid.New(), JobID: job.ID, Attempt: 2, Owner: "w", Status: statuses[int(status)%len(statuses)],
			LeaseExpiresAt: now.Add(time.Duration(leaseSec%600) * time.Second), HeartbeatAt: now.Add(-time.Second), ClaimedAt: now.Add(-time.Minute)}
		if started {
			x.StartedAt = now.Add(-30 * time.Second)
		}
		execs := []Execution{{ID: uuid.New(), JobID: job.ID, Attempt: 1, Status: ExecAborted, FinishedAt: now.Add(-time.Hour)}, x}
		if rival {
			execs = append(execs, Execution{ID: uuid.New(), JobID: job.ID, Attempt: 3, Owner: "v", Status: ExecLeased,
				LeaseExpiresAt: now.Add(time.Minute), HeartbeatAt: now, ClaimedAt: now})
		}
		def.settle(&job, execs, nil)
		token := 2
		if !tokenOK {
			token = 3
		}
		lease := Lease{JobID: job.ID, ExecID: x.ID, Token: token, Owner: "w", ExpiresAt: x.LeaseExpiresAt}
		cur := Snapshot{Job: job, Executions: execs}

		// The engine's Succeed, as its function decides.
		var p plan
		want, err := func() (Write, error) {
			c := Snapshot{Job: cur.Job, Executions: cur.Executions}
			y, err := checkCommit(def, &c, lease, now)
			if err != nil {
				return Write{}, err
			}
			c.Job.Result = result
			return finish(context.Background(), def, &c, y, lease.Owner, "", now, &p)
		}()

		cp := CommitPlan{ExecID: lease.ExecID, Token: lease.Token, Actor: lease.Owner, Now: now, Result: result,
			Moves: def.finishMoves()}
		m, px, covered := cp.Covers(&cur)
		if !covered {
			if err == nil && !rival {
				t.Fatalf("Succeed commits %+v %+v, which the plan does not cover", job, x)
			}
			return
		}
		if err != nil {
			t.Fatalf("the plan covers %+v %+v, which Succeed refuses: %v", job, x, err)
		}
		got := cp.Apply(cur, m, *px)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plan wrote\n%+v\nSucceed\n%+v", got, want)
		}
	})
}
