package enginesuite

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
	"github.com/jobstate/jobstate/internal/require"
)

// testDocProcTraces replays the four example traces of document processing
// on its literal machine and a fake clock, with retry counts, error classes
// (the lifecycle's classifier) and the 1 s backoff.
func testDocProcTraces(t *testing.T, newStore NewStore) {
	run := func(t *testing.T, outcomes []error) (*Fixture, jobstate.Job) {
		f := NewFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
		j := f.Create(docproc.Name, jobstate.NewJob{Payload: []byte("doc")})
		f.Fire(j.ID, docproc.Submit, "user")
		for i, outcome := range outcomes {
			c := f.Claim(docproc.Name, "w")
			assert.Equal(t, docproc.Running, c.Job.State)
			assert.False(t, c.Job.StartedAt.IsZero())
			if outcome == nil {
				_, err := f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
				require.NoError(t, err)
				break
			}
			got, err := f.Eng.Fail(f.Ctx, c.Lease, outcome)
			require.NoError(t, err)
			if got.Terminal() {
				require.Equal(t, len(outcomes)-1, i, "terminal before the trace's end")
				break
			}
			assert.Equal(t, docproc.Retrying, got.State)
			assert.Equal(t, i+1, got.RetryCount)
			assert.True(t, got.NotBefore.Equal(f.Clock.Now().Add(time.Second)), "fixed 1 s backoff")
			// Not ready before the second has passed.
			f.Clock.Advance(999 * time.Millisecond)
			f.Sweep()
			assert.Equal(t, docproc.Retrying, f.Get(j.ID).State)
			_, err = f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: docproc.Name, Worker: "w"})
			assert.ErrorIs(t, err, jobstate.ErrNoJob)
			f.Clock.Advance(time.Millisecond)
			f.Sweep()
			assert.Equal(t, docproc.Queued, f.Get(j.ID).State)
		}
		return f, f.Get(j.ID)
	}
	const (
		Created, Queued, Running    = docproc.Created, docproc.Queued, docproc.Running
		Retrying, Succeeded, Failed = docproc.Retrying, docproc.Succeeded, docproc.Failed
	)
	cases := []struct {
		name     string
		outcomes []error
		states   []jobstate.State
		final    jobstate.State
		retries  int
		class    jobstate.ErrorClass
	}{
		{"SuccessfulProcessing", []error{nil},
			[]jobstate.State{Created, Queued, Running, Succeeded}, Succeeded, 0, jobstate.ClassNone},
		{"FailureWithSuccessfulRetry", []error{docproc.ErrTimeout, nil},
			[]jobstate.State{Created, Queued, Running, Retrying, Queued, Running, Succeeded}, Succeeded, 1, jobstate.ClassNone},
		{"FailureExhaustingRetries", []error{docproc.ErrResourceUnavailable, docproc.ErrResourceUnavailable, docproc.ErrResourceUnavailable, docproc.ErrResourceUnavailable},
			[]jobstate.State{Created, Queued, Running, Retrying, Queued, Running, Retrying, Queued, Running, Retrying, Queued, Running, Failed}, Failed, 3, jobstate.ClassRetryable},
		{"NonRetryableFailure", []error{docproc.ErrUnsupportedFormat},
			[]jobstate.State{Created, Queued, Running, Failed}, Failed, 0, jobstate.ClassPermanent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, j := run(t, tc.outcomes)
			h, err := f.Eng.History(f.Ctx, j.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.states, path(h))
			assert.Equal(t, tc.final, j.State)
			assert.Equal(t, tc.retries, j.RetryCount)
			assert.Equal(t, tc.class, j.ErrorClass)
			assert.Equal(t, len(tc.outcomes), j.Attempt)
			assert.False(t, j.CompletedAt.IsZero())
			if tc.final == Succeeded {
				assert.Empty(t, j.LastError, "lastError is null on success")
			} else {
				assert.NotEmpty(t, j.LastError)
			}
			def, _ := f.Eng.Machine(docproc.Name)
			st, err := def.Replay(h)
			require.NoError(t, err)
			assert.Equal(t, j.State, st)
		})
	}
}

