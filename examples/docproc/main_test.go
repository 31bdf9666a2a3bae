package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/doccheck"
)

// update rewrites the diagram in docs/examples/docproc.md.
var update = flag.Bool("update", false, "rewrite the mermaid block of docs/examples/docproc.md")

// epoch is the tests' start time.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// allEvents is every event a rule of any machine may carry: the table's
// own and all the lifecycle events.
var allEvents = []jobstate.Event{
	EventSubmit, jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry,
	jobstate.EventRequeue, jobstate.EventExhaust, jobstate.EventAbandon, jobstate.EventExpire, jobstate.EventCancel,
}

// harness is a fresh service for one test, with helpers that drive jobs.
type harness struct {
	t   *testing.T
	ctx context.Context
	*App
}

// newHarness returns a fresh service on a manual clock at epoch.
func newHarness(t *testing.T) *harness {
	t.Helper()
	app, err := NewApp(epoch)
	require.NoError(t, err)
	return &harness{t: t, ctx: context.Background(), App: app}
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

// claim takes the next due job as worker w.
func (h *harness) claim(w string) jobstate.Claimed {
	h.t.Helper()
	c, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: w})
	require.NoError(h.t, err)
	return c
}

// fail reports err for the lease's attempt.
func (h *harness) fail(l jobstate.Lease, err error) jobstate.Job {
	h.t.Helper()
	j, ferr := h.Eng.Fail(h.ctx, l, err)
	require.NoError(h.t, ferr)
	return j
}

// stored is everything the store holds about a job.
type stored struct {
	Job     jobstate.Job
	History []jobstate.Transition
	Execs   []jobstate.Execution
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
	return s
}

// reach creates a job and drives it into state s; for RUNNING it also
// returns the worker's lease.
func (h *harness) reach(s jobstate.State) (jobstate.Job, jobstate.Lease) {
	h.t.Helper()
	j, err := h.CreateJob(h.ctx, Document{Name: "doc-" + strings.ToLower(string(s)) + ".pdf"}, "alice")
	require.NoError(h.t, err)
	if s == Created {
		return j, jobstate.Lease{}
	}
	j, err = h.Submit(h.ctx, j.ID, "alice")
	require.NoError(h.t, err)
	if s == Queued {
		return j, jobstate.Lease{}
	}
	c := h.claim("worker-1")
	require.Equal(h.t, j.ID, c.Job.ID)
	switch s {
	case Running:
		return c.Job, c.Lease
	case Retrying:
		return h.fail(c.Lease, ErrTimeout), jobstate.Lease{}
	case Failed:
		return h.fail(c.Lease, ErrUnsupportedFormat), jobstate.Lease{}
	case Succeeded:
		j, err := h.Eng.Succeed(h.ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
		require.NoError(h.t, err)
		return j, jobstate.Lease{}
	}
	h.t.Fatalf("no way to reach %q", s)
	return jobstate.Job{}, jobstate.Lease{}
}

// record is the part of a transition a trace fixes: the move and its time
// since the job's creation.
type record struct {
	From  jobstate.State
	Event jobstate.Event
	To    jobstate.State
	At    time.Duration
}

// records reduces a history to its records.
func records(hist []jobstate.Transition) []record {
	out := make([]record, len(hist))
	for i, t := range hist {
		out[i] = record{t.From, t.Event, t.To, t.At.Sub(hist[0].At)}
	}
	return out
}

// path lists the states a history went through.
func path(hist []jobstate.Transition) []jobstate.State {
	out := []jobstate.State{}
	for _, t := range hist {
		out = append(out, t.To)
	}
	return out
}

// TestStates replays the seed's "State Definitions" and "State
// Classification".
func TestStates(t *testing.T) {
	def, err := NewDefinition()
	require.NoError(t, err)
	rows := []struct {
		name  string
		state jobstate.State
		kind  jobstate.Kind
	}{
		{"CREATED: non-terminal, created but not yet submitted to the queue (initial state)", Created, jobstate.KindInitial},
		{"QUEUED: non-terminal, waiting in the processing queue", Queued, jobstate.KindReady},
		{"RUNNING: non-terminal, actively being processed", Running, jobstate.KindActive},
		{"SUCCEEDED: terminal, completed successfully", Succeeded, jobstate.KindTerminal},
		{"FAILED: terminal, failed permanently", Failed, jobstate.KindTerminal},
		{"RETRYING: non-terminal, scheduled for retry after a transient failure", Retrying, jobstate.KindWaiting},
	}
	require.Len(t, def.States(), len(rows), "the seed's six states, no more")
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			spec, ok := def.State(row.state)
			require.True(t, ok)
			assert.Equal(t, row.kind, spec.Kind)
			h := newHarness(t)
			j, _ := h.reach(row.state)
			assert.Equal(t, row.state, h.get(j.ID).State, "reachable through the service")
			h.history(j.ID)
		})
	}
	t.Run("terminal states: SUCCEEDED (successful completion), FAILED (permanent failure)", func(t *testing.T) {
		for _, s := range []jobstate.State{Succeeded, Failed} {
			spec, _ := def.State(s)
			assert.Equal(t, jobstate.KindTerminal, spec.Kind, "%s", s)
		}
		s, _ := def.State(Succeeded)
		f, _ := def.State(Failed)
		assert.Equal(t, jobstate.OutcomeSucceeded, s.Outcome)
		assert.Equal(t, jobstate.OutcomeFailed, f.Outcome)
	})
	t.Run("non-terminal states: CREATED (initial), QUEUED, RUNNING, RETRYING", func(t *testing.T) {
		for _, s := range []jobstate.State{Created, Queued, Running, Retrying} {
			spec, _ := def.State(s)
			assert.NotEqual(t, jobstate.KindTerminal, spec.Kind, "%s", s)
		}
		assert.Equal(t, Created, def.Initial())
	})
}

