package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// outcome is what a handler does on one attempt.
type outcome int

const (
	succeed outcome = iota
	retryable
	permanent
	panics
	snoozes
	effectFails
	rejects
	numOutcomes
)

func (o outcome) String() string {
	return [...]string{"succeed", "retryable", "permanent", "panic", "snooze", "effect-fails", "reject"}[o]
}

// TestPropertyEveryJobEndsEffectOnce: whatever the handlers do, attempt by
// attempt (succeed, fail retryably or permanently, panic, snooze, fail in
// the commit's effect, reject), at any concurrency and bound of commits
// ahead, every job ends terminal, and the commit's effect was applied exactly once for each
// succeeded job and never for the others.
func TestPropertyEveryJobEndsEffectOnce(t *testing.T) {
	def := taskMachine(t, "task")
	rapid.Check(t, func(rt *rapid.T) {
		jobs := rapid.IntRange(1, 24).Draw(rt, "jobs")
		concurrency := rapid.IntRange(1, 6).Draw(rt, "concurrency")
		ahead := rapid.IntRange(0, 4).Draw(rt, "ahead")
		// scripts[i][a] is job i's outcome on attempt a+1; past the end it
		// succeeds.
		scripts := make([][]outcome, jobs)
		for i := range scripts {
			scripts[i] = rapid.SliceOfN(rapid.Map(rapid.IntRange(0, int(numOutcomes)-1), func(n int) outcome { return outcome(n) }), 0, 6).Draw(rt, "script"+strconv.Itoa(i))
		}

		e := jobstatetest.New(rt, jobstate.WithMachines(def))
		var ledger jobstatetest.Ledger
		ids := make([]jobstate.Job, jobs)
		for i := range ids {
			ids[i] = e.Create(jobstate.NewJob{Machine: "task", Payload: []byte(strconv.Itoa(i))})
		}
		h := worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
			i, _ := strconv.Atoi(string(tk.Job().Payload))
			// Attempts run from 1; snoozes claim again, so count claims.
			a := tk.Lease().Token - 1
			o := succeed
			if a < len(scripts[i]) {
				o = scripts[i][a]
			}
			switch o {
			case retryable:
				return jobstate.CommitInput{}, errors.New("transient")
			case permanent:
				return jobstate.CommitInput{}, jobstate.Permanent(errors.New("broken"))
			case panics:
				panic(fmt.Sprintf("job %d attempt %d", i, a+1))
			case snoozes:
				return jobstate.CommitInput{}, worker.Snooze(time.Duration(a) * time.Second)
			case effectFails:
				return jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error { return errors.New("effect failed") }}, nil
			case rejects:
				_, err := tk.Advance(ctx, "reject", jobstate.Call{})
				return jobstate.CommitInput{Effect: ledger.Effect}, err
			}
			return jobstate.CommitInput{Effect: ledger.Effect}, nil
		})
		w := e.Worker(worker.Handle("task", h, concurrency), worker.WithCommitsAhead(ahead))
		e.RunFor(w, 30*time.Second, time.Second)

		for i, j := range ids {
			got := e.Get(j.ID)
			if !got.Terminal() {
				rt.Fatalf("job %d (script %v) is not terminal:\n%s", i, scripts[i], e.Describe(j.ID))
			}
			want := 0
			if got.Outcome == jobstate.OutcomeSucceeded {
				want = 1
				e.AssertCommittedOnce(j.ID)
			}
			if n := ledger.Applied(j.ID); n != want {
				rt.Fatalf("job %d (script %v) ended %s with its effect applied %d times, want %d\n%s", i, scripts[i], got.State, n, want, e.Describe(j.ID))
			}
		}
	})
}
