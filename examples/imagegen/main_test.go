package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/doccheck"
)

// update rewrites the diagram in docs/examples/imagegen.md.
var update = flag.Bool("update", false, "rewrite the mermaid block of docs/examples/imagegen.md")

// epoch is the tests' start time: five seconds into a minute, so that a
// duplicate click ten seconds later is in the same minute.
var epoch = time.Date(2026, 3, 2, 9, 0, 5, 0, time.UTC)

// harness is a fresh service for one test, with helpers that drive jobs.
type harness struct {
	t   *testing.T
	ctx context.Context
	*App
}

// newHarness returns a service whose users alice, bob and carol have 100
// credits, and poor has fewer than one image costs.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, map[string]int{"alice": 100, "bob": 100, "carol": 100, "poor": CreditsPerImage - 1})
}

// newHarnessWith returns a service whose users have the given credits.
func newHarnessWith(t *testing.T, balances map[string]int) *harness {
	t.Helper()
	app, err := NewApp(epoch, balances)
	require.NoError(t, err)
	return &harness{t: t, ctx: context.Background(), App: app}
}

// request is a valid request by user for prompt.
func request(user, prompt string) Request {
	return Request{UserID: user, Prompt: prompt, Params: Params{Size: "512x512", Style: "photo"}}
}

// create makes a new job and fails the test if none was created.
func (h *harness) create(r Request) jobstate.Job {
	h.t.Helper()
	c, err := h.CreateJob(h.ctx, r)
	require.NoError(h.t, err)
	require.False(h.t, c.Existing, "a new job")
	return c.Job
}

// claim takes the next due job as worker w.
func (h *harness) claim(w string) jobstate.Claimed {
	h.t.Helper()
	c, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: w})
	require.NoError(h.t, err)
	return c
}

// get reads a job from the store.
func (h *harness) get(id uuid.UUID) jobstate.Job {
	h.t.Helper()
	j, err := h.Store.Get(h.ctx, id)
	require.NoError(h.t, err)
	return j
}

// history reads a job's history and checks that it replays to its state.
func (h *harness) history(id uuid.UUID) []jobstate.Transition {
	h.t.Helper()
	hist, err := h.Eng.History(h.ctx, id)
	require.NoError(h.t, err)
	st, err := h.Def.Replay(hist)
	require.NoError(h.t, err, "the history replays on the table")
	assert.Equal(h.t, h.get(id).State, st)
	return hist
}

// sweep runs the engine's sweep.
func (h *harness) sweep() jobstate.SweepReport {
	h.t.Helper()
	r, err := h.Eng.Sweep(h.ctx)
	require.NoError(h.t, err)
	return r
}

// stored is everything the store holds about a job.
type stored struct {
	Job     jobstate.Job
	History []jobstate.Transition
	Execs   []jobstate.Execution
	Effects []jobstate.EffectRecord
}

// snapshot loads everything stored about a job, to show that a refusal
// changed nothing.
func (h *harness) snapshot(id uuid.UUID) stored {
	h.t.Helper()
	var s stored
	var err error
	s.Job, err = h.Store.Get(h.ctx, id)
	require.NoError(h.t, err)
	s.History, err = h.Store.History(h.ctx, id)
	require.NoError(h.t, err)
	s.Execs, err = h.Store.Executions(h.ctx, id)
	require.NoError(h.t, err)
	s.Effects, err = h.Store.Effects(h.ctx, id)
	require.NoError(h.t, err)
	return s
}

// path lists the states a history went through.
func path(hist []jobstate.Transition) []jobstate.State {
	out := []jobstate.State{}
	for _, t := range hist {
		out = append(out, t.To)
	}
	return out
}

// reach creates a job for a fresh prompt and drives it into state s
// through the service's own worker code.
func (h *harness) reach(s jobstate.State) jobstate.Job {
	h.t.Helper()
	r := request("alice", fmt.Sprintf("a study in %s", s))
	switch s {
	case Completed:
		h.API.Script(r.Prompt, nil)
	case Rejected:
		h.API.Script(r.Prompt, ErrSafetyBlock)
	default:
		h.API.Script(r.Prompt, ErrAPI500)
	}
	j := h.create(r)
	switch s {
	case Queued:
		return j
	case Running:
		return h.claim("w").Job
	case Failed, Completed, Rejected:
		got, err := h.Work(h.ctx, "w")
		require.NoError(h.t, err)
		require.Equal(h.t, s, got.State)
		return got
	case DeadLetter:
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(h.t, err)
			if got.Terminal() {
				require.Equal(h.t, DeadLetter, got.State)
				return got
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
	}
	h.t.Fatalf("no way to reach %q", s)
	return jobstate.Job{}
}

// TestStates replays section 1 of the seed, row by row: each state's kind
// and outcome, and its "Next Allowed States" exactly as the table's rules.
func TestStates(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	rows := []struct {
		name    string
		state   jobstate.State
		kind    jobstate.Kind
		outcome jobstate.Outcome
		next    []jobstate.State
	}{
		{"queued: job created, validated, and awaiting worker; next running, rejected", Queued, jobstate.KindReady, "", []jobstate.State{Rejected, Running}},
		// The seed's table lists completed and failed; its transition E
		// adds rejected.
		{"running: worker has picked up the job, API called; next completed, failed, and rejected (transition E)", Running, jobstate.KindActive, "", []jobstate.State{Completed, Failed, Rejected}},
		{"completed: generation successful, asset URL stored; final state", Completed, jobstate.KindTerminal, jobstate.OutcomeSucceeded, nil},
		{"failed: generation failed (API error); next queued (retry), dead_letter", Failed, jobstate.KindWaiting, "", []jobstate.State{DeadLetter, Queued}},
		{"rejected: blocked by moderation or safety during exec; final state", Rejected, jobstate.KindTerminal, jobstate.OutcomeRejected, nil},
		{"dead_letter: max retries exceeded, manual review; final state", DeadLetter, jobstate.KindTerminal, jobstate.OutcomeDeadLettered, nil},
	}
	require.Len(t, def.States(), len(rows), "the seed's six states, no more")
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			spec, ok := def.State(row.state)
			require.True(t, ok)
			assert.Equal(t, row.kind, spec.Kind)
			assert.Equal(t, row.outcome, spec.Outcome)
			assert.Equal(t, row.next, nextStates(def, row.state))
			h := newHarness(t)
			j := h.reach(row.state)
			assert.Equal(t, row.state, h.get(j.ID).State, "reachable through the service")
			h.history(j.ID)
		})
	}
	t.Run("queued is the initial state", func(t *testing.T) {
		assert.Equal(t, Queued, def.Initial())
	})
}

