// Package envtest checks that jobstatetest's helpers work on a store: that
// an Env built on it runs jobs to the outcomes and histories its manual
// clock dictates, keeps that clock's instants to the nanosecond, lets
// leases lapse and backoffs pass only when the clock moves, and that its
// assertions fail and hold as documented.
//
// Package jobstatetest runs these checks on memstore, and package
// pgstore/pgtest on PostgreSQL; a store of your own can run them with an
// Env from jobstatetest.NewWithStore:
//
//	func TestEnv(t *testing.T) {
//		envtest.Run(t, func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env {
//			return jobstatetest.NewWithStore(t, newStore(t), opts...)
//		})
//	}
package envtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// NewEnv returns a fresh Env for t on the store under test, with the
// engine options given (a check registers its machines with them), set up
// as jobstatetest.NewWithStore sets it up. The store must hold no job, and
// must be released by t's cleanups. Checks may replace the Env's T to
// observe failures.
type NewEnv func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env

// Backoff is the delay before the retry of the checks' machine.
const Backoff = time.Second

// Machine is the machine the checks run: "queue", QUEUED → RUNNING →
// SUCCEEDED or FAILED, with up to 3 retries through RETRYING after a
// fixed Backoff.
func Machine() *jobstate.Definition {
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(Backoff)}},
	})
	if err != nil {
		panic(fmt.Sprintf("envtest: the checks' machine: %v", err))
	}
	return def
}

// Run runs every check as a subtest of t, each on an Env of its own from
// newEnv.
func Run(t *testing.T, newEnv NewEnv) {
	checks := []struct {
		name string
		fn   func(*testing.T, NewEnv)
	}{
		{"CommitsOnce", testCommitsOnce},
		{"RetriesWhenTheClockPassesTheBackoff", testRetries},
		{"KeepsTheClocksInstants", testInstants},
		{"SweepEndsLapsedLeases", testLapsedLease},
		{"RunForLetsTimePass", testRunFor},
		{"AssertionsFailReadably", testAssertions},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newEnv) })
	}
}

func queueEnv(t *testing.T, newEnv NewEnv) *jobstatetest.Env {
	t.Helper()
	e := newEnv(t, jobstate.WithMachines(Machine()))
	if e == nil || e.Engine == nil || e.Clock == nil {
		t.Fatal("envtest: newEnv returned no Env, engine or clock")
	}
	if now := e.Clock.Now(); !now.Equal(jobstatetest.Epoch) {
		t.Fatalf("envtest: the Env's clock reads %s, want jobstatetest.Epoch", now)
	}
	return e
}

func ok(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
	return jobstate.CommitInput{Result: []byte("processed " + string(tk.Job().Payload))}, nil
}

// testCommitsOnce: Run runs the due jobs once each, commits their result
// and effect, and leaves nothing due.
func testCommitsOnce(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	var ledger jobstatetest.Ledger
	a := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("a.pdf")})
	b := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("b.pdf")})
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		in, err := ok(ctx, tk)
		in.Effect = ledger.Effect
		return in, err
	})
	if n := e.Run("queue", h); n != 2 {
		t.Errorf("ran %d jobs, want 2", n)
	}
	if n := e.Run("queue", h); n != 0 {
		t.Errorf("ran %d jobs again, want 0", n)
	}
	for _, j := range []jobstate.Job{a, b} {
		e.AssertState(j.ID, "SUCCEEDED")
		e.AssertHistory(j.ID, "create", "claim", "succeed")
		e.AssertPath(j.ID, "QUEUED", "RUNNING", "SUCCEEDED")
		e.AssertEffects(j.ID)
	}
	e.AssertAppliedOnce(&ledger, a.ID, b.ID)
	if got := string(e.Get(a.ID).Result); got != "processed a.pdf" {
		t.Errorf("result %q, want %q", got, "processed a.pdf")
	}
}

