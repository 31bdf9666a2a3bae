package jobstatetest_test

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

// recorder is a TB that records failures instead of failing the test.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	panic("fatal: " + fmt.Sprintf(format, args...))
}

// TestAssertionsFailReadably: every assertion fails on a mismatch, and its
// message names what was expected and shows the job.
func TestAssertionsFailReadably(t *testing.T) {
	r := &recorder{}
	e := jobstatetest.New(r, jobstate.WithMachines(docsMachine()))
	job := e.Create(jobstate.NewJob{Machine: "docs"})
	var ledger jobstatetest.Ledger
	e.Run("docs", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unsupported format"))
	}))
	checks := []struct {
		ok   bool
		want string
	}{
		{e.AssertState(job.ID, "SUCCEEDED"), "state FAILED, want SUCCEEDED"},
		{e.AssertHistory(job.ID, "create", "claim", "succeed"), "history [create claim fail], want [create claim succeed]"},
		{e.AssertPath(job.ID, "QUEUED", "RUNNING", "SUCCEEDED"), "path [QUEUED → RUNNING → FAILED], want [QUEUED → RUNNING → SUCCEEDED]"},
		{e.AssertCommittedOnce(job.ID), "0 executions committed, want exactly 1"},
		{e.AssertEffects(job.ID, "refund"), "effect records [], want [refund]"},
		{e.AssertAppliedOnce(&ledger, job.ID), "effect applied 0 times, want exactly once"},
	}
	if len(r.errs) != len(checks) {
		t.Fatalf("%d failures reported, want %d: %q", len(r.errs), len(checks), r.errs)
	}
	for i, c := range checks {
		if c.ok {
			t.Errorf("check %d held", i)
		}
		if !strings.Contains(r.errs[i], c.want) {
			t.Errorf("check %d: message %q lacks %q", i, r.errs[i], c.want)
		}
		for _, part := range []string{"history:", "RUNNING --fail--> FAILED", "#1 ABORTED by test-worker: unsupported format"} {
			if !strings.Contains(r.errs[i], part) {
				t.Errorf("check %d: message lacks %q:\n%s", i, part, r.errs[i])
			}
		}
	}
	// And they hold when they should.
	r.errs = nil
	e.AssertState(job.ID, "FAILED")
	e.AssertTerminal(job.ID)
	e.AssertHistory(job.ID, "create", "claim", "fail")
	e.AssertPath(job.ID, "QUEUED", "RUNNING", "FAILED")
	e.AssertEffects(job.ID)
	if len(r.errs) > 0 {
		t.Errorf("true assertions failed: %q", r.errs)
	}
}

// TestClockTimers: timers fire when the clock reaches them, in time order,
// and Reset and Stop behave as the worker.Timer contract says.
func TestClockTimers(t *testing.T) {
	c := jobstatetest.NewClock(jobstatetest.Epoch)
	a := c.NewTimer(2 * time.Second)
	fired := make(chan string, 4)
	c.AfterFunc(time.Second, func() { fired <- "f" })
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop reports whether it stopped an armed timer")
	}
	if n := c.Pending(); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	if at, ok := c.Next(); !ok || !at.Equal(jobstatetest.Epoch.Add(time.Second)) {
		t.Errorf("next %s %v", at, ok)
	}
	c.Advance(time.Second)
	if got := <-fired; got != "f" {
		t.Error(got)
	}
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	now := c.Advance(time.Second)
	if got := <-a.C(); !got.Equal(now) {
		t.Errorf("fired with %s, want %s", got, now)
	}
	a.Reset(time.Second)
	a.Reset(3 * time.Second) // re-arms: only the later deadline counts
	c.Advance(2 * time.Second)
	select {
	case <-a.C():
		t.Fatal("a reset timer fired at its old deadline")
	default:
	}
	c.Advance(time.Second)
	<-a.C()
	if c.Pending() != 0 {
		t.Errorf("pending %d", c.Pending())
	}
	a.Reset(0)
	<-a.C() // at once
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitPending(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitPending: %v", err)
	}
	c.NewTimer(time.Minute)
	if err := c.WaitPending(context.Background(), 1); err != nil {
		t.Error(err)
	}
	if err := c.WaitTimer(context.Background(), c.Now().Add(time.Minute)); err != nil {
		t.Error(err)
	}
}

// TestRunForLetsTimePass: backoffs and snoozes run their course.
func TestRunForLetsTimePass(t *testing.T) {
	e := jobstatetest.New(t, jobstate.WithMachines(docsMachine()))
	job := e.Create(jobstate.NewJob{Machine: "docs"})
	w := e.Worker(worker.Handle("docs", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
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