// nextStates returns the states the table's rules lead to from s, sorted.
func nextStates(def *jobstate.Definition, s jobstate.State) []jobstate.State {
	set := map[jobstate.State]bool{}
	for _, r := range def.Rules() {
		for _, f := range r.From {
			if f == s {
				set[r.To] = true
			}
		}
	}
	var out []jobstate.State
	for to := range set {
		out = append(out, to)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestCreation replays transition A (null → queued): the trigger, the three
// guards and the action.
func TestCreation(t *testing.T) {
	t.Run("Trigger: user calls createJob", func(t *testing.T) {
		h := newHarness(t)
		c, err := h.CreateJob(h.ctx, request("alice", "a fox"))
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.Equal(t, Queued, c.Job.State)
		assert.Equal(t, "alice", c.Job.Owner)
		hist := h.history(c.Job.ID)
		require.Len(t, hist, 1)
		assert.Equal(t, jobstate.Transition{JobID: c.Job.ID, Version: 1, Event: jobstate.EventCreate, To: Queued, Actor: "alice", At: epoch}, hist[0])
	})

	// refused checks that creating r is refused by the guard with cause,
	// leaving no job and no credits taken.
	refused := func(t *testing.T, h *harness, r Request, cause error) {
		t.Helper()
		before := h.DB.Balance(r.UserID)
		_, err := h.CreateJob(h.ctx, r)
		require.ErrorIs(t, err, jobstate.ErrGuardRefused)
		require.ErrorIs(t, err, cause)
		var te *jobstate.TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, jobstate.EventCreate, te.Event)
		assert.Zero(t, h.Store.Len(), "nothing created")
		assert.Equal(t, before, h.DB.Balance(r.UserID), "no credits taken")
		assert.Empty(t, h.DB.Reservations())
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
	}
	t.Run("Guard: PromptGuard.validate() == True", func(t *testing.T) {
		bad := []struct {
			name string
			req  Request
		}{
			{"empty prompt", request("alice", "")},
			{"blank prompt", request("alice", " \t\n ")},
			{"prompt too long", request("alice", strings.Repeat("é", MaxPromptRunes+1))},
			{"unsupported size", Request{UserID: "alice", Prompt: "a fox", Params: Params{Size: "640x480"}}},
		}
		for _, b := range bad {
			t.Run(b.name, func(t *testing.T) { refused(t, newHarness(t), b.req, ErrInvalidPrompt) })
		}
		t.Run("longest prompt allowed", func(t *testing.T) {
			h := newHarness(t)
			h.create(request("alice", strings.Repeat("é", MaxPromptRunes)))
		})
	})
	t.Run("Guard: Quota.check() == True", func(t *testing.T) {
		h := newHarness(t)
		refused(t, h, request("poor", "a fox"), ErrQuotaExceeded)
		refused(t, h, request("nobody", "a fox"), ErrQuotaExceeded)
	})
	t.Run("Guard: Idempotency.check(promptHash) == True", func(t *testing.T) {
		// A request whose key is held gets the holder back, and neither the
		// guard nor the action runs: alice's duplicate is answered although
		// the first request spent her last credits.
		h := newHarnessWith(t, map[string]int{"alice": CreditsPerImage})
		r := request("alice", "a fox")
		first := h.create(r)
		require.Zero(t, h.DB.Balance("alice"))
		again, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err, "not refused by the quota: the guard did not run")
		assert.True(t, again.Existing)
		assert.Equal(t, first.ID, again.Job.ID)
		assert.Equal(t, 1, h.Store.Len())
	})
	t.Run("Action: Deduct Credits (Reserved)", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
		assert.Equal(t, []Reservation{{JobID: j.ID, User: "alice", Credits: CreditsPerImage, At: epoch}}, h.DB.Reservations())
	})
	t.Run("Action: credits reserved exactly once under concurrent duplicate creates", func(t *testing.T) {
		h := newHarness(t)
		const clicks = 64
		var wg sync.WaitGroup
		ids := make([]uuid.UUID, clicks)
		fresh := make([]bool, clicks)
		for i := 0; i < clicks; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, err := h.CreateJob(h.ctx, request("alice", "a fox"))
				if err != nil {
					t.Error(err)
					return
				}
				ids[i], fresh[i] = c.Job.ID, !c.Existing
			}(i)
		}
		wg.Wait()
		created := 0
		for i := range ids {
			assert.Equal(t, ids[0], ids[i], "every click gets the same job")
			if fresh[i] {
				created++
			}
		}
		assert.Equal(t, 1, created, "one click created it; the others found it")
		assert.Equal(t, 1, h.Store.Len())
		assert.Len(t, h.DB.Reservations(), 1)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
	})
	t.Run("Action: different requests racing past the quota cannot overdraw it", func(t *testing.T) {
		// poor2 can pay for one image; ten different prompts race. The
		// guard may let several through; the reservation, checked as it
		// deducts, lets one.
		h := newHarnessWith(t, map[string]int{"poor2": CreditsPerImage})
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := h.CreateJob(h.ctx, request("poor2", fmt.Sprintf("prompt %d", i)))
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !errors.Is(err, ErrQuotaExceeded) {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		assert.Equal(t, 1, ok)
		assert.Equal(t, 1, h.Store.Len(), "a refused reservation leaves no job")
		assert.Zero(t, h.DB.Balance("poor2"))
		assert.Len(t, h.DB.Reservations(), 1)
	})
}

