// Package uitest holds the machine and the jobs the ui package's tests
// and browser tests serve: a queue machine with a redrivable FAILED
// state, and jobs in each of its states, hostile ones among them.
package uitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// MachineName is the name of Machine's definition.
const MachineName = "queue"

// Machine returns the test machine: QUEUED → RUNNING → SUCCEEDED, with
// retries through RETRYING, permanent failures to FAILED (which an
// operator may redrive) and cancellation from every unfinished state.
func Machine() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(jobstate.Spec{
		Name: MachineName,
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: "CANCELLED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
			{From: []jobstate.State{"QUEUED", "RUNNING", "RETRYING"}, Event: jobstate.EventCancel, To: "CANCELLED"},
		},
		Policy: jobstate.Policy{
			Retry:       jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
			RedriveFrom: []jobstate.State{"FAILED"},
		},
	})
}

// Hostile strings a page must show as text.
const (
	ScriptPayload = `<script>window.pwned=1</script>`
	ImgPayload    = `"><img src=x onerror="window.pwned=1">`
	HostileOwner  = `</textarea><script>window.pwned=1</script>'"`
)

// Jobs names the jobs Populate made.
type Jobs struct {
	// Queued, Running, Succeeded, Failed are jobs in those states.
	Queued, Running, Succeeded, Failed uuid.UUID
	// Script and Img carry ScriptPayload and ImgPayload as payload and
	// error; Binary a payload that is not UTF-8 (with a NUL); Big a
	// payload of 1 MiB.
	Script, Img, Binary, Big uuid.UUID
	// Plain are the n plain jobs, in creation order.
	Plain []uuid.UUID
}

// Populate creates, through eng, the named jobs and then n plain QUEUED jobs
// owned by "owner-<i mod 3>". Between creations it calls tick, which
// should advance the engine's clock so that creation times differ.
func Populate(ctx context.Context, eng *jobstate.Engine, n int, tick func()) (Jobs, error) {
	var s Jobs
	create := func(nj jobstate.NewJob) (uuid.UUID, error) {
		nj.Machine = MachineName
		c, err := eng.Create(ctx, nj)
		tick()
		if err != nil {
			return uuid.Nil, fmt.Errorf("uitest: create: %w", err)
		}
		return c.Job.ID, nil
	}
	claim := func(id uuid.UUID) (jobstate.Lease, error) {
		c, err := eng.ClaimJob(ctx, id, jobstate.ClaimRequest{Worker: "worker-1"})
		tick()
		if err != nil {
			return jobstate.Lease{}, fmt.Errorf("uitest: claim: %w", err)
		}
		return c.Lease, nil
	}
	var err error
	if s.Queued, err = create(jobstate.NewJob{Payload: []byte(`{"task":"queued"}`), Owner: "alice", Key: "order-1"}); err != nil {
		return s, err
	}
	if s.Running, err = create(jobstate.NewJob{Payload: []byte(`{"task":"running"}`), Owner: "bob"}); err != nil {
		return s, err
	}
	if _, err = claim(s.Running); err != nil {
		return s, err
	}
	if s.Succeeded, err = create(jobstate.NewJob{Payload: []byte(`{"task":"done"}`), Owner: "alice"}); err != nil {
		return s, err
	}
	l, err := claim(s.Succeeded)
	if err != nil {
		return s, err
	}
	if _, err = eng.Succeed(ctx, l, jobstate.CommitInput{Result: []byte(`{"ok":true}`)}); err != nil {
		return s, fmt.Errorf("uitest: succeed: %w", err)
	}
	tick()
	if s.Failed, err = create(jobstate.NewJob{Payload: []byte(`{"task":"fails"}`), Owner: "carol"}); err != nil {
		return s, err
	}
	if l, err = claim(s.Failed); err != nil {
		return s, err
	}
	if _, err = eng.Fail(ctx, l, jobstate.Permanent(errors.New("upstream refused: "+ScriptPayload))); err != nil {
		return s, fmt.Errorf("uitest: fail: %w", err)
	}
	tick()
	if s.Script, err = create(jobstate.NewJob{Payload: []byte(ScriptPayload), Owner: HostileOwner, Key: ScriptPayload}); err != nil {
		return s, err
	}
	if s.Img, err = create(jobstate.NewJob{Payload: []byte(ImgPayload), Owner: "mallory"}); err != nil {
		return s, err
	}
	if l, err = claim(s.Img); err != nil {
		return s, err
	}
	if _, err = eng.Fail(ctx, l, jobstate.Permanent(errors.New(ImgPayload))); err != nil {
		return s, fmt.Errorf("uitest: fail: %w", err)
	}
	tick()
	if s.Binary, err = create(jobstate.NewJob{Payload: []byte{0xff, 0xfe, 0, '<', 's', '>', 0x80}, Owner: "mallory"}); err != nil {
		return s, err
	}
	if s.Big, err = create(jobstate.NewJob{Payload: bytes.Repeat([]byte("<b>x</b>"), 1<<17), Owner: "mallory"}); err != nil {
		return s, err
	}
	for i := 0; i < n; i++ {
		id, err := create(jobstate.NewJob{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Owner: fmt.Sprintf("owner-%d", i%3)})
		if err != nil {
			return s, err
		}
		s.Plain = append(s.Plain, id)
	}
	return s, nil
}