// TestValidTransitions replays the seed's "Valid State Transitions", one
// subtest per transition and trigger, and checks the table has no other.
func TestValidTransitions(t *testing.T) {
	// last returns the last record of a job's history.
	last := func(h *harness, id uuid.UUID) jobstate.Transition {
		hist := h.history(id)
		return hist[len(hist)-1]
	}
	t.Run("CREATED → QUEUED (trigger: job submission)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Created)
		got, err := h.Submit(h.ctx, j.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, Queued, got.State)
		r := last(h, j.ID)
		assert.Equal(t, []any{Created, EventSubmit, Queued, "alice"}, []any{r.From, r.Event, r.To, r.Actor})
	})
	t.Run("QUEUED → RUNNING (trigger: processing begins)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Queued)
		h.Clock.Advance(time.Second)
		c := h.claim("worker-1")
		assert.Equal(t, j.ID, c.Job.ID)
		assert.Equal(t, Running, c.Job.State)
		assert.True(t, c.Job.StartedAt.Equal(epoch.Add(time.Second)))
		r := last(h, j.ID)
		assert.Equal(t, []any{Queued, jobstate.EventClaim, Running, "worker-1"}, []any{r.From, r.Event, r.To, r.Actor})
	})
	t.Run("RUNNING → SUCCEEDED (trigger: processing completed successfully)", func(t *testing.T) {
		h := newHarness(t)
		h.reach(Queued)
		got, err := h.Work(h.ctx, "worker-1", Scripted(h.Clock, []error{nil}))
		require.NoError(t, err)
		assert.Equal(t, Succeeded, got.State)
		assert.Equal(t, "processed doc-queued.pdf", string(got.Result))
		r := last(h, got.ID)
		assert.Equal(t, []any{Running, jobstate.EventSucceed, Succeeded}, []any{r.From, r.Event, r.To})
	})
	t.Run("RUNNING → FAILED (trigger: unrecoverable error)", func(t *testing.T) {
		h := newHarness(t)
		_, l := h.reach(Running)
		got := h.fail(l, ErrCorruptDocument)
		assert.Equal(t, Failed, got.State)
		assert.Zero(t, got.RetryCount)
		r := last(h, got.ID)
		assert.Equal(t, []any{Running, jobstate.EventFail, Failed, "corrupted document"}, []any{r.From, r.Event, r.To, r.Reason})
	})
	t.Run("RUNNING → FAILED (trigger: max retries exceeded)", func(t *testing.T) {
		h := newHarness(t)
		_, l := h.reach(Running)
		var got jobstate.Job
		for i := 0; i <= MaxRetries; i++ {
			got = h.fail(l, ErrQueueOverload)
			if got.Terminal() {
				break
			}
			h.Clock.Advance(RetryDelay)
			h.sweep()
			l = h.claim("worker-1").Lease
		}
		assert.Equal(t, Failed, got.State)
		assert.Equal(t, MaxRetries, got.RetryCount)
		assert.Equal(t, MaxRetries+1, got.Attempt)
		r := last(h, got.ID)
		assert.Equal(t, []any{Running, jobstate.EventFail, Failed}, []any{r.From, r.Event, r.To})
	})
	t.Run("RUNNING → RETRYING (trigger: transient/retryable error and retries remaining)", func(t *testing.T) {
		h := newHarness(t)
		_, l := h.reach(Running)
		got := h.fail(l, ErrTimeout)
		assert.Equal(t, Retrying, got.State)
		assert.Equal(t, 1, got.RetryCount)
		r := last(h, got.ID)
		assert.Equal(t, []any{Running, jobstate.EventRetry, Retrying, "timeout"}, []any{r.From, r.Event, r.To, r.Reason})
	})
	t.Run("RETRYING → QUEUED (trigger: retry delay elapsed)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Retrying)
		h.Clock.Advance(RetryDelay - time.Millisecond)
		h.sweep()
		assert.Equal(t, Retrying, h.get(j.ID).State, "not before the delay has elapsed")
		h.Clock.Advance(time.Millisecond)
		assert.Equal(t, 1, h.sweep().Requeued)
		assert.Equal(t, Queued, h.get(j.ID).State)
		r := last(h, j.ID)
		assert.Equal(t, []any{Retrying, jobstate.EventRequeue, Queued, epoch.Add(RetryDelay)}, []any{r.From, r.Event, r.To, r.At})
	})
	for _, trigger := range []string{"resource exhaustion", "cancellation"} {
		t.Run("QUEUED → FAILED (trigger: "+trigger+")", func(t *testing.T) {
			h := newHarness(t)
			j, _ := h.reach(Queued)
			got, err := h.Cancel(h.ctx, j.ID, "ops", trigger)
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.False(t, got.CompletedAt.IsZero())
			r := last(h, j.ID)
			assert.Equal(t, []any{Queued, jobstate.EventCancel, Failed, "ops", trigger}, []any{r.From, r.Event, r.To, r.Actor, r.Reason})
			_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
			assert.ErrorIs(t, err, jobstate.ErrNoJob)
		})
	}
	t.Run("the table holds these seven transitions and no other", func(t *testing.T) {
		def, err := NewDefinition()
		require.NoError(t, err)
		want := map[[2]jobstate.State]bool{
			{Created, Queued}: true, {Queued, Running}: true, {Running, Succeeded}: true, {Running, Failed}: true,
			{Running, Retrying}: true, {Retrying, Queued}: true, {Queued, Failed}: true,
		}
		got := map[[2]jobstate.State]bool{}
		for _, r := range def.Rules() {
			for _, f := range r.From {
				got[[2]jobstate.State{f, r.To}] = true
			}
		}
		assert.Equal(t, want, got)
	})
}

