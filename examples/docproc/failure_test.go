package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestFailureHandling replays the lifecycle's "Failure Handling": each listed
// failure, classified as the lifecycle says.
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

// TestRetryPolicy replays the lifecycle's "Retry Policy": the simple max retry
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

// TestExampleTraces replays the lifecycle's four examples exactly: the states,
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
