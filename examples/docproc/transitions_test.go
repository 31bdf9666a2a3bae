package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestValidTransitions replays the lifecycle's "Valid State Transitions", one
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
		j, _ := h.reach(Queued)
		assert.Equal(t, 1, h.drain(Scripted(h.Clock, []error{nil})))
		h.env.AssertState(j.ID, Succeeded)
		h.env.AssertCommittedOnce(j.ID)
		got := h.get(j.ID)
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
	t.Run("QUEUED → FAILED (trigger: resource exhaustion)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Queued)
		got, err := h.ExhaustResources(h.ctx, j.ID, "ops", "disk full")
		require.NoError(t, err)
		assert.Equal(t, Failed, got.State)
		assert.False(t, got.CompletedAt.IsZero())
		r := last(h, j.ID)
		assert.Equal(t, []any{Queued, EventResourceExhaustion, Failed, "ops", "disk full"}, []any{r.From, r.Event, r.To, r.Actor, r.Reason})
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
	})
	t.Run("resource exhaustion fails a QUEUED job only", func(t *testing.T) {
		for _, s := range []jobstate.State{Created, Running, Retrying} {
			h := newHarness(t)
			j, _ := h.reach(s)
			before := h.snapshot(j.ID)
			_, err := h.ExhaustResources(h.ctx, j.ID, "ops", "disk full")
			assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "from %s", s)
			assert.Equal(t, before, h.snapshot(j.ID))
		}
	})
	t.Run("QUEUED → FAILED (trigger: cancellation)", func(t *testing.T) {
		h := newHarness(t)
		j, _ := h.reach(Queued)
		got, err := h.Cancel(h.ctx, j.ID, "ops", "cancellation")
		require.NoError(t, err)
		assert.Equal(t, Failed, got.State)
		r := last(h, j.ID)
		assert.Equal(t, []any{Queued, jobstate.EventCancel, Failed, "ops", "cancellation"}, []any{r.From, r.Event, r.To, r.Actor, r.Reason})
		_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
		assert.ErrorIs(t, err, jobstate.ErrNoJob)
	})
	t.Run("the table holds these seven transitions, cancellation from every non-terminal state, and no other", func(t *testing.T) {
		def, err := NewDefinition()
		require.NoError(t, err)
		want := map[[2]jobstate.State]bool{
			{Created, Queued}: true, {Queued, Running}: true, {Running, Succeeded}: true, {Running, Failed}: true,
			{Running, Retrying}: true, {Retrying, Queued}: true, {Queued, Failed}: true,
			// cancellation, out of band
			{Created, Failed}: true, {Retrying, Failed}: true,
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

// TestCancellation replays the lifecycle's note on cancellation: an
// out-of-band operation that moves a job to FAILED, from every non-terminal
// state.
func TestCancellation(t *testing.T) {
	last := func(h *harness, id uuid.UUID) jobstate.Transition {
		hist := h.history(id)
		return hist[len(hist)-1]
	}
	for _, s := range []jobstate.State{Created, Queued, Running, Retrying} {
		t.Run("Cancellation: "+string(s)+" → FAILED", func(t *testing.T) {
			h := newHarness(t)
			j, l := h.reach(s)
			got, err := h.Cancel(h.ctx, j.ID, "ops", "cancelled by the user")
			require.NoError(t, err)
			assert.Equal(t, Failed, got.State)
			assert.Equal(t, jobstate.OutcomeFailed, got.Outcome)
			assert.False(t, got.CompletedAt.IsZero())
			assert.Zero(t, got.Leases, "no attempt is left running")
			r := last(h, j.ID)
			assert.Equal(t, []any{s, jobstate.EventCancel, Failed, "ops", "cancelled by the user"}, []any{r.From, r.Event, r.To, r.Actor, r.Reason})
			if s == Running {
				execs := h.snapshot(j.ID).Execs
				assert.Equal(t, jobstate.ExecAborted, execs[len(execs)-1].Status, "the running attempt is aborted")
				before := h.snapshot(j.ID)
				_, err := h.Eng.Succeed(h.ctx, l, jobstate.CommitInput{Result: []byte("late")})
				assert.ErrorIs(t, err, jobstate.ErrCancelled, "the worker learns of the cancellation")
				assert.Equal(t, before, h.snapshot(j.ID), "its late report changes nothing")
			}
			h.Clock.Advance(time.Hour)
			h.sweep()
			_, err = h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: "w"})
			assert.ErrorIs(t, err, jobstate.ErrNoJob, "a cancelled job is never processed again")
			assert.Equal(t, Failed, h.get(j.ID).State)
			_, err = h.Cancel(h.ctx, j.ID, "ops", "again")
			assert.ErrorIs(t, err, jobstate.ErrTerminal)
		})
	}
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

// TestInvalidTransitions replays the lifecycle's "Invalid Transitions": each is
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
				for _, ev := range []jobstate.Event{EventSubmit, EventResourceExhaustion, jobstate.EventCancel, "reopen", "cleanup"} {
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
		_, err = h.ExhaustResources(h.ctx, j.ID, "ops", "disk full")
		assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "no operation takes a running job back to the queue")
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