// refusedByTable checks that no rule moves a job from from to to: no rule
// says so, no event steps a job in from into to, and a forged history
// making the move does not replay.
func refusedByTable(t *testing.T, h *harness, job jobstate.Job, to jobstate.State) {
	t.Helper()
	from := job.State
	for _, r := range h.Def.Rules() {
		for _, f := range r.From {
			assert.False(t, f == from && r.To == to, "rule %s --%s--> %s", f, r.Event, r.To)
		}
	}
	terminal := job.Kind == jobstate.KindTerminal
	hist := h.history(job.ID)
	for _, ev := range allEvents {
		next := job
		rec, err := h.Def.Step(h.ctx, &next, jobstate.Input{Event: ev, Now: h.Clock.Now()})
		switch {
		case terminal:
			assert.ErrorIs(t, err, jobstate.ErrTerminal, "event %s", ev)
		case err != nil:
			assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "event %s", ev)
		default:
			assert.NotEqual(t, to, rec.To, "event %s", ev)
		}
		forged := append(append([]jobstate.Transition(nil), hist...),
			jobstate.Transition{JobID: job.ID, Version: job.Version + 1, From: from, Event: ev, To: to})
		_, err = h.Def.Replay(forged)
		if terminal {
			assert.ErrorIs(t, err, jobstate.ErrTerminal, "replay with event %s", ev)
		} else {
			assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "replay with event %s", ev)
		}
	}
}

// TestInvalidTransitions replays the seed's "Invalid Transitions": each is
// absent from the table, and the engine refuses every way of making it with
// a typed error, leaving the stored job unchanged.
func TestInvalidTransitions(t *testing.T) {
	t.Run("QUEUED → CREATED (direct state reversion)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Queued)
		before := h.snapshot(j.ID)
		refusedByTable(t, h, j, Created)
		_, err := h.Submit(h.ctx, j.ID, "alice")
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		var te *jobstate.TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, Queued, te.From)
		for _, r := range h.Def.Rules() {
			assert.NotEqual(t, Created, r.To, "CREATED is entered by creation only")
		}
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("SUCCEEDED → QUEUED (backward progression)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Succeeded)
		before := h.snapshot(j.ID)
		refusedByTable(t, h, j, Queued)
		_, err := h.Submit(h.ctx, j.ID, "alice")
		assert.ErrorIs(t, err, jobstate.ErrTerminal)
		h.Clock.Advance(time.Hour)
		h.sweep()
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("transitions from terminal states", func(t *testing.T) {
		for _, s := range []jobstate.State{Succeeded, Failed} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				j, _ := h.reach(s)
				before := h.snapshot(j.ID)
				for _, to := range []jobstate.State{Created, Queued, Running, Retrying, Succeeded, Failed} {
					refusedByTable(t, h, j, to)
				}
				for _, ev := range []jobstate.Event{EventSubmit, jobstate.EventCancel, "reopen", "cleanup"} {
					_, err := h.Eng.Fire(h.ctx, j.ID, ev, jobstate.Call{Actor: "alice"})
					assert.ErrorIs(t, err, jobstate.ErrTerminal, "event %s", ev)
				}
				_, err := h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
				assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
				execs := before.Execs
				require.Len(t, execs, 1)
				stale := jobstate.Lease{JobID: j.ID, ExecID: execs[0].ID, Token: execs[0].Attempt}
				_, err = h.Eng.Fail(h.ctx, stale, ErrTimeout)
				assert.Error(t, err, "the finished attempt cannot report again")
				h.Clock.Advance(time.Hour)
				h.sweep()
				assert.Equal(t, before, h.snapshot(j.ID))
			})
		}
	})
	t.Run("RUNNING → QUEUED (without retry)", func(t *testing.T) {
		h := newHarness(t)
		j, l := h.reach(Running)
		before := h.snapshot(j.ID)
		refusedByTable(t, h, j, Queued)
		_, err := h.Submit(h.ctx, j.ID, "alice")
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		_, err = h.Cancel(h.ctx, j.ID, "ops", "cancellation")
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "a running job is not cancelled back to the queue")
		assert.Equal(t, before, h.snapshot(j.ID))
		// With a retry, the way back to QUEUED is through RETRYING, and
		// only after the delay.
		got := h.fail(l, ErrTimeout)
		assert.Equal(t, Retrying, got.State)
		h.Clock.Advance(RetryDelay)
		h.sweep()
		assert.Equal(t, []jobstate.State{Created, Queued, Running, Retrying, Queued}, path(h.history(j.ID)))
	})
	t.Run("CREATED → RUNNING (must go through QUEUED)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Created)
		before := h.snapshot(j.ID)
		refusedByTable(t, h, j, Running)
		next := j
		_, err := h.Def.Step(h.ctx, &next, jobstate.Input{Event: jobstate.EventClaim})
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition)
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "a created job is not in the queue")
		_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "CREATED has no claim rule")
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("lifecycle events cannot be fired by hand", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Queued)
		before := h.snapshot(j.ID)
		for _, ev := range []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry, jobstate.EventRequeue} {
			_, err := h.Eng.Fire(h.ctx, j.ID, ev, jobstate.Call{})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "event %s", ev)
		}
		assert.Equal(t, before, h.snapshot(j.ID))
	})
}