func testRefusals(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, docproc.Spec(docproc.Plain()), bounty.Spec(bounty.Plain()))
	j := f.Create(docproc.Name, jobstate.NewJob{})
	check := func(err, want error) {
		t.Helper()
		before := f.Snapshot(j.ID)
		require.ErrorIs(t, err, want)
		assert.Equal(t, before, f.Snapshot(j.ID), "a refused operation changes nothing")
	}
	_, err := f.Eng.Fire(f.Ctx, j.ID, "start_processing", jobstate.Call{})
	check(err, jobstate.ErrInvalidTransition)
	var te *jobstate.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, docproc.Created, te.From)
	assert.Equal(t, jobstate.Event("start_processing"), te.Event)

	_, err = f.Eng.Fire(f.Ctx, j.ID, jobstate.EventClaim, jobstate.Call{})
	check(err, jobstate.ErrInvalidArgument)
	_, err = f.Eng.Fire(f.Ctx, j.ID, docproc.Submit, jobstate.Call{IfVersion: 7})
	check(err, jobstate.ErrVersionConflict)
	_, err = f.Eng.Fire(f.Ctx, uuid.New(), docproc.Submit, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	_, err = f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: "nope"})
	assert.ErrorIs(t, err, jobstate.ErrUnknownMachine)

	// Terminal finality.
	f.Fire(j.ID, docproc.Submit, "u")
	f.Fire(j.ID, jobstate.EventCancel, "u")
	for _, ev := range []jobstate.Event{docproc.Submit, jobstate.EventCancel, "anything"} {
		_, err = f.Eng.Fire(f.Ctx, j.ID, ev, jobstate.Call{})
		check(err, jobstate.ErrTerminal)
	}

	// Guard refusals carry the guard's own error.
	b := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	before := f.Snapshot(b.ID)
	_, err = f.Eng.Fire(f.Ctx, b.ID, bounty.Fund, jobstate.Call{Actor: "mallory"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.ErrorIs(t, err, bounty.ErrNotBuyer)
	assert.Equal(t, before, f.Snapshot(b.ID))

	// Lease operations with a made-up lease.
	fake := jobstate.Lease{JobID: b.ID, ExecID: uuid.New(), Token: 1}
	_, err = f.Eng.Heartbeat(f.Ctx, fake)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.Eng.Commit(f.Ctx, fake, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.Eng.Fail(f.Ctx, fake, errors.New("x"))
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.Eng.Fail(f.Ctx, fake, nil)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = f.Eng.ClaimJob(f.Ctx, b.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "an open bounty is not ready")
	_, err = f.Eng.ClaimJob(f.Ctx, b.ID, jobstate.ClaimRequest{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Equal(t, before, f.Snapshot(b.ID))
}

func testObservers(t *testing.T, newStore NewStore) {
	var mu sync.Mutex
	var seen []jobstate.Transition
	obs := jobstate.WithObserver(func(_ context.Context, j jobstate.Job, tr jobstate.Transition) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, tr)
	})
	f := NewFixture(t, newStore, []jobstate.Option{obs}, docproc.Spec(docproc.Plain()))
	j := f.Create(docproc.Name, jobstate.NewJob{})
	f.Fire(j.ID, docproc.Submit, "u")
	c := f.Claim(docproc.Name, "w")
	_, err := f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	_, err = f.Eng.Fire(f.Ctx, j.ID, docproc.Submit, jobstate.Call{})
	require.Error(t, err)
	h, err := f.Eng.History(f.Ctx, j.ID)
	require.NoError(t, err)
	assert.Equal(t, h, seen, "observers see every committed transition, in order, and nothing refused")
}

func testDerived(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	j := f.Create(exactlyonce.Name, jobstate.NewJob{})
	check := func() {
		t.Helper()
		st := f.Snapshot(j.ID)
		require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	}
	check()
	_, err := f.Eng.Fire(f.Ctx, j.ID, jobstate.EventCancel, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "no direct moves of a derived job")
	c := f.Claim(exactlyonce.Name, "w")
	check()
	_, err = f.Eng.Fail(f.Ctx, c.Lease, errors.New("crash"))
	require.NoError(t, err)
	check()
	c = f.Claim(exactlyonce.Name, "w")
	check()
	_, err = f.Eng.Start(f.Ctx, c.Lease)
	require.NoError(t, err)
	check()
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	check()
	_, err = f.Eng.Finish(f.Ctx, c.Lease)
	require.NoError(t, err)
	check()
}

// testRuleEffects: a rule's effect runs inside the move's atomic write,
// once per firing; its error aborts the move.
// testRuleEffects runs image generation's literal machine, whose safety
// rejection writes an audit record.
func testRuleEffects(t *testing.T, newStore NewStore) {
	var audits Counter
	fail := false
	h := imagegen.Plain()
	h.AuditSafeBlock = hook.Effect{Name: "audit SAFE_BLOCK", Func: func(ctx context.Context, j jobstate.Job) error {
		if fail {
			return errors.New("audit log down")
		}
		assert.Equal(t, imagegen.Rejected, j.State, "the effect sees the job as the move leaves it")
		return audits.Effect(ctx, j)
	}}
	f := NewFixture(t, newStore, nil, imagegen.Spec(h))
	j := f.Create(imagegen.Name, jobstate.NewJob{})
	c := f.Claim(imagegen.Name, "w")
	fail = true
	before := f.Snapshot(j.ID)
	_, err := f.Eng.Advance(f.Ctx, c.Lease, imagegen.Reject, jobstate.Call{Reason: "nsfw"})
	if assert.Error(t, err) {
		assert.Equal(t, "audit log down", err.Error())
	}
	assert.Equal(t, before, f.Snapshot(j.ID), "a failed rule effect writes nothing")
	fail = false
	got, err := f.Eng.Advance(f.Ctx, c.Lease, imagegen.Reject, jobstate.Call{Reason: "nsfw"})
	require.NoError(t, err)
	assert.Equal(t, imagegen.Rejected, got.State)
	assert.Equal(t, int64(1), audits.Get())
	st := f.Snapshot(j.ID)
	assert.Equal(t, jobstate.ExecAborted, st.Execs[0].Status, "the rejected execution ends without a commit")
}

func testFiring(t *testing.T, newStore NewStore) {
	var got []jobstate.Firing
	spec := m.QueueSpec()
	for i := range spec.Rules {
		if spec.Rules[i].Event == m.Submit {
			spec.Rules[i].Effect = func(ctx context.Context, j jobstate.Job) error {
				f, ok := jobstate.FiringOf(ctx)
				require.True(t, ok)
				got = append(got, f)
				return nil
			}
		}
	}
	f := NewFixture(t, newStore, nil, spec)
	j := f.Create("queue", jobstate.NewJob{})
	_, err := f.Eng.Fire(f.Ctx, j.ID, m.Submit, jobstate.Call{Actor: "alice", Reason: "ready", Args: 42})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "alice", got[0].Transition.Actor)
	assert.Equal(t, "ready", got[0].Transition.Reason)
	assert.Equal(t, m.Queued, got[0].Transition.To)
	assert.Equal(t, 42, got[0].Args)
	_, ok := jobstate.FiringOf(f.Ctx)
	assert.False(t, ok, "no firing outside a rule effect")
}
