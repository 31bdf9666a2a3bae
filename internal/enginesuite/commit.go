package enginesuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/require"
)

func testHeartbeat(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.Create(docproc.Name, jobstate.NewJob{})
	f.Fire(j.ID, docproc.Submit, "u")
	c := f.Claim(docproc.Name, "w")
	assert.Equal(t, 1, c.Lease.Token)
	assert.True(t, c.Lease.ExpiresAt.Equal(Epoch().Add(30*time.Second)))
	f.Clock.Advance(20 * time.Second)
	l, err := f.Eng.Heartbeat(f.Ctx, c.Lease)
	require.NoError(t, err)
	assert.True(t, l.ExpiresAt.Equal(Epoch().Add(50*time.Second)))
	f.Clock.Advance(20 * time.Second) // past the first expiry, before the renewed one
	r := f.Sweep()
	assert.Zero(t, r.Aborted)
	assert.Equal(t, docproc.Running, f.Get(j.ID).State)
	f.Clock.Advance(10 * time.Second) // exactly at the renewed expiry: expired
	_, err = f.Eng.Heartbeat(f.Ctx, l)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	r = f.Sweep()
	assert.Equal(t, 1, r.Aborted)
	assert.Equal(t, 1, r.Retried)
	got := f.Get(j.ID)
	assert.Equal(t, docproc.Retrying, got.State, "a lost lease is a retryable failure")
	assert.Equal(t, 1, got.RetryCount)
	assert.Equal(t, "lease expired", got.LastError)
}

// testExpiredLeaseCannotCommitAfterRerun shows the exactly-once
// lifecycle's duplicate retry (its failure mode FM_001) prevented, on its
// literal machine: worker A stalls past its lease, B re-runs the job and
// commits, A's late commit and finish are refused and change nothing; the
// effect ran once.
func testExpiredLeaseCannotCommitAfterRerun(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	var fx Counter
	j := f.Create(exactlyonce.Name, jobstate.NewJob{})
	a := f.Claim(exactlyonce.Name, "A")
	_, err := f.Eng.Start(f.Ctx, a.Lease)
	require.NoError(t, err)
	f.Clock.Advance(11 * time.Second) // A stalls past its 10 s lease
	r := f.Sweep()
	assert.Equal(t, 1, r.Aborted)
	assert.Equal(t, exactlyonce.Pending, f.Get(j.ID).State, "lease expired and nothing committed: back to PENDING")
	b := f.Claim(exactlyonce.Name, "B")
	assert.Equal(t, 2, b.Lease.Token, "a new fencing token")
	_, err = f.Eng.Start(f.Ctx, b.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Commit(f.Ctx, b.Lease, jobstate.CommitInput{Effect: fx.Effect})
	require.NoError(t, err)

	before := f.Snapshot(j.ID)
	_, err = f.Eng.Commit(f.Ctx, a.Lease, jobstate.CommitInput{Effect: fx.Effect})
	var ce *jobstate.CommitError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, b.Lease.ExecID, ce.Winner, "the refusal names the winner")
	_, err = f.Eng.Finish(f.Ctx, a.Lease)
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	_, err = f.Eng.Heartbeat(f.Ctx, a.Lease)
	assert.Error(t, err)
	assert.Equal(t, before, f.Snapshot(j.ID))

	done, err := f.Eng.Finish(f.Ctx, b.Lease)
	require.NoError(t, err)
	assert.Equal(t, exactlyonce.Succeeded, done.State)
	assert.Equal(t, int64(1), fx.Get(), "the effect ran exactly once")
	st := f.Snapshot(j.ID)
	require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	require.Len(t, st.Execs, 2)
	assert.Equal(t, jobstate.ExecAborted, st.Execs[0].Status)
	assert.Equal(t, jobstate.ExecDone, st.Execs[1].Status)
}