// TestFailureHandling replays the seed's "Failure Handling": each listed
// failure, classified as the seed says.
func TestFailureHandling(t *testing.T) {
	retryable := []struct {
		name string
		err  error
	}{
		{"transient system errors (temporary resource unavailable)", ErrResourceUnavailable},
		{"timeout", ErrTimeout},
		{"deadline exceeded", context.DeadlineExceeded},
		{"queue overload", ErrQueueOverload},
		{"temporary external dependency unavailable", ErrDependencyUnavailable},
		{"wrapped by the worker", fmt.Errorf("ocr stage: %w", ErrQueueOverload)},
	}
	t.Run("Retryable Failures: transition to RETRYING, then back to QUEUED after backoff delay", func(t *testing.T) {
		for _, c := range retryable {
			t.Run(c.name, func(t *testing.T) {
				h := newHarness(t)
				j, l := h.reach(Running)
				got := h.fail(l, c.err)
				assert.Equal(t, Retrying, got.State)
				assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
				assert.Equal(t, c.err.Error(), got.LastError)
				assert.True(t, got.NotBefore.Equal(h.Clock.Now().Add(RetryDelay)))
				h.Clock.Advance(RetryDelay)
				h.sweep()
				assert.Equal(t, Queued, h.get(j.ID).State)
			})
		}
	})
	nonRetryable := []struct {
		name string
		err  error
	}{
		{"invalid input document (corrupted)", ErrCorruptDocument},
		{"invalid input document (unsupported format)", ErrUnsupportedFormat},
		{"job validation failure", ErrValidation},
		{"processing timeout (permanent, not transient)", ErrProcessingTimeout},
		{"configuration error", ErrConfiguration},
		{"resource limits exceeded (quota)", ErrQuotaExceeded},
		{"resource limits exceeded (file size)", ErrFileTooLarge},
		{"resource limits exceeded (complexity)", ErrTooComplex},
		{"wrapped by the worker", fmt.Errorf("parse page 3: %w", ErrCorruptDocument)},
		{"any error the worker marks jobstate.Permanent", jobstate.Permanent(ErrTimeout)},
	}
	t.Run("Non-Retryable Failures: transition directly to FAILED", func(t *testing.T) {
		for _, c := range nonRetryable {
			t.Run(c.name, func(t *testing.T) {
				h := newHarness(t)
				j, l := h.reach(Running)
				got := h.fail(l, c.err)
				assert.Equal(t, Failed, got.State)
				assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
				assert.Equal(t, c.err.Error(), got.LastError)
				assert.Zero(t, got.RetryCount, "no retry attempt")
				assert.Equal(t, []jobstate.State{Created, Queued, Running, Failed}, path(h.history(j.ID)))
			})
		}
	})
	t.Run("an error on neither list is retryable (the library's default)", func(t *testing.T) {
		class, _ := Classify(errors.New("something else"))
		assert.Equal(t, jobstate.ClassNone, class, "the classifier leaves it to the default")
		h := newHarness(t)
		_, l := h.reach(Running)
		got := h.fail(l, errors.New("something else"))
		assert.Equal(t, Retrying, got.State)
		assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)
	})
	t.Run("a processing timeout is permanent, a timeout is not", func(t *testing.T) {
		c1, _ := Classify(ErrProcessingTimeout)
		c2, _ := Classify(ErrTimeout)
		assert.Equal(t, []jobstate.ErrorClass{jobstate.ClassPermanent, jobstate.ClassRetryable}, []jobstate.ErrorClass{c1, c2})
	})
}

