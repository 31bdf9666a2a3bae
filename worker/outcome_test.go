package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// TestSuccessCommitsOnce: a nil error commits the result and applies the
// effect exactly once, in one Succeed.
func TestSuccessCommitsOnce(t *testing.T) {
	e := newEnv(t)
	var ledger jobstatetest.Ledger
	var calls atomic.Int32
	job := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("in")})
	n := e.Run("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		calls.Add(1)
		assert.Equal(t, running, tk.Job().State)
		assert.Equal(t, jobstatetest.WorkerName, tk.Lease().Owner)
		return jobstate.CommitInput{Result: append([]byte("out:"), tk.Job().Payload...), Effect: ledger.Effect}, nil
	}))
	assert.Equal(t, 1, n)
	assert.EqualValues(t, 1, calls.Load())
	e.AssertState(job.ID, done)
	e.AssertHistory(job.ID, jobstate.EventCreate, jobstate.EventClaim, jobstate.EventSucceed)
	e.AssertAppliedOnce(&ledger, job.ID)
	assert.Equal(t, "out:in", string(e.Get(job.ID).Result))
	assert.Zero(t, e.Drain(e.Worker(worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		t.Error("a finished job must not run again")
		return ok()
	}), 1))))
}

// TestErrorClasses: a handler's error goes through the machine's
// classifier and the retry policy; Permanent, Retryable and RetryAfter
// are honoured; Snooze counts no failure.
func TestErrorClasses(t *testing.T) {
	e := newEnv(t)
	perm := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("perm")})
	classified := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("classified")})
	retry := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("retry")})
	after := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("after")})
	snooze := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("snooze")})
	e.Run("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		switch string(tk.Job().Payload) {
		case "perm":
			return jobstate.CommitInput{}, jobstate.Permanent(errors.New("no such file"))
		case "classified":
			return jobstate.CommitInput{}, errBadInput
		case "retry":
			return jobstate.CommitInput{}, errors.New("timeout")
		case "after":
			return jobstate.CommitInput{}, jobstate.RetryAfter(errors.New("429"), time.Minute)
		default:
			return jobstate.CommitInput{}, worker.Snooze(10 * time.Second)
		}
	}))
	now := e.Clock.Now()
	e.AssertState(perm.ID, failed)
	e.AssertState(classified.ID, failed)
	assert.Equal(t, jobstate.ClassPermanent, e.Get(classified.ID).ErrorClass)
	e.AssertState(retry.ID, queued)
	r := e.Get(retry.ID)
	assert.Equal(t, 1, r.RetryCount)
	assert.Equal(t, now.Add(time.Second), r.NotBefore, "the machine's 1 s backoff")
	assert.Equal(t, "timeout", r.LastError)
	a := e.Get(after.ID)
	assert.Equal(t, now.Add(time.Minute), a.NotBefore, "RetryAfter overrides the backoff")
	s := e.Get(snooze.ID)
	assert.Equal(t, queued, s.State)
	assert.Zero(t, s.RetryCount, "a snooze is not a failure")
	assert.Equal(t, now.Add(10*time.Second), s.NotBefore)

	// A job failing retryably every time runs MaxRetries+1 = 4 attempts.
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if string(tk.Job().Payload) == "retry" {
			return jobstate.CommitInput{}, errors.New("timeout")
		}
		return ok()
	}), 1))
	e.RunFor(w, 2*time.Minute, time.Second)
	e.AssertState(retry.ID, failed)
	assert.Equal(t, 4, e.Get(retry.ID).Attempt)
	e.AssertState(after.ID, done)
	e.AssertState(snooze.ID, done)
	assert.Zero(t, e.Get(snooze.ID).RetryCount)
}

// TestPanicFailsExecution: a panic fails that execution with the panic
// value and the stack in the job's last error; the worker goes on with
// the other jobs, and the job is retried.
func TestPanicFailsExecution(t *testing.T) {
	e := newEnv(t)
	boom := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("boom")})
	fine := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("fine")})
	var ledger jobstatetest.Ledger
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if string(tk.Job().Payload) == "boom" && tk.Lease().Token == 1 {
			panic("index out of range in the parser")
		}
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}), 2))
	e.Drain(w)
	j := e.Get(boom.ID)
	assert.Equal(t, queued, j.State)
	assert.Equal(t, 1, j.RetryCount)
	assert.Contains(t, j.LastError, "index out of range in the parser")
	assert.Contains(t, j.LastError, "goroutine", "the stack is recorded")
	assert.Contains(t, j.LastError, "TestPanicFailsExecution", "the stack names the handler")
	e.AssertState(fine.ID, done)
	e.Advance(time.Second)
	e.Drain(w)
	e.AssertAppliedOnce(&ledger, boom.ID, fine.ID)
	assert.Empty(t, e.Get(boom.ID).LastError)
}

// TestPanicErrorIsAnError: a panic with an error value is seen by
// errors.Is, so a classifier can make it permanent.
func TestPanicErrorIsAnError(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	e.Run("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		panic(errBadInput) // classified permanent by the machine
	}))
	e.AssertState(job.ID, failed)
	assert.True(t, strings.HasPrefix(e.Get(job.ID).LastError, "worker: handler panicked: bad input"))
}