// testCrashBeforeCommit: a worker dies mid-job (its context cancelled, its
// goroutine abandoned) before committing; recovery retries safely.
func testCrashBeforeCommit(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	var fx Counter
	j := f.Create(exactlyonce.Name, jobstate.NewJob{})
	wctx, kill := context.WithCancel(f.Ctx)
	c := f.Claim(exactlyonce.Name, "A")
	started := make(chan struct{})
	stopped := make(chan struct{})
	go func() { // the worker: starts, then blocks until killed
		defer close(stopped)
		if _, err := f.Eng.Start(wctx, c.Lease); err != nil {
			t.Error(err)
		}
		close(started)
		<-wctx.Done()
		// A dying worker's last write, with a dead context, changes nothing.
		if _, err := f.Eng.Commit(wctx, c.Lease, jobstate.CommitInput{Effect: fx.Effect}); err == nil {
			t.Error("commit with a cancelled context succeeded")
		}
	}()
	<-started
	kill()
	<-stopped
	f.Clock.Advance(10 * time.Second)
	f.Sweep()
	assert.Equal(t, exactlyonce.Pending, f.Get(j.ID).State)
	b := f.Claim(exactlyonce.Name, "B")
	_, err := f.Eng.Start(f.Ctx, b.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Succeed(f.Ctx, b.Lease, jobstate.CommitInput{Effect: fx.Effect})
	require.NoError(t, err)
	assert.Equal(t, int64(1), fx.Get())
	assert.Equal(t, exactlyonce.Succeeded, f.Get(j.ID).State)
}

// testCrashAfterCommit: the worker commits and dies before finishing; the
// sweep finalizes the job without applying the effect again.
func testCrashAfterCommit(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	var fx Counter
	j := f.Create(exactlyonce.Name, jobstate.NewJob{})
	c := f.Claim(exactlyonce.Name, "A")
	_, err := f.Eng.Start(f.Ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: fx.Effect, Result: []byte("url")})
	require.NoError(t, err)
	// The worker dies here.
	f.Clock.Advance(9 * time.Second)
	assert.Zero(t, f.Sweep().Finalized, "nothing to do while the lease lives")
	f.Clock.Advance(time.Second)
	r := f.Sweep()
	assert.Equal(t, 1, r.Finalized)
	got := f.Get(j.ID)
	assert.Equal(t, exactlyonce.Succeeded, got.State)
	assert.Equal(t, []byte("url"), got.Result)
	assert.Equal(t, c.Lease.ExecID, got.Committed)
	assert.Equal(t, int64(1), fx.Get(), "recovery does not re-apply the effect")
	st := f.Snapshot(j.ID)
	assert.Equal(t, jobstate.ExecDone, st.Execs[0].Status)
	require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	_, err = f.Eng.Finish(f.Ctx, c.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "the late worker learns it is finished")
}

func testDuplicateCommit(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	var fx Counter
	f.Create(exactlyonce.Name, jobstate.NewJob{})
	c := f.Claim(exactlyonce.Name, "A")
	_, err := f.Eng.Start(f.Ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: fx.Effect})
	require.NoError(t, err)
	before := f.Snapshot(c.Job.ID)
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: fx.Effect})
	var ce *jobstate.CommitError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, c.Lease.ExecID, ce.Winner)
	_, err = f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{Effect: fx.Effect})
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	_, err = f.Eng.Fail(f.Ctx, c.Lease, errors.New("late failure"))
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted, "a committed execution cannot fail")
	assert.Equal(t, before, f.Snapshot(c.Job.ID))
	assert.Equal(t, int64(1), fx.Get())
}

func testCommitEffectError(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.Create(docproc.Name, jobstate.NewJob{})
	f.Fire(j.ID, docproc.Submit, "u")
	c := f.Claim(docproc.Name, "w")
	before := f.Snapshot(j.ID)
	boom := errors.New("payment provider down")
	_, err := f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error { return boom }})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, before, f.Snapshot(j.ID))
	_, err = f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{})
	assert.NoError(t, err, "the execution may try again")
}

// testConcurrentExecutions: bounty marketplace's several submissions to one
// bounty, on its literal machine, as many at once as it accepts; the first
// to commit wins atomically and the others are discarded.
func testConcurrentExecutions(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, bounty.Spec(bounty.Plain()))
	j := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.Fire(j.ID, bounty.Fund, "buyer")
	var leases []jobstate.Lease
	for i := 0; i < bounty.MaxSubmissionsCap; i++ {
		c, err := f.Eng.ClaimJob(f.Ctx, j.ID, jobstate.ClaimRequest{Worker: fmt.Sprint("w", i)})
		require.NoError(t, err)
		require.Equal(t, bounty.Funded, c.Job.State, "the bounty stays funded while judged")
		leases = append(leases, c.Lease)
	}
	assert.Equal(t, bounty.MaxSubmissionsCap, f.Get(j.ID).Leases)
	_, err := f.Eng.ClaimJob(f.Ctx, j.ID, jobstate.ClaimRequest{Worker: "late"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "at most MaxExecutions live leases")
	_, err = f.Eng.Cancel(f.Ctx, j.ID, jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, bounty.ErrJudging, "cancel refused while judging")

	// One submission fails its judging: only its execution ends.
	got, err := f.Eng.Fail(f.Ctx, leases[0], errors.New("score 40 < 80"))
	require.NoError(t, err)
	assert.Equal(t, bounty.Funded, got.State)
	assert.Equal(t, bounty.MaxSubmissionsCap-1, got.Leases)

	var wg sync.WaitGroup
	results := make([]error, len(leases)-1)
	for i, l := range leases[1:] {
		wg.Add(1)
		go func(i int, l jobstate.Lease) {
			defer wg.Done()
			_, results[i] = f.Eng.Succeed(f.Ctx, l, jobstate.CommitInput{Result: []byte(l.Owner)})
		}(i, l)
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		if err == nil {
			wins++
		} else {
			assert.True(t, errors.Is(err, jobstate.ErrAlreadyCommitted) || errors.Is(err, jobstate.ErrLeaseLost), "loser gets %v", err)
		}
	}
	assert.Equal(t, 1, wins, "exactly one passer wins")
	st := f.Snapshot(j.ID)
	assert.Equal(t, bounty.Resolved, st.Job.State)
	assert.Zero(t, st.Job.Leases)
	done := 0
	for _, x := range st.Execs {
		assert.False(t, x.Status.Live(), "no submission left judging")
		if x.Status == jobstate.ExecDone {
			done++
			assert.Equal(t, []byte(x.Owner), st.Job.Result, "the winner's result is stored")
		}
	}
	assert.Equal(t, 1, done)
}