// TestRetryPolicy replays the seed's "Retry Policy": the simple max retry
// policy, retry count tracking and the retry transition logic.
func TestRetryPolicy(t *testing.T) {
	t.Run("Maximum Retries: 3", func(t *testing.T) {
		h := newHarness(t)
		assert.Equal(t, 3, h.Def.Policy().Retry.MaxRetries)
		j, _ := h.reach(Created)
		assert.Equal(t, 3, j.MaxRetries)
	})
	t.Run("Backoff Strategy: fixed 1-second delay", func(t *testing.T) {
		h := newHarness(t)
		j, l := h.reach(Running)
		for n := 1; n <= MaxRetries; n++ {
			t.Run(fmt.Sprintf("retry %d", n), func(t *testing.T) {
				h.Clock.Advance(WorkTime)
				failedAt := h.Clock.Now()
				got := h.fail(l, ErrTimeout)
				assert.Equal(t, RetryDelay, got.NotBefore.Sub(failedAt))
				h.Clock.Advance(RetryDelay - time.Nanosecond)
				h.sweep()
				_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
				assert.ErrorIs(t, err, jobstate.ErrNoJob, "no re-queue before the second is up")
				assert.Equal(t, Retrying, h.get(j.ID).State)
				h.Clock.Advance(time.Nanosecond)
				h.sweep()
				c := h.claim("worker-1")
				assert.True(t, c.Job.UpdatedAt.Equal(failedAt.Add(RetryDelay)))
				l = c.Lease
			})
		}
		assert.Equal(t, jobstate.FixedBackoff(time.Second), h.Def.Policy().Retry.Backoff)
	})
	t.Run("Retry Condition: error is classified as retryable AND retry count < max", func(t *testing.T) {
		cases := []struct {
			name    string
			retries int
			err     error
			want    jobstate.State
		}{
			{"retryable, retryCount 0", 0, ErrTimeout, Retrying},
			{"retryable, retryCount 1", 1, ErrTimeout, Retrying},
			{"retryable, retryCount 2", 2, ErrTimeout, Retrying},
			{"retryable, retryCount 3 (not < max)", 3, ErrTimeout, Failed},
			{"non-retryable, retryCount 0", 0, ErrValidation, Failed},
			{"non-retryable, retryCount 2", 2, ErrValidation, Failed},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := newHarness(t)
				_, l := h.reach(Running)
				for i := 0; i < c.retries; i++ {
					h.fail(l, ErrTimeout)
					h.Clock.Advance(RetryDelay)
					h.sweep()
					l = h.claim("worker-1").Lease
				}
				got := h.fail(l, c.err)
				assert.Equal(t, c.want, got.State)
				if c.want == Retrying {
					assert.Equal(t, c.retries+1, got.RetryCount, "retryCount += 1")
				} else {
					assert.Equal(t, c.retries, got.RetryCount, "no retry, no count")
				}
			})
		}
	})
	t.Run("Retry Count Tracking: retryCount, maxRetries, lastError", func(t *testing.T) {
		h := newHarness(t)
		j, l := h.reach(Running)
		assert.Zero(t, j.RetryCount, "0 initially")
		got := h.fail(l, ErrTimeout)
		assert.Equal(t, 1, got.RetryCount)
		assert.Equal(t, "timeout", got.LastError)
		h.Clock.Advance(RetryDelay)
		h.sweep()
		got = h.fail(h.claim("worker-1").Lease, ErrQueueOverload)
		assert.Equal(t, 2, got.RetryCount)
		assert.Equal(t, "queue overload", got.LastError, "the most recent failure")
		assert.Equal(t, MaxRetries, got.MaxRetries)
	})
}

