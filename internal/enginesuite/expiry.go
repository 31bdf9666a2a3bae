package enginesuite

import (
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/require"
)

// testCancelActive runs the transfer machine with a cancel rule from its
// active states (file delivery allows a cancel from QUEUED only).
func testCancelActive(t *testing.T, newStore NewStore) {
	spec := m.TransferSpec()
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.TClaimed, m.TDownloading, m.TStreaming}, Event: jobstate.EventCancel, To: m.TCancelled})
	f := NewFixture(t, newStore, nil, spec)
	j := f.Create("transfer", jobstate.NewJob{})
	c := f.Claim("transfer", "w")
	_, err := f.Eng.Advance(f.Ctx, c.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	got, err := f.Eng.Cancel(f.Ctx, j.ID, jobstate.Call{Actor: "user"})
	require.NoError(t, err)
	assert.Equal(t, m.TCancelled, got.State)
	assert.Zero(t, got.Leases)
	_, err = f.Eng.Heartbeat(f.Ctx, c.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	assert.ErrorIs(t, err, jobstate.ErrCancelled, "the holder learns of the cancel")
	_, err = f.Eng.Advance(f.Ctx, c.Lease, m.Stream, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrCancelled)
}

func testDeadlines(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()), bounty.Spec(bounty.Plain()))
	j := f.Create(delivery.Name, jobstate.NewJob{TTL: time.Hour})
	assert.True(t, j.Deadline.Equal(Epoch().Add(time.Hour)))
	f.Clock.Advance(time.Hour - time.Nanosecond)
	assert.Zero(t, f.Sweep().Expired)
	f.Clock.Advance(time.Nanosecond)
	assert.Equal(t, 1, f.Sweep().Expired)
	got := f.Get(j.ID)
	assert.Equal(t, delivery.Expired, got.State)
	assert.Equal(t, jobstate.OutcomeExpired, got.Outcome)

	// Lazy expiry on read (bounty marketplace), with judging submissions failed.
	b := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer", Deadline: f.Clock.Now().Add(time.Minute)})
	f.Fire(b.ID, bounty.Fund, "buyer")
	c, err := f.Eng.ClaimJob(f.Ctx, b.ID, jobstate.ClaimRequest{Worker: "w", TTL: time.Hour})
	require.NoError(t, err)
	f.Clock.Advance(time.Minute)
	assert.Equal(t, bounty.Funded, f.Get(b.ID).State, "the store still holds funded")
	read, err := f.Eng.Get(f.Ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, bounty.Expired, read.State, "expired on read")
	st := f.Snapshot(b.ID)
	assert.Equal(t, jobstate.ExecAborted, st.Execs[0].Status)
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
}

// testLazyExpiryEverywhere: on a lazily expiring machine, every operation
// on an overdue job finds it expired, not only Get.
func testLazyExpiryEverywhere(t *testing.T, newStore NewStore) {
	var refunds Counter
	f := NewFixture(t, newStore, nil, bountySpec(&refunds))
	mk := func() (jobstate.Job, jobstate.Lease) {
		j := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer", Deadline: f.Clock.Now().Add(time.Minute)})
		f.Fire(j.ID, bounty.Fund, "buyer")
		c, err := f.Eng.ClaimJob(f.Ctx, j.ID, jobstate.ClaimRequest{Worker: "w", TTL: time.Hour})
		require.NoError(t, err)
		return j, c.Lease
	}
	a, la := mk()
	b, _ := mk()
	c, _ := mk()
	f.Clock.Advance(time.Minute)
	_, err := f.Eng.Succeed(f.Ctx, la, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "a verdict after the deadline finds the bounty expired")
	assert.Equal(t, bounty.Expired, f.Get(a.ID).State)
	_, err = f.Eng.Cancel(f.Ctx, b.ID, jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrTerminal)
	assert.Equal(t, bounty.Expired, f.Get(b.ID).State)
	_, err = f.Eng.ClaimJob(f.Ctx, c.ID, jobstate.ClaimRequest{Worker: "w2"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
	assert.Equal(t, bounty.Expired, f.Get(c.ID).State)
	_, err = f.Eng.Apply(f.Ctx, c.ID, "refund", jobstate.Call{Actor: "buyer"})
	assert.NoError(t, err)
}

func testOverdueNotClaimed(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	late := f.Create(delivery.Name, jobstate.NewJob{TTL: time.Minute})
	f.Clock.Advance(time.Second)
	fresh := f.Create(delivery.Name, jobstate.NewJob{TTL: time.Hour})
	f.Clock.Advance(time.Minute)
	c := f.Claim(delivery.Name, "w")
	assert.Equal(t, fresh.ID, c.Job.ID, "the overdue job is passed over, left for the sweep")
	_, err := f.Eng.ClaimJob(f.Ctx, late.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
	assert.Equal(t, 1, f.Sweep().Expired)
	assert.Equal(t, delivery.Expired, f.Get(late.ID).State)
}

func testRequeueThenExpire(t *testing.T, newStore NewStore) {
	spec := m.QueueSpec()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "EXPIRED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired})
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.Queued}, Event: jobstate.EventExpire, To: "EXPIRED"})
	f := NewFixture(t, newStore, nil, spec)
	j := f.Create("queue", jobstate.NewJob{TTL: 10 * time.Second})
	f.Fire(j.ID, m.Submit, "u")
	c := f.Claim("queue", "w")
	_, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("timeout"))
	require.NoError(t, err)
	f.Clock.Advance(time.Minute) // past the backoff and the deadline
	r := f.Sweep()
	assert.Equal(t, 1, r.Requeued)
	assert.Equal(t, 1, r.Expired, "requeued into a state that can expire, the job expires in the same sweep")
	assert.Equal(t, jobstate.State("EXPIRED"), f.Get(j.ID).State)
}