func testOnceEffect(t *testing.T, newStore NewStore) {
	var refunds Counter
	f := NewFixture(t, newStore, nil, bountySpec(&refunds))
	j := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.Fire(j.ID, bounty.Fund, "buyer")
	_, err := f.Eng.Apply(f.Ctx, j.ID, "refund", jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "no refund while funded")
	_, err = f.Eng.Apply(f.Ctx, j.ID, "nope", jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrUnknownEffect)
	f.Fire(j.ID, jobstate.EventCancel, "buyer")
	_, err = f.Eng.Apply(f.Ctx, j.ID, "refund", jobstate.Call{Actor: "mallory"})
	assert.ErrorIs(t, err, bounty.ErrNotBuyer)

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Eng.Apply(f.Ctx, j.ID, "refund", jobstate.Call{Actor: "buyer"})
			if err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !errors.Is(err, jobstate.ErrEffectApplied) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, ok)
	assert.Equal(t, int64(1), refunds.Get(), "refund exactly once")
	st := f.Snapshot(j.ID)
	assert.Equal(t, bounty.Cancelled, st.Job.State, "a refund is not a state")
	require.Len(t, st.Effects, 1)
	assert.Equal(t, "buyer", st.Effects[0].Actor)
}

func testRequireStart(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, exactlyonce.Spec())
	f.Create(exactlyonce.Name, jobstate.NewJob{})
	c := f.Claim(exactlyonce.Name, "w")
	before := f.Snapshot(c.Job.ID)
	_, err := f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "LEASED → COMMITTED is refused")
	assert.Equal(t, before, f.Snapshot(c.Job.ID))
	_, err = f.Eng.Start(f.Ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Start(f.Ctx, c.Lease)
	require.NoError(t, err, "a repeated start changes nothing and succeeds")
	_, err = f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{})
	assert.NoError(t, err)
}

// testCommittedOnlyFinishes: a committed job leaves its active states only
// by finishing, even through a user rule into a success state.
func testCommittedOnlyFinishes(t *testing.T, newStore NewStore) {
	spec := m.TransferSpec()
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.TStreaming}, Event: "ack", To: m.TDelivered})
	f := NewFixture(t, newStore, nil, spec)
	j := f.Create("transfer", jobstate.NewJob{})
	c := f.Claim("transfer", "w")
	for _, ev := range []jobstate.Event{m.StartDownload, m.Stream} {
		_, err := f.Eng.Advance(f.Ctx, c.Lease, ev, jobstate.Call{})
		require.NoError(t, err)
	}
	_, err := f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	before := f.Snapshot(j.ID)
	_, err = f.Eng.Advance(f.Ctx, c.Lease, "ack", jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	assert.Equal(t, before, f.Snapshot(j.ID))
	got, err := f.Eng.Finish(f.Ctx, c.Lease)
	require.NoError(t, err)
	assert.Equal(t, m.TDelivered, got.State)
}

func testIfVersion(t *testing.T, newStore NewStore) {
	var refunds Counter
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()), bountySpec(&refunds))
	j := f.Create(delivery.Name, jobstate.NewJob{})
	c := f.Claim(delivery.Name, "w")
	_, err := f.Eng.Advance(f.Ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser, IfVersion: c.Job.Version + 7})
	assert.ErrorIs(t, err, jobstate.ErrVersionConflict)
	_, err = f.Eng.Advance(f.Ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser, IfVersion: f.Get(j.ID).Version})
	assert.NoError(t, err)
	b := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	got := f.Fire(b.ID, jobstate.EventCancel, "buyer")
	_, err = f.Eng.Apply(f.Ctx, b.ID, "refund", jobstate.Call{Actor: "buyer", IfVersion: got.Version - 1})
	assert.ErrorIs(t, err, jobstate.ErrVersionConflict)
	assert.Zero(t, refunds.Get())
	_, err = f.Eng.Apply(f.Ctx, b.ID, "refund", jobstate.Call{Actor: "buyer", IfVersion: got.Version})
	assert.NoError(t, err)
}