// TestExampleTraces replays the seed's four examples exactly: the states,
// the events, the retry counts and the times on the manual clock, as
// RunTrace (the code main runs) produces them.
func TestExampleTraces(t *testing.T) {
	ms := time.Millisecond
	claim, submit, succeed, retry, requeue, fail := jobstate.EventClaim, EventSubmit, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventRequeue, jobstate.EventFail
	cases := []struct {
		name    string
		records []record
		retries []int // retryCount after each retry
		meta    string
		drawing string
	}{
		{
			name: "Successful Processing",
			records: []record{
				{"", jobstate.EventCreate, Created, 0}, {Created, submit, Queued, 0}, {Queued, claim, Running, 0},
				{Running, succeed, Succeeded, 250 * ms},
			},
			meta: `{"state":"SUCCEEDED","createdAt":"2026-01-05T09:00:00Z","startedAt":"2026-01-05T09:00:00Z","completedAt":"2026-01-05T09:00:00.25Z","retryCount":0,"maxRetries":3,"lastError":null,"errorType":null}`,
			drawing: `+0.000s  create   CREATED
+0.000s  submit   → QUEUED
+0.000s  claim      → RUNNING
+0.250s  succeed      → SUCCEEDED ✓
`,
		},
		{
			name: "Failure with Successful Retry",
			records: []record{
				{"", jobstate.EventCreate, Created, 0}, {Created, submit, Queued, 0}, {Queued, claim, Running, 0},
				{Running, retry, Retrying, 250 * ms}, {Retrying, requeue, Queued, 1250 * ms}, {Queued, claim, Running, 1250 * ms},
				{Running, succeed, Succeeded, 1500 * ms},
			},
			retries: []int{1},
			meta:    `{"state":"SUCCEEDED","createdAt":"2026-01-05T09:00:00Z","startedAt":"2026-01-05T09:00:00Z","completedAt":"2026-01-05T09:00:01.5Z","retryCount":1,"maxRetries":3,"lastError":null,"errorType":null}`,
			drawing: `+0.000s  create   CREATED
+0.000s  submit   → QUEUED
+0.000s  claim      → RUNNING (transient error: timeout)
+0.250s  retry        → RETRYING (retryCount = 1)
+1.250s  requeue        → QUEUED (after 1s)
+1.250s  claim            → RUNNING (retry attempt 1)
+1.500s  succeed            → SUCCEEDED ✓
`,
		},
		{
			name: "Failure Exhausting Retries",
			records: []record{
				{"", jobstate.EventCreate, Created, 0}, {Created, submit, Queued, 0}, {Queued, claim, Running, 0},
				{Running, retry, Retrying, 250 * ms}, {Retrying, requeue, Queued, 1250 * ms}, {Queued, claim, Running, 1250 * ms},
				{Running, retry, Retrying, 1500 * ms}, {Retrying, requeue, Queued, 2500 * ms}, {Queued, claim, Running, 2500 * ms},
				{Running, retry, Retrying, 2750 * ms}, {Retrying, requeue, Queued, 3750 * ms}, {Queued, claim, Running, 3750 * ms},
				{Running, fail, Failed, 4000 * ms},
			},
			retries: []int{1, 2, 3},
			meta:    `{"state":"FAILED","createdAt":"2026-01-05T09:00:00Z","startedAt":"2026-01-05T09:00:00Z","completedAt":"2026-01-05T09:00:04Z","retryCount":3,"maxRetries":3,"lastError":"temporary unavailable","errorType":"RETRYABLE"}`,
			drawing: `+0.000s  create   CREATED
+0.000s  submit   → QUEUED
+0.000s  claim      → RUNNING (transient error: temporary unavailable)
+0.250s  retry        → RETRYING (retryCount = 1)
+1.250s  requeue        → QUEUED (after 1s)
+1.250s  claim            → RUNNING (retry attempt 1, transient error: temporary unavailable)
+1.500s  retry              → RETRYING (retryCount = 2)
+2.500s  requeue              → QUEUED (after 1s)
+2.500s  claim                  → RUNNING (retry attempt 2, transient error: temporary unavailable)
+2.750s  retry                    → RETRYING (retryCount = 3)
+3.750s  requeue                    → QUEUED (after 1s)
+3.750s  claim                        → RUNNING (retry attempt 3, transient error: temporary unavailable, but retryCount >= maxRetries)
+4.000s  fail                           → FAILED ✗ (exhausted retries)
`,
		},
		{
			name: "Non-Retryable Failure",
			records: []record{
				{"", jobstate.EventCreate, Created, 0}, {Created, submit, Queued, 0}, {Queued, claim, Running, 0},
				{Running, fail, Failed, 250 * ms},
			},
			meta: `{"state":"FAILED","createdAt":"2026-01-05T09:00:00Z","startedAt":"2026-01-05T09:00:00Z","completedAt":"2026-01-05T09:00:00.25Z","retryCount":0,"maxRetries":3,"lastError":"invalid document format","errorType":"TERMINAL"}`,
			drawing: `+0.000s  create   CREATED
+0.000s  submit   → QUEUED
+0.000s  claim      → RUNNING (invalid document format)
+0.250s  fail         → FAILED ✗ (non-retryable, no retry attempt)
`,
		},
	}
	require.Len(t, Traces, len(cases))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := Traces[i]
			require.Equal(t, c.name, tr.Name)
			h := newHarness(t)
			var retries []int
			// obs notes the retry count each retry leaves.
			obs := func(_ context.Context, j jobstate.Job, tr jobstate.Transition) {
				if tr.Event == jobstate.EventRetry {
					retries = append(retries, j.RetryCount)
				}
			}
			eng, err := jobstate.New(h.Store, jobstate.WithMachines(h.Def), jobstate.WithClock(h.Clock), jobstate.WithObserver(obs))
			require.NoError(t, err)
			h.Eng = eng
			job, hist, err := RunTrace(h.ctx, h.App, tr)
			require.NoError(t, err)
			assert.Equal(t, c.records, records(hist))
			assert.Equal(t, c.retries, retries, "retryCount at each retry")
			assert.Equal(t, len(tr.Attempts), job.Attempt)
			st, err := h.Def.Replay(hist)
			require.NoError(t, err)
			assert.Equal(t, job.State, st)
			meta, err := json.Marshal(MetadataOf(job))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf(`{"jobId":"%s",`, job.ID)+c.meta[1:], string(meta))
			assert.Equal(t, c.drawing, RenderTrace(job, hist))
		})
	}
}