// TestExecution replays transition B (queued → running).
func TestExecution(t *testing.T) {
	t.Run("Trigger: async worker pickup", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		h.Clock.Advance(time.Second)
		c := h.claim("worker-1")
		assert.Equal(t, j.ID, c.Job.ID)
		assert.Equal(t, Running, c.Job.State)
		assert.Equal(t, 1, c.Lease.Token)
		hist := h.history(j.ID)
		assert.Equal(t, []jobstate.State{Queued, Running}, path(hist))
		assert.Equal(t, "worker-1", hist[1].Actor)
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "worker-2"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "a running job is no one else's")
	})
	t.Run("Action: update timestamp startedAt", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		assert.True(t, j.StartedAt.IsZero())
		h.Clock.Advance(time.Second)
		c := h.claim("worker-1")
		assert.True(t, c.Job.StartedAt.Equal(epoch.Add(time.Second)), "the job's startedAt")
		h.API.Script("a fox", nil)
		_, err := h.Run(h.ctx, c)
		require.NoError(t, err)
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		require.Len(t, execs, 1)
		assert.True(t, execs[0].StartedAt.Equal(epoch.Add(time.Second)), "the execution's startedAt, set as the worker starts")
	})
	t.Run("Action: send heartbeat", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		c := h.claim("worker-1")
		assert.True(t, c.Lease.ExpiresAt.Equal(epoch.Add(LeaseTTL)))
		h.Clock.Advance(LeaseTTL - time.Second)
		l, err := h.Eng.Heartbeat(h.ctx, c.Lease)
		require.NoError(t, err)
		assert.True(t, l.ExpiresAt.Equal(h.Clock.Now().Add(LeaseTTL)), "the lease runs on")
		h.Clock.Advance(2 * time.Second) // past the first expiry
		h.sweep()
		assert.Equal(t, Running, h.get(j.ID).State, "a heartbeating worker keeps the job")
	})
	t.Run("a worker that stops heartbeating loses the job to a retry", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		c := h.claim("worker-1")
		h.Clock.Advance(LeaseTTL)
		h.sweep()
		got := h.get(j.ID)
		assert.Equal(t, Failed, got.State)
		assert.Equal(t, 1, got.RetryCount)
		assert.Equal(t, "lease expired", got.LastError)
		_, err := h.Report(h.ctx, c.Lease, Image{URL: "late"}, nil)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		assert.Empty(t, h.DB.Assets())
	})
}

// TestSuccess replays transition C (running → completed) and its three
// actions.
func TestSuccess(t *testing.T) {
	// succeed runs one job whose API call returns an image.
	succeed := func(t *testing.T) (*harness, jobstate.Job) {
		h := newHarness(t)
		h.API.Script("a fox", nil)
		j := h.create(request("alice", "a fox"))
		got, err := h.Work(h.ctx, "worker-1")
		require.NoError(t, err)
		assert.Equal(t, j.ID, got.ID)
		return h, got
	}
	t.Run("Trigger: API returns image URL", func(t *testing.T) {
		h, j := succeed(t)
		assert.Equal(t, Completed, j.State)
		assert.Equal(t, jobstate.OutcomeSucceeded, j.Outcome)
		assert.Equal(t, epoch.Add(3*time.Second), j.CompletedAt, "after the API's 3 s")
		assert.Equal(t, []jobstate.State{Queued, Running, Completed}, path(h.history(j.ID)))
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		assert.Equal(t, jobstate.ExecDone, execs[0].Status)
		assert.Equal(t, execs[0].ID, j.Committed)
	})
	t.Run("Action 1: download image to private buckets (/originals)", func(t *testing.T) {
		h, j := succeed(t)
		obj, ok := h.DB.Object(OriginalPath(j.ID))
		require.True(t, ok)
		assert.True(t, strings.HasPrefix(OriginalPath(j.ID), "/originals/"))
		assert.True(t, bytes.HasPrefix(obj, []byte("\x89PNG")))
	})
	t.Run("Action 2: create asset entry in library", func(t *testing.T) {
		h, j := succeed(t)
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, j.ID, assets[0].JobID)
		assert.Equal(t, "alice", assets[0].Owner)
		assert.Equal(t, OriginalPath(j.ID), assets[0].Path)
		assert.True(t, strings.HasPrefix(assets[0].Source, "https://api.example/"))
		assert.True(t, assets[0].At.Equal(j.CompletedAt))
	})
	t.Run("Action 3: update job resultUrl", func(t *testing.T) {
		h, j := succeed(t)
		assert.Equal(t, ResultURL(j.ID), string(j.Result))
		assert.Equal(t, string(j.Result), h.DB.Assets()[0].URL)
		assert.Empty(t, j.LastError)
	})
	t.Run("the asset is stored once", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("alice", "a fox"))
		stale := h.claim("worker-1") // stalls past its lease
		h.Clock.Advance(LeaseTTL)
		h.sweep()
		h.Clock.Advance(Backoff.Delay(1, 0))
		h.sweep()
		h.API.Script("a fox", nil)
		winner := h.claim("worker-2")
		got, err := h.Run(h.ctx, winner)
		require.NoError(t, err)
		require.Equal(t, Completed, got.State)

		before := h.snapshot(j.ID)
		// The stalled worker comes back with its own image.
		_, err = h.Report(h.ctx, stale.Lease, Image{URL: "https://api.example/late.png"}, nil)
		var ce *jobstate.CommitError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, winner.Lease.ExecID, ce.Winner)
		// The winner's success is delivered twice.
		_, err = h.Report(h.ctx, winner.Lease, Image{URL: "https://api.example/again.png"}, nil)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		assert.Equal(t, before, h.snapshot(j.ID), "refusals change nothing")
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, ResultURL(j.ID), assets[0].URL)
	})
}