func testFireNeedsLease(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	j := f.Create(delivery.Name, jobstate.NewJob{})
	c := f.Claim(delivery.Name, "w1")
	before := f.Snapshot(j.ID)
	_, err := f.Eng.Fire(f.Ctx, j.ID, delivery.StartDownload, jobstate.Call{Actor: "mallory", Args: activeUser})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Equal(t, before, f.Snapshot(j.ID))
	_, err = f.Eng.Advance(f.Ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser})
	assert.NoError(t, err, "the lease holder may")
}

func testRecoverWorker(t *testing.T, newStore NewStore) {
	var fx Counter
	f := NewFixture(t, newStore, nil, exactlyonce.Spec(), bounty.Spec(bounty.Plain()))
	a := f.Create(exactlyonce.Name, jobstate.NewJob{})
	f.Create(exactlyonce.Name, jobstate.NewJob{})
	ca := f.Claim(exactlyonce.Name, "server-1")
	cb := f.Claim(exactlyonce.Name, "server-1")
	_, err := f.Eng.Start(f.Ctx, cb.Lease)
	require.NoError(t, err)
	_, err = f.Eng.Commit(f.Ctx, cb.Lease, jobstate.CommitInput{Effect: fx.Effect})
	require.NoError(t, err)
	b := f.Create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.Fire(b.ID, bounty.Fund, "buyer")
	_, err = f.Eng.ClaimJob(f.Ctx, b.ID, jobstate.ClaimRequest{Worker: "server-1"})
	require.NoError(t, err)
	other, err := f.Eng.ClaimJob(f.Ctx, b.ID, jobstate.ClaimRequest{Worker: "server-2"})
	require.NoError(t, err)

	_, err = f.Eng.RecoverWorker(f.Ctx, "")
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	r, err := f.Eng.RecoverWorker(f.Ctx, "server-1") // leases still live: no waiting for them
	require.NoError(t, err)
	assert.Equal(t, 3, r.Jobs)
	assert.Equal(t, 1, r.Finalized)
	assert.Equal(t, 2, r.Aborted)
	assert.Equal(t, exactlyonce.Pending, f.Get(a.ID).State)
	assert.Equal(t, exactlyonce.Succeeded, f.Get(cb.Job.ID).State)
	assert.Equal(t, int64(1), fx.Get(), "finalized without re-applying the effect")
	st := f.Snapshot(b.ID)
	assert.Equal(t, bounty.Funded, st.Job.State)
	assert.Equal(t, 1, st.Job.Leases, "server-2's submission is untouched")
	_, err = f.Eng.Heartbeat(f.Ctx, ca.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.Eng.Heartbeat(f.Ctx, other.Lease)
	assert.NoError(t, err)
}

func testStuck(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	f.Create(delivery.Name, jobstate.NewJob{})
	f.Create(delivery.Name, jobstate.NewJob{})
	a := f.Claim(delivery.Name, "a")
	f.Clock.Advance(10 * time.Second)
	b := f.Claim(delivery.Name, "b")
	f.Clock.Advance(10 * time.Second)
	stuck, err := f.Eng.Stuck(f.Ctx, delivery.Name, 15*time.Second, 0)
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	assert.Equal(t, a.Job.ID, stuck[0].ID)
	_, err = f.Eng.Heartbeat(f.Ctx, a.Lease)
	require.NoError(t, err)
	stuck, err = f.Eng.Stuck(f.Ctx, delivery.Name, 5*time.Second, 0)
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	assert.Equal(t, b.Job.ID, stuck[0].ID)
}