// TestMetadata replays the seed's "Job Metadata", field by field.
func TestMetadata(t *testing.T) {
	// run drives one job through a retry to success, collecting its
	// metadata in every state it passes through.
	run := func(t *testing.T) (*harness, []Metadata) {
		h := newHarness(t)
		var metas []Metadata
		// snap notes the stored job's metadata.
		snap := func(j jobstate.Job) { metas = append(metas, MetadataOf(h.get(j.ID))) }
		j, err := h.CreateJob(h.ctx, Document{Name: "a.pdf"}, "alice")
		require.NoError(t, err)
		snap(j) // CREATED
		h.Clock.Advance(time.Second)
		j, err = h.Submit(h.ctx, j.ID, "alice")
		require.NoError(t, err)
		snap(j) // QUEUED
		h.Clock.Advance(time.Second)
		c := h.claim("worker-1")
		snap(c.Job) // RUNNING
		h.Clock.Advance(time.Second)
		snap(h.fail(c.Lease, ErrTimeout)) // RETRYING
		h.Clock.Advance(RetryDelay)
		h.sweep()
		snap(j) // QUEUED again
		h.Clock.Advance(time.Second)
		c = h.claim("worker-1")
		snap(c.Job) // RUNNING again
		h.Clock.Advance(time.Second)
		done, err := h.Eng.Succeed(h.ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
		require.NoError(t, err)
		snap(done) // SUCCEEDED
		return h, metas
	}
	states := []jobstate.State{Created, Queued, Running, Retrying, Queued, Running, Succeeded}
	t.Run("jobId: UUID, immutable", func(t *testing.T) {
		_, metas := run(t)
		for _, m := range metas {
			assert.Equal(t, metas[0].JobID, m.JobID)
		}
		assert.Equal(t, uuid.Version(7), metas[0].JobID.Version())
	})
	t.Run("state: current lifecycle state", func(t *testing.T) {
		_, metas := run(t)
		var got []jobstate.State
		for _, m := range metas {
			got = append(got, m.State)
		}
		assert.Equal(t, states, got)
	})
	t.Run("createdAt: job creation time, immutable", func(t *testing.T) {
		_, metas := run(t)
		for _, m := range metas {
			assert.True(t, m.CreatedAt.Equal(epoch))
		}
	})
	t.Run("startedAt: when processing began, null until RUNNING", func(t *testing.T) {
		_, metas := run(t)
		assert.Nil(t, metas[0].StartedAt)
		assert.Nil(t, metas[1].StartedAt)
		for _, m := range metas[2:] {
			require.NotNil(t, m.StartedAt)
			assert.True(t, m.StartedAt.Equal(epoch.Add(2*time.Second)), "the first time processing began")
		}
	})
	t.Run("completedAt: when the job reached a terminal state, null until SUCCEEDED/FAILED", func(t *testing.T) {
		_, metas := run(t)
		for _, m := range metas[:len(metas)-1] {
			assert.Nil(t, m.CompletedAt, "%s", m.State)
		}
		end := metas[len(metas)-1]
		require.NotNil(t, end.CompletedAt)
		assert.True(t, end.CompletedAt.Equal(epoch.Add(6*time.Second)))
	})
	t.Run("retryCount: number of retry attempts (0–3)", func(t *testing.T) {
		_, metas := run(t)
		var got []int
		for _, m := range metas {
			got = append(got, m.RetryCount)
		}
		assert.Equal(t, []int{0, 0, 0, 1, 1, 1, 1}, got)
	})
	t.Run("maxRetries: always 3", func(t *testing.T) {
		_, metas := run(t)
		for _, m := range metas {
			assert.Equal(t, 3, m.MaxRetries)
		}
	})
	t.Run("lastError: most recent error message, null on success", func(t *testing.T) {
		_, metas := run(t)
		assert.Nil(t, metas[2].LastError)
		require.NotNil(t, metas[3].LastError)
		assert.Equal(t, "timeout", *metas[3].LastError)
		assert.Nil(t, metas[6].LastError, "null on success")
	})
	t.Run("errorType: RETRYABLE or TERMINAL, null on success", func(t *testing.T) {
		_, metas := run(t)
		require.NotNil(t, metas[3].ErrorType)
		assert.Equal(t, ErrorTypeRetryable, *metas[3].ErrorType)
		assert.Nil(t, metas[6].ErrorType, "null on success")
		h := newHarness(t)
		_, l := h.reach(Running)
		m := MetadataOf(h.fail(l, ErrConfiguration))
		require.NotNil(t, m.ErrorType)
		assert.Equal(t, ErrorTypeTerminal, *m.ErrorType)
	})
	t.Run("the fields carry the seed's names", func(t *testing.T) {
		_, metas := run(t)
		b, err := json.Marshal(metas[0])
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(b, &fields))
		var names []string
		for k := range fields {
			names = append(names, k)
		}
		assert.ElementsMatch(t, []string{"jobId", "state", "createdAt", "startedAt", "completedAt", "retryCount", "maxRetries", "lastError", "errorType"}, names)
	})
}