// testRetries: a failed execution is retried when, and only when, the
// clock has passed the backoff; every record carries the clock's time.
func testRetries(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	job := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("scan.tiff")})
	h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if tk.Lease().Token == 1 {
			return jobstate.CommitInput{}, errors.New("timeout")
		}
		return ok(ctx, tk)
	})
	if n := e.Run("queue", h); n != 1 {
		t.Fatalf("ran %d jobs, want 1", n)
	}
	e.AssertState(job.ID, "RETRYING")
	if j := e.Get(job.ID); j.RetryCount != 1 || !strings.Contains(j.LastError, "timeout") {
		t.Errorf("after the failure: %d retries, last error %q; want 1 and the handler's error", j.RetryCount, j.LastError)
	}
	e.Advance(Backoff - time.Nanosecond)
	if n := e.Run("queue", h); n != 0 {
		t.Errorf("ran %d jobs a nanosecond before the backoff ended, want 0", n)
	}
	e.AssertState(job.ID, "RETRYING")
	e.Advance(time.Nanosecond)
	if n := e.Run("queue", h); n != 1 {
		t.Errorf("ran %d jobs once the backoff ended, want 1", n)
	}
	e.AssertState(job.ID, "SUCCEEDED")
	e.AssertHistory(job.ID, "create", "claim", "retry", "requeue", "claim", "succeed")
	e.AssertCommittedOnce(job.ID)
	// create, claim and retry at the start; requeue, claim and succeed
	// once the backoff passed.
	start, later := jobstatetest.Epoch, jobstatetest.Epoch.Add(Backoff)
	at := []time.Time{start, start, start, later, later, later}
	hist, err := e.Engine.History(e.Ctx, job.ID)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	for i, tr := range hist {
		if i < len(at) && !tr.At.Equal(at[i]) {
			t.Errorf("record %d (%s) at %s, want %s (the clock's time)\n%s", i, tr.Event, tr.At, at[i], e.Describe(job.ID))
		}
	}
}

// testInstants: the store keeps the instants the engine takes from the
// clock, to the nanosecond, and a scheduled job becomes due exactly when
// the clock reaches its time.
func testInstants(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	// Far from the machine's time, with nanoseconds below the microsecond.
	created := time.Date(2041, 3, 4, 5, 6, 7, 891_234_567, time.UTC)
	e.Clock.Set(created)
	notBefore := created.Add(time.Hour + 3*time.Nanosecond)
	job := e.Create(jobstate.NewJob{Machine: "queue", NotBefore: notBefore})
	got := e.Get(job.ID)
	if !got.CreatedAt.Equal(created) || !got.UpdatedAt.Equal(created) {
		t.Errorf("created at %s, updated at %s; want the clock's %s", got.CreatedAt, got.UpdatedAt, created)
	}
	if !got.NotBefore.Equal(notBefore) {
		t.Errorf("not before %s, want %s", got.NotBefore, notBefore)
	}
	e.Advance(time.Hour + 2*time.Nanosecond)
	if n := e.Run("queue", worker.HandlerFunc(ok)); n != 0 {
		t.Errorf("ran %d jobs a nanosecond before their time, want 0", n)
	}
	e.Advance(time.Nanosecond)
	if n := e.Run("queue", worker.HandlerFunc(ok)); n != 1 {
		t.Errorf("ran %d jobs at their time, want 1", n)
	}
	done := e.Get(job.ID)
	if !done.CompletedAt.Equal(notBefore) || !done.UpdatedAt.Equal(notBefore) {
		t.Errorf("completed at %s, updated at %s; want the clock's %s", done.CompletedAt, done.UpdatedAt, notBefore)
	}
	e.AssertState(job.ID, "SUCCEEDED")
}