// TestAdvanceMovesBetweenActiveStates: the handler moves its job through
// active states under its lease, then commits; a move out of the active
// states ends the execution, and its return is ignored.
func TestAdvanceMovesBetweenActiveStates(t *testing.T) {
	e := newEnv(t)
	fetch := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("fetch")})
	reject := e.Create(jobstate.NewJob{Machine: "task", Payload: []byte("reject")})
	var ledger jobstatetest.Ledger
	e.Run("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		if string(tk.Job().Payload) == "reject" {
			j, err := tk.Advance(ctx, "reject", jobstate.Call{Reason: "unsafe"})
			require.NoError(t, err)
			assert.Equal(t, rejected, j.State)
			return jobstate.CommitInput{Effect: ledger.Effect}, nil // ignored: the execution is over
		}
		j, err := tk.Advance(ctx, "fetch", jobstate.Call{})
		require.NoError(t, err)
		assert.Equal(t, fetching, j.State)
		assert.Equal(t, fetching, tk.Job().State)
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}))
	e.AssertPath(fetch.ID, queued, running, fetching, done)
	e.AssertAppliedOnce(&ledger, fetch.ID)
	e.AssertHistory(reject.ID, jobstate.EventCreate, jobstate.EventClaim, "reject")
	assert.Zero(t, ledger.Applied(reject.ID))
	assert.Equal(t, 1, e.Get(reject.ID).Attempt)
}

// TestCommitEffectErrorFailsExecution: an effect that fails aborts the
// commit; the runtime fails the execution with that error, and the next
// attempt commits, the effect applied once in all.
func TestCommitEffectErrorFailsExecution(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	var ledger jobstatetest.Ledger
	var tries atomic.Int32
	effect := func(ctx context.Context, j jobstate.Job) error {
		if tries.Add(1) == 1 {
			return errors.New("database unavailable")
		}
		return ledger.Effect(ctx, j)
	}
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: effect}, nil
	}), 1))
	e.Drain(w)
	j := e.Get(job.ID)
	assert.Equal(t, queued, j.State)
	assert.Contains(t, j.LastError, "database unavailable")
	e.RunFor(w, time.Second, time.Second)
	e.AssertAppliedOnce(&ledger, job.ID)
}

// TestIncompleteSucceedIsFinished: when the succeed rule's effect fails
// after the commit, the commit stands (its effect applied once) and the
// runtime finishes the job.
func TestIncompleteSucceedIsFinished(t *testing.T) {
	spec := taskSpec("task")
	var ruleRuns atomic.Int32
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventSucceed {
			spec.Rules[i].Effect = func(context.Context, jobstate.Job) error {
				if ruleRuns.Add(1) == 1 {
					return errors.New("notification service down")
				}
				return nil
			}
		}
	}
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	e := jobstatetest.New(t, jobstate.WithMachines(def))
	job := e.Create(jobstate.NewJob{Machine: "task"})
	var ledger jobstatetest.Ledger
	e.Run("task", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Effect: ledger.Effect}, nil
	}))
	e.AssertAppliedOnce(&ledger, job.ID)
	assert.EqualValues(t, 2, ruleRuns.Load())
}

// TestTimeoutCancelsHandler: past its timeout the handler's context ends
// with a *TimeoutError, and the execution fails with it.
func TestTimeoutCancelsHandler(t *testing.T) {
	e := newEnv(t)
	job := e.Create(jobstate.NewJob{Machine: "task"})
	causes := make(chan error, 1)
	w := e.Worker(worker.Handle("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return jobstate.CommitInput{}, ctx.Err()
	}), 1, worker.Timeout(5*time.Second)))
	drained := make(chan int, 1)
	go func() { n, _ := w.Drain(context.Background(), 1); drained <- n }()
	waitTimer(t, e.Clock, jobstatetest.Epoch.Add(5*time.Second))
	e.Advance(5 * time.Second)
	var te *worker.TimeoutError
	require.ErrorAs(t, recv(t, causes), &te)
	assert.Equal(t, 5*time.Second, te.Timeout)
	assert.Equal(t, 1, recv(t, drained))
	j := e.Get(job.ID)
	assert.Equal(t, 1, j.RetryCount)
	assert.Contains(t, j.LastError, "timed out after 5s")
}

// TestRequireStart: on a machine that requires Start, the runtime starts
// the execution before the handler, so that the commit is accepted.
func TestRequireStart(t *testing.T) {
	spec := taskSpec("task")
	spec.Policy.RequireStart = true
	def, err := jobstate.NewDefinition(spec)
	require.NoError(t, err)
	e := jobstatetest.New(t, jobstate.WithMachines(def))
	job := e.Create(jobstate.NewJob{Machine: "task"})
	e.Run("task", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		execs, err := e.Engine.Executions(ctx, tk.Job().ID)
		require.NoError(t, err)
		assert.Equal(t, jobstate.ExecInProgress, execs[0].Status)
		return ok()
	}))
	e.AssertCommittedOnce(job.ID)
}