// TestGuarantees replays the seed's "Guarantees".
func TestGuarantees(t *testing.T) {
	t.Run("No duplicate processing: a RUNNING job is assigned to no other worker until it fails and retries", func(t *testing.T) {
		h := newHarness(t)
		j, l := h.reach(Running)
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "worker-2"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
		_, err = h.Eng.ClaimJob(h.ctx, j.ID, jobstate.ClaimRequest{Worker: "worker-2"})
		assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
		h.fail(l, ErrTimeout)
		h.Clock.Advance(RetryDelay)
		h.sweep()
		c := h.claim("worker-2")
		assert.Equal(t, j.ID, c.Job.ID)
		assert.Equal(t, 2, c.Lease.Token, "a new attempt, fenced from the first")
	})
	t.Run("Bounded retries: at most 3 automatic retry attempts", func(t *testing.T) {
		h := newHarness(t)
		job, hist, err := RunTrace(h.ctx, h.App, Trace{"always failing", Document{"x.pdf"}, []error{ErrTimeout}})
		require.NoError(t, err)
		assert.Equal(t, Failed, job.State)
		assert.Equal(t, MaxRetries+1, job.Attempt)
		n := 0
		for _, r := range hist {
			if r.Event == jobstate.EventRetry {
				n++
			}
		}
		assert.Equal(t, MaxRetries, n)
	})
	t.Run("Terminal finality: SUCCEEDED and FAILED are permanent", func(t *testing.T) {
		for _, s := range []jobstate.State{Succeeded, Failed} {
			h := newHarness(t)
			j, _ := h.reach(s)
			for _, ev := range []jobstate.Event{EventSubmit, jobstate.EventCancel} {
				_, err := h.Eng.Fire(h.ctx, j.ID, ev, jobstate.Call{})
				assert.ErrorIs(t, err, jobstate.ErrTerminal)
			}
			assert.Equal(t, s, h.get(j.ID).State)
		}
	})
	t.Run("No orphaned jobs: a job whose worker vanishes still reaches a terminal state", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Running)
		for i := 0; i < MaxRetries+1; i++ {
			h.Clock.Advance(LeaseTTL) // the worker died; its lease lapses
			h.sweep()
			if got := h.get(j.ID); got.Terminal() {
				break
			}
			h.Clock.Advance(RetryDelay)
			h.sweep()
			h.claim(fmt.Sprintf("worker-%d", i+2)) // and so does every next one
		}
		got := h.get(j.ID)
		assert.Equal(t, Failed, got.State)
		assert.Equal(t, "lease expired", got.LastError)
		assert.Equal(t, MaxRetries, got.RetryCount)
	})
	t.Run("Jobs progress forward (never backward except retry restart)", func(t *testing.T) {
		h := newHarness(t)
		_, hist, err := RunTrace(h.ctx, h.App, Traces[2])
		require.NoError(t, err)
		for _, r := range hist[2:] {
			if r.To == Queued {
				assert.Equal(t, Retrying, r.From, "back to QUEUED only from RETRYING")
			}
		}
	})
	t.Run("State transitions are atomic: a refused or failed operation writes nothing", func(t *testing.T) {
		h := newHarness(t)
		j, l := h.reach(Running)
		before := h.snapshot(j.ID)
		boom := errors.New("output store down")
		_, err := h.Eng.Succeed(h.ctx, l, jobstate.CommitInput{Result: []byte("ok"), Effect: func(context.Context, jobstate.Job) error { return boom }})
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, before, h.snapshot(j.ID))
	})
	t.Run("Retry backoff prevents immediate re-queue storm", func(t *testing.T) {
		h := newHarness(t)
		var ids []uuid.UUID
		for i := 0; i < 50; i++ {
			j, err := h.CreateJob(h.ctx, Document{Name: fmt.Sprintf("%d.pdf", i)}, "alice")
			require.NoError(t, err)
			_, err = h.Submit(h.ctx, j.ID, "alice")
			require.NoError(t, err)
			ids = append(ids, j.ID)
		}
		for range ids {
			h.fail(h.claim("worker-1").Lease, ErrQueueOverload)
		}
		h.Clock.Advance(RetryDelay - time.Nanosecond)
		h.sweep()
		_, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "worker-1"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob, "none back before the delay")
		h.Clock.Advance(time.Nanosecond)
		assert.Equal(t, len(ids), h.sweep().Requeued)
	})
}

// TestMainPrintsTraces runs the demonstration and checks that it prints the
// four traces.
func TestMainPrintsTraces(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for i, tr := range Traces {
		assert.Contains(t, s, fmt.Sprintf("%d. %s (%s)", i+1, tr.Name, tr.Document.Name))
	}
	for _, want := range []string{
		"+1.250s  requeue        → QUEUED (after 1s)",
		"+4.000s  fail                           → FAILED ✗ (exhausted retries)",
		"+0.250s  fail         → FAILED ✗ (non-retryable, no retry attempt)",
		`"errorType": "TERMINAL"`,
		`"lastError": "temporary unavailable"`,
	} {
		assert.Contains(t, s, want)
	}
}

// TestDiagramIsCurrent compares the machine's Mermaid diagram with the
// ```mermaid block of docs/examples/docproc.md; -update rewrites the block.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := NewDefinition()
	require.NoError(t, err)
	doccheck.Diagram(t, "../../docs/examples/docproc.md", def, *update)
}