// TestFailure replays transition D (running → failed) and its actions.
func TestFailure(t *testing.T) {
	t.Run("Trigger: API timeout / 500 error", func(t *testing.T) {
		for _, cause := range []error{ErrAPITimeout, ErrAPI500} {
			t.Run(cause.Error(), func(t *testing.T) {
				h := newHarness(t)
				h.API.Script("a fox", cause)
				j := h.create(request("alice", "a fox"))
				got, err := h.Work(h.ctx, "w")
				require.NoError(t, err)
				assert.Equal(t, Failed, got.State)
				assert.Equal(t, cause.Error(), got.LastError)
				assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
				hist := h.history(j.ID)
				last := hist[len(hist)-1]
				assert.Equal(t, []any{Running, jobstate.EventRetry, Failed, cause.Error()}, []any{last.From, last.Event, last.To, last.Reason})
			})
		}
	})

	// failUntilDead fails one job every attempt, returning the job after
	// each failure and the time of each failure.
	failUntilDead := func(t *testing.T) (*harness, []jobstate.Job, []time.Time) {
		h := newHarness(t)
		h.API.Script("a fox", ErrAPI500)
		h.create(request("alice", "a fox"))
		var jobs []jobstate.Job
		var at []time.Time
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(t, err)
			jobs, at = append(jobs, got), append(at, h.Clock.Now())
			if got.Terminal() {
				return h, jobs, at
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
	}
	t.Run("Action: increment retryCount", func(t *testing.T) {
		_, jobs, _ := failUntilDead(t)
		var counts []int
		for _, j := range jobs {
			counts = append(counts, j.RetryCount)
		}
		assert.Equal(t, []int{1, 2, 3, 3}, counts, "the last failure is not retried, so not counted")
	})
	t.Run("Action: calculate backoff (exponential)", func(t *testing.T) {
		want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}
		_, jobs, at := failUntilDead(t)
		for i, d := range want {
			t.Run(fmt.Sprintf("retry %d waits %s", i+1, d), func(t *testing.T) {
				assert.Equal(t, d, jobs[i].NotBefore.Sub(at[i]))
				assert.Equal(t, d, Backoff.Delay(i+1, 0))
			})
		}
		t.Run("the schedule doubles up to its one-minute cap", func(t *testing.T) {
			var got []time.Duration
			for n := 1; n <= 7; n++ {
				got = append(got, Backoff.Delay(n, 0))
			}
			assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}, got)
		})
	})
	t.Run("Action: if retryCount < MAX_RETRIES, schedule re-queue", func(t *testing.T) {
		h := newHarness(t)
		h.API.Script("a fox", ErrAPI500, nil)
		j := h.create(request("alice", "a fox"))
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		require.Equal(t, Failed, got.State)
		due := got.NotBefore
		h.Clock.Set(due.Add(-time.Nanosecond))
		h.sweep()
		assert.Equal(t, Failed, h.get(j.ID).State, "not before the backoff has passed")
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
		h.Clock.Set(due)
		assert.Equal(t, 1, h.sweep().Requeued)
		assert.Equal(t, Queued, h.get(j.ID).State)
		got, err = h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, Completed, got.State, "the retry can succeed")
		assert.Equal(t, 2, got.Attempt)
		assert.Equal(t, []jobstate.State{Queued, Running, Failed, Queued, Running, Completed}, path(h.history(j.ID)))
		assert.Len(t, h.DB.Reservations(), 1, "a retry is not charged again")
	})
	t.Run("Action: else, transition to dead_letter", func(t *testing.T) {
		h, jobs, at := failUntilDead(t)
		last := jobs[len(jobs)-1]
		assert.Len(t, jobs, MaxRetries+1, "dead letter after MaxRetries retries")
		assert.Equal(t, DeadLetter, last.State)
		assert.Equal(t, jobstate.OutcomeDeadLettered, last.Outcome)
		assert.Equal(t, MaxRetries+1, last.Attempt)
		assert.Equal(t, MaxRetries, last.RetryCount)
		assert.Equal(t, ErrAPI500.Error(), last.LastError)
		assert.True(t, last.CompletedAt.Equal(at[len(at)-1]))
		hist := h.history(last.ID)
		end := hist[len(hist)-2:]
		assert.Equal(t, []jobstate.State{Running, Failed}, []jobstate.State{end[0].From, end[0].To})
		assert.Equal(t, jobstate.EventFail, end[0].Event)
		assert.Equal(t, []jobstate.State{Failed, DeadLetter}, []jobstate.State{end[1].From, end[1].To})
		assert.Equal(t, jobstate.EventExhaust, end[1].Event)
		assert.Equal(t, end[0].Version+1, end[1].Version, "running → failed → dead_letter in one write")
		assert.True(t, end[0].At.Equal(end[1].At))
		h.Clock.Advance(time.Hour)
		h.sweep()
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "no further attempt")
		assert.Equal(t, MaxRetries+1, h.API.Calls("a fox"))
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"), "one reservation for all attempts")
	})
}