// testLapsedLease: a lease lapses when the clock passes its expiry, not
// before, and the sweep then sends the job to its retry.
func testLapsedLease(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	c, err := e.Engine.Claim(e.Ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "gone"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	expiry := c.Lease.ExpiresAt
	if want := jobstatetest.Epoch.Add(jobstate.DefaultLeaseTTL); !expiry.Equal(want) {
		t.Errorf("lease expires at %s, want %s", expiry, want)
	}
	e.Clock.Set(expiry.Add(-time.Nanosecond))
	if rep := e.Sweep(); rep.Retried+rep.Failed != 0 {
		t.Errorf("sweep before the expiry: %+v, want nothing lost", rep)
	}
	e.AssertState(job.ID, "RUNNING")
	e.Clock.Set(expiry.Add(time.Nanosecond))
	if rep := e.Sweep(); rep.Retried != 1 {
		t.Errorf("sweep after the expiry: %+v, want one job retried", rep)
	}
	e.AssertState(job.ID, "RETRYING")
	if _, err := e.Engine.Heartbeat(e.Ctx, c.Lease); !errors.Is(err, jobstate.ErrLeaseLost) {
		t.Errorf("heartbeat of the lapsed lease: %v, want ErrLeaseLost", err)
	}
	if n := e.RunFor(e.Worker(worker.Handle("queue", worker.HandlerFunc(ok), 1)), Backoff, Backoff); n != 1 {
		t.Errorf("ran %d jobs after the backoff, want 1", n)
	}
	e.AssertHistory(job.ID, "create", "claim", "retry", "requeue", "claim", "succeed")
	e.AssertCommittedOnce(job.ID)
}

// testRunFor: backoffs and snoozes run their course.
func testRunFor(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	w := e.Worker(worker.Handle("queue", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if tk.Lease().Token < 3 {
			return jobstate.CommitInput{}, worker.Snooze(time.Minute)
		}
		return jobstate.CommitInput{}, nil
	}), 1))
	if n := e.Drain(w); n != 1 {
		t.Errorf("drained %d jobs, want 1: the snoozed job is not due", n)
	}
	if n := e.RunFor(w, 2*time.Minute, 30*time.Second); n != 2 {
		t.Errorf("ran %d jobs, want 2", n)
	}
	e.AssertState(job.ID, "SUCCEEDED")
	if got := e.Clock.Now(); !got.Equal(jobstatetest.Epoch.Add(2 * time.Minute)) {
		t.Errorf("clock at %s", got)
	}
}

// recorder is a TB that records failures instead of failing the test.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	panic("fatal: " + fmt.Sprintf(format, args...))
}

// testAssertions: every assertion fails on a mismatch, and its message
// names what was expected and shows the job; each holds when it should.
func testAssertions(t *testing.T, newEnv NewEnv) {
	e := queueEnv(t, newEnv)
	r := &recorder{}
	e.T = r
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	var ledger jobstatetest.Ledger
	e.Run("queue", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unsupported format"))
	}))
	checks := []struct {
		ok   bool
		want string
	}{
		{e.AssertState(job.ID, "SUCCEEDED"), "state FAILED, want SUCCEEDED"},
		{e.AssertTerminal(job.ID), ""},
		{e.AssertHistory(job.ID, "create", "claim", "succeed"), "history [create claim fail], want [create claim succeed]"},
		{e.AssertPath(job.ID, "QUEUED", "RUNNING", "SUCCEEDED"), "path [QUEUED → RUNNING → FAILED], want [QUEUED → RUNNING → SUCCEEDED]"},
		{e.AssertCommittedOnce(job.ID), "0 executions committed, want exactly 1"},
		{e.AssertEffects(job.ID, "refund"), "effect records [], want [refund]"},
		{e.AssertAppliedOnce(&ledger, job.ID), "effect applied 0 times, want exactly once"},
	}
	var failing []string
	for i, c := range checks {
		if c.want == "" {
			if !c.ok {
				t.Errorf("check %d failed", i)
			}
			continue
		}
		if c.ok {
			t.Errorf("check %d held", i)
		}
		failing = append(failing, c.want)
	}
	if len(r.errs) != len(failing) {
		t.Fatalf("%d failures reported, want %d: %q", len(r.errs), len(failing), r.errs)
	}
	for i, want := range failing {
		if !strings.Contains(r.errs[i], want) {
			t.Errorf("failure %d: message %q lacks %q", i, r.errs[i], want)
		}
		for _, part := range []string{"history:", "RUNNING --fail--> FAILED", "#1 ABORTED by test-worker: unsupported format"} {
			if !strings.Contains(r.errs[i], part) {
				t.Errorf("failure %d: message lacks %q:\n%s", i, part, r.errs[i])
			}
		}
	}
	// And they hold when they should.
	r.errs = nil
	e.AssertState(job.ID, "FAILED")
	e.AssertHistory(job.ID, "create", "claim", "fail")
	e.AssertPath(job.ID, "QUEUED", "RUNNING", "FAILED")
	e.AssertEffects(job.ID)
	if len(r.errs) > 0 {
		t.Errorf("true assertions failed: %q", r.errs)
	}
}
