package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestMetadata replays the lifecycle's "Job Metadata", field by field.
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
	t.Run("the fields carry the lifecycle's names", func(t *testing.T) {
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

// TestGuarantees replays the lifecycle's "Guarantees".
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
			for _, ev := range []jobstate.Event{EventSubmit, EventResourceExhaustion, jobstate.EventCancel} {
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