// TestRejection replays transition E (running → rejected) and its actions.
func TestRejection(t *testing.T) {
	// reject runs one job whose API call is blocked by the safety filter.
	reject := func(t *testing.T) (*harness, jobstate.Claimed, jobstate.Job) {
		h := newHarness(t)
		h.API.Script("a gory battle scene", ErrSafetyBlock)
		h.create(request("carol", "a gory battle scene"))
		c := h.claim("worker-1")
		got, err := h.Run(h.ctx, c)
		require.NoError(t, err)
		return h, c, got
	}
	t.Run("Trigger: API safety filter triggers (NSFW detected)", func(t *testing.T) {
		h, c, j := reject(t)
		assert.Equal(t, Rejected, j.State)
		assert.Equal(t, jobstate.OutcomeRejected, j.Outcome)
		assert.Zero(t, j.Leases)
		hist := h.history(j.ID)
		last := hist[len(hist)-1]
		assert.Equal(t, []any{Running, EventReject, Rejected, "worker-1", ErrSafetyBlock.Error(), c.Lease.ExecID},
			[]any{last.From, last.Event, last.To, last.Actor, last.Reason, last.ExecID})
		execs, err := h.Eng.Executions(h.ctx, j.ID)
		require.NoError(t, err)
		assert.Equal(t, jobstate.ExecAborted, execs[0].Status, "the execution ends without a commit")
		assert.Equal(t, uuid.Nil, j.Committed)
		assert.Empty(t, h.DB.Assets(), "nothing stored")
		assert.Empty(t, j.Result)
	})
	t.Run("Action: Refund: NO (policy violation penalty)", func(t *testing.T) {
		h, _, j := reject(t)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("carol"))
		assert.Equal(t, []Reservation{{JobID: j.ID, User: "carol", Credits: CreditsPerImage, At: epoch}}, h.DB.Reservations())
	})
	t.Run("Action: Log: audit log SAFE_BLOCK", func(t *testing.T) {
		h, c, j := reject(t)
		want := []AuditRecord{{Action: AuditSafeBlock, JobID: j.ID, User: "carol", Actor: "worker-1", Reason: ErrSafetyBlock.Error(), At: j.CompletedAt}}
		assert.Equal(t, want, h.DB.Audit(), "who rejected the job and why")
		hist := h.history(j.ID)
		last := hist[len(hist)-1]
		assert.Equal(t, []any{last.Actor, last.Reason, last.At}, []any{want[0].Actor, want[0].Reason, want[0].At}, "as the history records the rejection")
		// The same rejection reported again is refused and logs nothing.
		before := h.snapshot(j.ID)
		_, err := h.Report(h.ctx, c.Lease, Image{}, ErrSafetyBlock)
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
		_, err = h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrTerminal)
		assert.Equal(t, before, h.snapshot(j.ID))
		assert.Equal(t, want, h.DB.Audit(), "exactly one SAFE_BLOCK record")
	})
	t.Run("the audit record is written only for a rejection being made", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("carol", "a gory battle scene"))
		assert.ErrorIs(t, h.DB.AuditSafeBlock(h.ctx, j), ErrNoFiring, "outside a firing there is no rejection to record")
		assert.Empty(t, h.DB.Audit())
	})
	t.Run("queued → rejected (moderation before execution)", func(t *testing.T) {
		h := newHarness(t)
		j := h.create(request("carol", "a gory battle scene"))
		got, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator", Reason: "prompt flagged"})
		require.NoError(t, err)
		assert.Equal(t, Rejected, got.State)
		assert.Equal(t, []AuditRecord{{Action: AuditSafeBlock, JobID: j.ID, User: "carol", Actor: "moderator", Reason: "prompt flagged", At: got.CompletedAt}}, h.DB.Audit())
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("carol"), "no refund")
		assert.Equal(t, []jobstate.State{Queued, Rejected}, path(h.history(j.ID)))
	})
}

// TestIdempotency replays section 3: the key, the logic and the goal.
func TestIdempotency(t *testing.T) {
	t.Run("Key: Hash(userId + prompt + params + timestamp_minute)", func(t *testing.T) {
		r := request("alice", "a fox")
		k := IdempotencyKey(epoch, r)
		assert.Equal(t, k, IdempotencyKey(epoch.Add(54*time.Second), r), "the rest of the minute")
		assert.NotEqual(t, k, IdempotencyKey(epoch.Add(55*time.Second), r), "the next minute")
		assert.NotEqual(t, k, IdempotencyKey(epoch, request("bob", "a fox")), "another user")
		assert.NotEqual(t, k, IdempotencyKey(epoch, request("alice", "a dog")), "another prompt")
		other := r
		other.Params.Size = "1024x1024"
		assert.NotEqual(t, k, IdempotencyKey(epoch, other), "other params")
	})
	t.Run("Logic: same key and not failed: the existing job is returned", func(t *testing.T) {
		for _, s := range []jobstate.State{Queued, Running, Completed, Rejected} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				r, err := decodeRequest(j.Payload)
				require.NoError(t, err)
				balance := h.DB.Balance("alice")
				h.Clock.Set(epoch.Add(54 * time.Second)) // still the first minute
				c, err := h.CreateJob(h.ctx, r)
				require.NoError(t, err)
				assert.True(t, c.Existing)
				assert.Equal(t, j.ID, c.Job.ID)
				assert.Equal(t, s, c.Job.State)
				assert.Equal(t, balance, h.DB.Balance("alice"), "no second deduction")
				assert.Equal(t, 1, h.Store.Len())
			})
		}
	})
	t.Run("Logic: a failed job frees the key", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.NotEqual(t, j.ID, c.Job.ID)
		assert.Equal(t, Queued, c.Job.State)
		assert.Len(t, h.DB.Reservations(), 2, "the new job pays for itself")
		assert.Equal(t, Failed, h.get(j.ID).State, "the failed job is still retried on its own")
		again, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.True(t, again.Existing, "the new job holds the key now")
		assert.Equal(t, c.Job.ID, again.Job.ID)
	})
	t.Run("dead_letter frees the key too (this example's reading)", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(DeadLetter)
		require.True(t, h.Clock.Now().Before(epoch.Add(55*time.Second)), "still the same minute")
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.NotEqual(t, j.ID, c.Job.ID)
	})
	t.Run("a new minute creates a new job", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		h.Clock.Set(epoch.Add(55 * time.Second)) // 09:01:00
		c, err := h.CreateJob(h.ctx, r)
		require.NoError(t, err)
		assert.False(t, c.Existing)
		assert.NotEqual(t, first.ID, c.Job.ID)
		assert.Equal(t, 100-2*CreditsPerImage, h.DB.Balance("alice"))
	})
	t.Run("the same key with a different payload is a conflict", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		before := h.snapshot(first.ID)
		other := request("alice", "a dog")
		_, err := h.Eng.Create(h.ctx, jobstate.NewJob{Machine: Machine, Payload: other.encode(), Owner: "alice", Actor: "alice", Key: IdempotencyKey(h.Clock.Now(), r)})
		require.ErrorIs(t, err, jobstate.ErrKeyConflict)
		var kc *jobstate.KeyConflictError
		require.ErrorAs(t, err, &kc)
		assert.Equal(t, first.ID, kc.Holder)
		assert.Equal(t, 1, h.Store.Len(), "nothing created")
		assert.Len(t, h.DB.Reservations(), 1, "no credits taken")
		assert.Equal(t, before, h.snapshot(first.ID))
	})
	t.Run("Goal: prevent accidental double-deduction on UI network retry", func(t *testing.T) {
		h := newHarness(t)
		r := request("alice", "a fox")
		first := h.create(r)
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := h.CreateJob(h.ctx, r)
				if err != nil || !c.Existing || c.Job.ID != first.ID {
					t.Errorf("resend: %v, %+v", err, c)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
	})
}

// TestInvalidTransitions checks every move the seed's state table does not
// list: no rule of the table makes it, a forged history containing it does
// not replay, and the engine refuses it with a typed error, changing
// nothing.
func TestInvalidTransitions(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	allowed := map[[2]jobstate.State]bool{
		{Queued, Running}: true, {Queued, Rejected}: true,
		{Running, Completed}: true, {Running, Failed}: true, {Running, Rejected}: true,
		{Failed, Queued}: true, {Failed, DeadLetter}: true,
	}
	states := []jobstate.State{Queued, Running, Completed, Failed, Rejected, DeadLetter}
	for _, from := range states {
		for _, to := range states {
			if allowed[[2]jobstate.State{from, to}] {
				continue
			}
			t.Run(fmt.Sprintf("%s → %s is not allowed", from, to), func(t *testing.T) {
				for _, r := range def.Rules() {
					for _, f := range r.From {
						assert.False(t, f == from && r.To == to, "rule %s --%s--> %s", f, r.Event, r.To)
					}
				}
				// A history that made the move anyway does not replay.
				h := newHarness(t)
				j := h.reach(from)
				hist := h.history(j.ID)
				last := hist[len(hist)-1]
				for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventRequeue, jobstate.EventExhaust, EventReject} {
					forged := append(append([]jobstate.Transition(nil), hist...), jobstate.Transition{JobID: j.ID, Version: last.Version + 1, From: from, Event: ev, To: to})
					_, err := def.Replay(forged)
					assert.Error(t, err, "event %s", ev)
					if isTerminal(def, from) {
						assert.ErrorIs(t, err, jobstate.ErrTerminal)
					} else {
						assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
					}
				}
			})
		}
	}

	t.Run("completed, rejected and dead_letter are final", func(t *testing.T) {
		for _, s := range []jobstate.State{Completed, Rejected, DeadLetter} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				before := h.snapshot(j.ID)
				_, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
				_, err = h.Eng.Cancel(h.ctx, j.ID, jobstate.Call{Actor: "alice"})
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
				_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
				assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
				for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventRequeue, jobstate.EventExhaust} {
					next := before.Job
					_, err := def.Step(h.ctx, &next, jobstate.Input{Event: ev})
					assert.ErrorIs(t, err, jobstate.ErrTerminal, "event %s", ev)
				}
				h.Clock.Advance(time.Hour)
				h.sweep()
				assert.Equal(t, before, h.snapshot(j.ID))
			})
		}
	})
	t.Run("failed → running only through queued", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		before := h.snapshot(j.ID)
		_, err := h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "failed has no claim rule")
		next := before.Job
		_, err = def.Step(h.ctx, &next, jobstate.Input{Event: jobstate.EventClaim})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("failed → rejected: the safety filter judges running jobs only", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Failed)
		before := h.snapshot(j.ID)
		_, err := h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		assert.Equal(t, before, h.snapshot(j.ID))
		assert.Empty(t, h.DB.Audit())
	})
	t.Run("queued → completed: only a running job can succeed", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Queued)
		next := j
		_, err := def.Step(h.ctx, &next, jobstate.Input{Event: jobstate.EventSucceed})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		_, err = h.Eng.Succeed(h.ctx, jobstate.Lease{JobID: j.ID, ExecID: uuid.New(), Token: 1}, jobstate.CommitInput{})
		assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "no lease, no success")
	})
	t.Run("lifecycle events cannot be fired by hand", func(t *testing.T) {
		h := newHarness(t)
		j := h.reach(Running)
		before := h.snapshot(j.ID)
		for _, ev := range []jobstate.Event{jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry, jobstate.EventExhaust} {
			_, err := h.Eng.Fire(h.ctx, j.ID, ev, jobstate.Call{})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "event %s", ev)
		}
		assert.Equal(t, before, h.snapshot(j.ID))
	})
}

// isTerminal reports whether s is a terminal state of def.
func isTerminal(def *jobstate.Definition, s jobstate.State) bool {
	spec, _ := def.State(s)
	return spec.Kind == jobstate.KindTerminal
}

// TestMainPrintsLifecycle runs the demonstration and checks the lifecycle
// it prints: a success, a duplicate click, a dead letter, a rejection.
func TestMainPrintsLifecycle(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		"job 1 created in queued; credits 20 -> 15",
		"same key within the minute: the existing job 1 (queued) is returned; credits still 15",
		"refused, nothing created (guard_refused): quota exceeded: dave has 3 credits, 5 needed; credits 3",
		"refused, nothing created (guard_refused): invalid prompt: empty; credits 20",
		"job 1 attempt 1: -> completed (resultUrl bucket://images-private/originals/",
		"job 2 attempt 1: image API: 500 internal error -> failed (retryCount 1); retry due at 09:00:23 (backoff 2s)",
		"job 2 attempt 2: image API timeout -> failed (retryCount 2); retry due at 09:00:31 (backoff 4s)",
		"job 2 attempt 3: image API: 500 internal error -> failed (retryCount 3); retry due at 09:00:42 (backoff 8s)",
		"job 2 attempt 4: -> dead_letter (image API: 500 internal error; retryCount 3 of 3)",
		"job 3 attempt 1: -> rejected (image API safety filter: NSFW detected)",
		"SAFE_BLOCK carol of job 3, rejected by worker-1: image API safety filter: NSFW detected",
		"running  --fail   --> failed",
		"failed   --exhaust--> dead_letter",
		"running  --reject --> rejected",
		"ops picks the wrong job: job 1 (alice's, completed), reason \"reviewed: API outage over\"\n            refused, nothing changed (invalid_transition): only dead_letter is redriven",
		"ops redrives the dead letter: job 2 (bob's, dead_letter), reason \"reviewed: API outage over\"\n            job 4 created in queued; job 2 stays dead_letter; bob's credits 15 -> 15 (job 2's reservation covers it)",
		"ops clicks again: job 2 (bob's, dead_letter), reason \"reviewed: API outage over\"\n            refused, nothing changed (effect_applied): a dead letter is redriven once",
		"job 4 attempt 1: -> completed (resultUrl bucket://images-private/originals/",
		"Credits: alice 15, bob 15, carol 15, dave 3, erin 20 (nothing refunded, the redrive not charged)",
		"ops runs bob's job 2 again as job 4, paid by job 2's reservation",
		"effect \"redrive\" by ops: run again as job 4 (no transition record; the job stays dead_letter, v22)",
		"job 4 (bob): completed, outcome succeeded, attempts 1, retryCount 0\n    v1  09:01:45  null     --create --> queued      ops      redrive of job 00000000-0000-7000-8000-000000000002: reviewed: API outage over",
	} {
		assert.Contains(t, s, want)
	}
	assert.Equal(t, 1, strings.Count(s, "SAFE_BLOCK"), "one audit record")
	assert.Equal(t, 1, strings.Count(s, "alice: /originals/"), "one asset")
	assert.Equal(t, 1, strings.Count(s, "bob: /originals/"), "bob's image, from the redrive")
	assert.Equal(t, 3, strings.Count(s, " credits for job "), "three reservations: the redrive has none")
}

// TestDiagramIsCurrent compares the machine's Mermaid diagram with the
// ```mermaid block of docs/examples/imagegen.md; -update rewrites the block.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	doccheck.Diagram(t, "../../docs/examples/imagegen.md", def, *update)
}

// TestRedrive checks the operator's answer to the seed's "dead_letter: Max
// retries exceeded. Manual review?": after the review, App.Redrive runs the
// dead letter again as a new job (Engine.Redrive, Policy.RedriveFrom).
func TestRedrive(t *testing.T) {
	const reason = "reviewed: API outage over"
	// deadLetter drives a job of alice's into dead_letter and lets the API
	// answer its prompt with an image from then on.
	deadLetter := func(h *harness) jobstate.Job {
		h.t.Helper()
		j := h.reach(DeadLetter)
		r, err := decodeRequest(j.Payload)
		require.NoError(h.t, err)
		h.API.Script(r.Prompt, nil)
		h.Clock.Advance(time.Minute)
		return j
	}

	t.Run("only from dead_letter", func(t *testing.T) {
		def, err := NewDefinition(NewAppDB(nil))
		require.NoError(t, err)
		assert.Equal(t, []jobstate.State{DeadLetter}, def.Policy().RedriveFrom)
		for _, s := range []jobstate.State{Queued, Running, Failed, Completed, Rejected} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j := h.reach(s)
				before := h.snapshot(j.ID)
				balance, reservations := h.DB.Balance("alice"), h.DB.Reservations()
				_, err := h.Redrive(h.ctx, j.ID, "ops", reason)
				require.ErrorIs(t, err, jobstate.ErrInvalidTransition)
				var te *jobstate.TransitionError
				require.ErrorAs(t, err, &te)
				assert.Equal(t, []any{j.ID, jobstate.EventRedrive, s}, []any{te.JobID, te.Event, te.From})
				assert.Equal(t, before, h.snapshot(j.ID), "nothing changes")
				assert.Equal(t, 1, h.Store.Len(), "no new job")
				assert.Equal(t, balance, h.DB.Balance("alice"))
				assert.Equal(t, reservations, h.DB.Reservations())
				assert.Empty(t, h.DB.Redrives())
			})
		}
		t.Run("an unknown job", func(t *testing.T) {
			h := newHarness(t)
			_, err := h.Redrive(h.ctx, uuid.New(), "ops", reason)
			assert.ErrorIs(t, err, jobstate.ErrNotFound)
			assert.Zero(t, h.Store.Len())
		})
	})

	t.Run("the dead letter stays final, its history unchanged", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		before := h.snapshot(j.ID)
		_, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		after := h.snapshot(j.ID)
		want := before.Job
		want.Version++ // the write that records the redrive, without a transition
		want.UpdatedAt = h.Clock.Now()
		assert.Equal(t, want, after.Job, "still dead_letter, with its outcome, retries and completion time")
		assert.Equal(t, before.History, after.History, "no record added")
		assert.Equal(t, DeadLetter, h.history(j.ID)[len(after.History)-1].To, "the history still replays to dead_letter")
		assert.Equal(t, before.Execs, after.Execs)
		assert.Equal(t, []jobstate.EffectRecord{{Name: jobstate.RedriveEffect, Actor: "ops", At: h.Clock.Now()}}, after.Effects)
		// Still final: nothing moves it, and the sweep leaves it alone.
		_, err = h.Eng.Fire(h.ctx, j.ID, EventReject, jobstate.Call{Actor: "moderator"})
		assert.ErrorIs(t, err, jobstate.ErrTerminal)
		_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		h.Clock.Advance(time.Hour)
		h.sweep()
		assert.Equal(t, after, h.snapshot(j.ID))
	})

	t.Run("once only", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		first, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		before := h.snapshot(j.ID)
		for _, op := range []string{"ops", "another-operator"} {
			_, err = h.Redrive(h.ctx, j.ID, op, "again")
			assert.ErrorIs(t, err, jobstate.ErrEffectApplied, "by %s", op)
		}
		assert.Equal(t, before, h.snapshot(j.ID), "nothing changes")
		assert.Equal(t, 2, h.Store.Len(), "the dead letter and its one redrive")
		require.Len(t, h.DB.Redrives(), 1)
		assert.Equal(t, first.ID, h.DB.Redrives()[0].Job)
	})

	t.Run("once only under concurrent redrives", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		const operators = 16
		var wg sync.WaitGroup
		errs := make([]error, operators)
		for i := 0; i < operators; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = h.Redrive(h.ctx, j.ID, fmt.Sprintf("ops-%d", i), reason)
			}(i)
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				assert.ErrorIs(t, err, jobstate.ErrEffectApplied)
			}
		}
		assert.Equal(t, 1, ok, "one operator redrove it; the others were refused")
		assert.Equal(t, 2, h.Store.Len())
		assert.Len(t, h.DB.Redrives(), 1)
		assert.Len(t, h.snapshot(j.ID).Effects, 1)
	})

	t.Run("the new job: the dead letter's request and owner, created by the operator", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		now := h.Clock.Now()
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.NotEqual(t, j.ID, n.ID)
		assert.Equal(t, Queued, n.State)
		assert.Equal(t, j.Payload, n.Payload)
		r, err := decodeRequest(n.Payload)
		require.NoError(t, err)
		assert.Equal(t, request("alice", "a study in dead_letter"), r)
		assert.Equal(t, "alice", n.Owner, "the job stays the user's")
		assert.Equal(t, j.Priority, n.Priority)
		assert.Equal(t, MaxRetries, n.MaxRetries, "a fresh set of retries")
		require.NotNil(t, n.Backoff)
		assert.Equal(t, Backoff, *n.Backoff)
		assert.Zero(t, n.Attempt)
		assert.Zero(t, n.RetryCount)
		assert.Empty(t, n.IdempotencyKey, "the operator's job holds no request key")
		assert.True(t, n.CreatedAt.Equal(now))
		hist := h.history(n.ID)
		assert.Equal(t, []jobstate.Transition{{
			JobID: n.ID, Version: 1, Event: jobstate.EventCreate, To: Queued, Actor: "ops",
			Reason: "redrive of job " + j.ID.String() + ": " + reason, At: now,
		}}, hist, "the creation record names the operator and the dead letter")

		// It completes on its next attempt, for the user.
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, n.ID, got.ID)
		assert.Equal(t, Completed, got.State)
		assert.Equal(t, 1, got.Attempt)
		assert.Equal(t, []jobstate.State{Queued, Running, Completed}, path(h.history(n.ID)))
		assets := h.DB.Assets()
		require.Len(t, assets, 1)
		assert.Equal(t, []any{n.ID, "alice", ResultURL(n.ID)}, []any{assets[0].JobID, assets[0].Owner, assets[0].URL})
		assert.Equal(t, DeadLetter, h.get(j.ID).State)
	})

	t.Run("credits: a redrive is not charged, the dead letter's reservation covers it", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		reservations := h.DB.Reservations()
		require.Equal(t, []Reservation{{JobID: j.ID, User: "alice", Credits: CreditsPerImage, At: epoch}}, reservations)
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"), "one deduction for one image")
		assert.Equal(t, reservations, h.DB.Reservations(), "no reservation for the redrive")
		want := []Redrive{{Job: n.ID, Of: j.ID, Owner: "alice", Operator: "ops", At: h.Clock.Now()}}
		assert.Equal(t, want, h.DB.Redrives(), "the registry names the dead letter that pays for it")
		// The registry and the creation record agree.
		rec := h.history(n.ID)[0]
		assert.Equal(t, want[0].Operator, rec.Actor)
		assert.True(t, strings.HasPrefix(rec.Reason, "redrive of job "+want[0].Of.String()))
	})
	t.Run("credits: a redrive needs no quota", func(t *testing.T) {
		// alice pays her last credits for a job that dead-letters; the
		// operator's redrive still runs it, and costs her nothing.
		h := newHarnessWith(t, map[string]int{"alice": CreditsPerImage})
		j := deadLetter(h)
		require.Zero(t, h.DB.Balance("alice"))
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		assert.Zero(t, h.DB.Balance("alice"))
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, []any{n.ID, Completed}, []any{got.ID, got.State})
		// Her own requests are still checked against her balance.
		_, err = h.CreateJob(h.ctx, request("alice", "another fox"))
		assert.ErrorIs(t, err, ErrQuotaExceeded)
	})
	t.Run("credits: a redrive of a redrive is covered by the first reservation", func(t *testing.T) {
		h := newHarness(t)
		j := deadLetter(h)
		r, err := decodeRequest(j.Payload)
		require.NoError(t, err)
		h.API.Script(r.Prompt, ErrAPI500) // the outage is not over
		n, err := h.Redrive(h.ctx, j.ID, "ops", reason)
		require.NoError(t, err)
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(t, err)
			require.Equal(t, n.ID, got.ID)
			if got.Terminal() {
				require.Equal(t, DeadLetter, got.State)
				break
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
		h.API.Script(r.Prompt, nil)
		m, err := h.Redrive(h.ctx, n.ID, "ops", "reviewed again")
		require.NoError(t, err)
		got, err := h.Work(h.ctx, "w")
		require.NoError(t, err)
		assert.Equal(t, []any{m.ID, Completed}, []any{got.ID, got.State})
		assert.Equal(t, 100-CreditsPerImage, h.DB.Balance("alice"))
		assert.Len(t, h.DB.Reservations(), 1)
		redrives := h.DB.Redrives()
		require.Len(t, redrives, 2)
		assert.Equal(t, []uuid.UUID{j.ID, n.ID}, []uuid.UUID{redrives[0].Of, redrives[1].Of})
	})
	t.Run("credits: only App.Redrive's creation is free", func(t *testing.T) {
		// The rule follows the mark App.Redrive puts on the creation, not
		// the actor's name: an operator creating a job for alice, or
		// calling Engine.Redrive around App.Redrive, is charged.
		h := newHarness(t)
		j := deadLetter(h)
		_, err := h.Eng.Create(h.ctx, jobstate.NewJob{Machine: Machine, Payload: j.Payload, Owner: "alice", Actor: "ops"})
		require.NoError(t, err)
		assert.Equal(t, 100-2*CreditsPerImage, h.DB.Balance("alice"))
		_, err = h.Eng.Redrive(h.ctx, j.ID, jobstate.Call{Actor: "ops", Reason: reason})
		require.NoError(t, err)
		assert.Equal(t, 100-3*CreditsPerImage, h.DB.Balance("alice"))
		assert.Len(t, h.DB.Reservations(), 3)
		assert.Empty(t, h.DB.Redrives())
	})
}
