package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
	m "github.com/jobstate/jobstate/internal/machines"
)

// RunHardening runs the engine's promises under the faults and edges a
// demanding user meets: effects never applied twice, no callback under a
// shared lock, no job stuck for ever, no job starving the others, times at
// the ends of their range, no aliasing with the caller, priority.
func RunHardening(t *testing.T, newStore NewStore, opts ...Option) {
	cfg := newConfig(opts)
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"SucceedKeepsCommitWhenRuleEffectFails", testSucceedRuleEffectFails},
		{"NestedKeyedCreates", func(t *testing.T, ns NewStore) { testNestedKeyedCreates(t, ns, cfg.nestedKeys) }},
		{"CommitNeedsSucceedRule", testCommitNeedsSucceedRule},
		{"SweepNotStarvedByFailingJobs", testSweepNotStarved},
		{"SweepSeesOnlyItsMachines", testSweepOwnMachines},
		{"ClaimSkipsJobWhoseEffectFails", testClaimSkipsFailingEffect},
		{"TimesAtTheEdges", testTimesAtEdges},
		{"NoAliasingWithCaller", testNoAliasing},
		{"PriorityFirst", testPriorityFirst},
		{"RetriedJobNotStarved", testRetriedNotStarved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

// withEffect returns spec with fx as the effect of every rule for ev.
func withEffect(spec jobstate.Spec, ev jobstate.Event, fx jobstate.EffectFunc) jobstate.Spec {
	rules := append([]jobstate.Rule(nil), spec.Rules...)
	for i := range rules {
		if rules[i].Event == ev {
			rules[i].Effect = fx
		}
	}
	spec.Rules = rules
	return spec
}

// testSucceedRuleEffectFails: the commit effect ran, then the succeed
// rule's effect failed: the commit is kept (it cannot be undone), the
// commit effect never runs again, and the job can still be finished.
func testSucceedRuleEffectFails(t *testing.T, newStore NewStore) {
	var ruleRuns, ruleFails atomic.Int64
	ruleFails.Store(1)
	spec := withEffect(m.QueueSpec(), jobstate.EventSucceed, func(context.Context, jobstate.Job) error {
		if ruleFails.Load() > 0 {
			return errors.New("notification service down")
		}
		ruleRuns.Add(1)
		return nil
	})
	f := newFixture(t, newStore, nil, spec)
	j := f.Create("queue", jobstate.NewJob{})
	f.Fire(j.ID, m.Submit, "u")
	c := f.Claim("queue", "w")
	var commits enginesuite.Counter
	in := jobstate.CommitInput{Result: []byte("out"), Effect: commits.Effect}

	got, err := f.Eng.Succeed(f.Ctx, c.Lease, in)
	require.ErrorIs(t, err, jobstate.ErrIncomplete)
	var inc *jobstate.IncompleteError
	require.ErrorAs(t, err, &inc)
	assert.Equal(t, jobstate.EventSucceed, inc.Failed.Event)
	assert.Equal(t, int64(1), commits.Get(), "the commit effect ran once")
	assert.Equal(t, c.Lease.ExecID, got.Committed, "the commit is recorded")
	assert.Equal(t, m.Running, got.State)
	assert.Equal(t, got, f.Get(j.ID), "the job returned is the job written")

	_, err = f.Eng.Succeed(f.Ctx, c.Lease, in)
	require.ErrorIs(t, err, jobstate.ErrAlreadyCommitted, "a retried Succeed does not commit again")
	assert.Equal(t, int64(1), commits.Get(), "the commit effect never runs twice")

	_, err = f.Eng.Finish(f.Ctx, c.Lease)
	require.Error(t, err, "the rule effect still fails")
	ruleFails.Store(0)
	done, err := f.Eng.Finish(f.Ctx, c.Lease)
	require.NoError(t, err)
	assert.Equal(t, m.Succeeded, done.State)
	assert.Equal(t, int64(1), ruleRuns.Load())
	assert.Equal(t, []byte("out"), done.Result)
}

// testNestedKeyedCreates: a creation effect creates another job with its
// own key. No lock shared between keys is held while it runs, so n
// such nested creates, from several goroutines, all complete.
func testNestedKeyedCreates(t *testing.T, newStore NewStore, n int) {
	var f *fixture
	spec := m.QueueSpec()
	spec.Create.Effect = func(ctx context.Context, j jobstate.Job) error {
		fr, _ := jobstate.FiringOf(ctx)
		parent, ok := fr.Args.(int)
		if !ok {
			return nil // a child
		}
		_, err := f.Eng.Create(ctx, jobstate.NewJob{Machine: "queue", Key: fmt.Sprintf("child-%d", parent)})
		return err
	}
	f = newFixture(t, newStore, nil, spec)
	const workers = 8
	done := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := w; i < n; i += workers {
				if _, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: "queue", Key: fmt.Sprintf("parent-%d", i), Args: i}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(w)
	}
	// A deadlock would hang the test; this bound turns it into a failure.
	hang := time.NewTimer(2 * time.Minute)
	defer hang.Stop()
	for w := 0; w < workers; w++ {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-hang.C:
			t.Fatal("nested keyed creates did not complete: a lock shared between keys is held during the creation effect")
		}
	}
	for _, i := range []int{0, n / 2, n - 1} {
		c, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: "queue", Key: fmt.Sprintf("child-%d", i)})
		require.NoError(t, err)
		assert.True(t, c.Existing, "child %d was created by its parent's effect", i)
	}
}

// testCommitNeedsSucceedRule: a commit in a state with no succeed rule is
// refused, since the committed job could never be finished; a committed
// execution cannot move on with Advance either.
func testCommitNeedsSucceedRule(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.TransferSpec())
	j := f.Create("transfer", jobstate.NewJob{})
	c := f.Claim("transfer", "w")
	before := f.Snapshot(j.ID)
	var commits enginesuite.Counter
	_, err := f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: commits.Effect})
	require.ErrorIs(t, err, jobstate.ErrInvalidTransition)
	var te *jobstate.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, jobstate.EventSucceed, te.Event)
	assert.Equal(t, m.TClaimed, te.From)
	assert.Equal(t, before, f.Snapshot(j.ID), "nothing written")
	assert.Zero(t, commits.Get(), "the effect did not run")

	_, err = f.Eng.Advance(f.Ctx, c.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	_, err = f.Eng.Advance(f.Ctx, c.Lease, m.Stream, jobstate.Call{})
	require.NoError(t, err)
	_, err = f.Eng.Commit(f.Ctx, c.Lease, jobstate.CommitInput{Effect: commits.Effect})
	require.NoError(t, err)
	assert.Equal(t, int64(1), commits.Get())
	// Crash after the commit: the sweep can always finish the job.
	f.Clock.Advance(time.Minute)
	rep := f.Sweep()
	assert.Equal(t, 1, rep.Finalized)
	assert.Equal(t, m.TDelivered, f.Get(j.ID).State)
}

// refuseRequeue is a requeue guard that refuses jobs whose owner is "bad".
func refuseRequeue(_ context.Context, in jobstate.GuardInput) error {
	if in.Job.Owner == "bad" {
		return errors.New("this job may not be requeued")
	}
	return nil
}

// testSweepNotStarved: more failing due jobs than one page of the sweep,
// all due before a good job, do not hide it; they are reported and pushed
// back, so that the next pass does not try them at once.
func testSweepNotStarved(t *testing.T, newStore NewStore) {
	spec := m.QueueSpec()
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventRequeue {
			spec.Rules[i].Guard, spec.Rules[i].GuardName = refuseRequeue, "not bad"
		}
	}
	f := newFixture(t, newStore, nil, spec)
	retrying := func(owner string) uuid.UUID {
		j := f.Create("queue", jobstate.NewJob{Owner: owner})
		f.Fire(j.ID, m.Submit, "u")
		c, err := f.Eng.ClaimJob(f.Ctx, j.ID, jobstate.ClaimRequest{Worker: "w"})
		require.NoError(t, err)
		_, err = f.Eng.Fail(f.Ctx, c.Lease, errors.New("flaky"))
		require.NoError(t, err)
		return j.ID
	}
	const bad = 300
	for i := 0; i < bad; i++ {
		retrying("bad")
	}
	f.Clock.Advance(time.Millisecond) // the good job is due after every bad one
	good := retrying("good")
	f.Clock.Advance(time.Minute)

	rep, err := f.Eng.Sweep(f.Ctx)
	require.Error(t, err)
	assert.Len(t, rep.Failures, bad, "every failing job is reported")
	assert.ErrorIs(t, rep.Failures[0].Err, jobstate.ErrGuardRefused)
	assert.Equal(t, 1, rep.Requeued)
	assert.Equal(t, m.Queued, f.Get(good).State, "the job due after the failing ones was reached")
	failing := f.Get(rep.Failures[0].JobID)
	assert.Equal(t, 1, failing.SweepFailures)
	assert.True(t, failing.WakeAt.After(f.Clock.Now()), "a failing job is pushed back")

	rep, err = f.Eng.Sweep(f.Ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Jobs, "pushed-back jobs are not tried again at once")
	f.Clock.Advance(time.Hour)
	rep, _ = f.Eng.Sweep(f.Ctx)
	assert.Len(t, rep.Failures, bad, "they are tried again later")
	assert.Equal(t, 2, f.Get(rep.Failures[0].JobID).SweepFailures, "their delay grows")
}

// testSweepOwnMachines: engines with different machines share a store;
// each sweeps only its own machines' jobs, and the others' due jobs hide
// nothing from it.
func testSweepOwnMachines(t *testing.T, newStore NewStore) {
	store := newStore(t)
	clock := jobstate.NewManualClock(Epoch)
	queues, err := jobstate.New(store, jobstate.WithClock(clock), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	transfers, err := jobstate.New(store, jobstate.WithClock(clock), jobstate.WithMachines(m.Must(m.TransferSpec())))
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		_, err := transfers.Create(ctx, jobstate.NewJob{Machine: "transfer", TTL: time.Second})
		require.NoError(t, err)
	}
	clock.Advance(time.Millisecond)
	c, err := queues.Create(ctx, jobstate.NewJob{Machine: "queue", TTL: time.Second})
	require.NoError(t, err)
	_, err = queues.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
	require.NoError(t, err)
	cl, err := queues.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	require.NoError(t, err)
	clock.Advance(time.Hour)
	rep, err := queues.Sweep(ctx)
	require.NoError(t, err, "another engine's jobs are not this engine's failures")
	assert.Equal(t, 1, rep.Jobs)
	assert.Equal(t, 1, rep.Aborted)
	_, err = queues.Heartbeat(ctx, cl.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	rep, err = transfers.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 300, rep.Expired, "the other engine sweeps its own")
}

// testClaimSkipsFailingEffect: a job whose claim rule's effect fails is
// passed over and the next one claimed.
func testClaimSkipsFailingEffect(t *testing.T, newStore NewStore) {
	boom := errors.New("cannot reserve a GPU for this one")
	spec := withEffect(m.QueueSpec(), jobstate.EventClaim, func(_ context.Context, j jobstate.Job) error {
		if j.Owner == "bad" {
			return boom
		}
		return nil
	})
	f := newFixture(t, newStore, nil, spec)
	bad := f.Create("queue", jobstate.NewJob{Owner: "bad", Priority: 9})
	f.Fire(bad.ID, m.Submit, "u")
	good := f.Create("queue", jobstate.NewJob{Owner: "good"})
	f.Fire(good.ID, m.Submit, "u")
	before := f.Snapshot(bad.ID)
	c := f.Claim("queue", "w")
	assert.Equal(t, good.ID, c.Job.ID, "the failing job is skipped, the next one claimed")
	assert.Equal(t, before, f.Snapshot(bad.ID))
	_, err := f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
	assert.ErrorIs(t, err, boom, "the failure that left nothing to claim is told")
}

// testTimesAtEdges: instants anywhere in [MinTime, MaxTime] order
// correctly, durations and instants outside are refused, backoff growth
// saturates, and a broken random source never gives a negative delay.
func testTimesAtEdges(t *testing.T, newStore NewStore) {
	spec := m.TransferSpec()
	spec.Policy.Retry = jobstate.RetryPolicy{MaxRetries: jobstate.Unlimited, Backoff: jobstate.ExponentialBackoff(time.Second, 2, 0)}
	f := newFixture(t, newStore, nil, spec)
	// Far-future jobs do not block the claims of due ones, nor the sweep.
	f.Create("transfer", jobstate.NewJob{NotBefore: jobstate.MaxTime})
	f.Create("transfer", jobstate.NewJob{Deadline: jobstate.MaxTime, Priority: -1})
	ancient := f.Create("transfer", jobstate.NewJob{Deadline: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), Priority: -2})
	due := f.Create("transfer", jobstate.NewJob{})
	rep := f.Sweep()
	assert.Equal(t, 1, rep.Expired, "a deadline in 1500 has passed")
	assert.Equal(t, m.TExpired, f.Get(ancient.ID).State)
	c := f.Claim("transfer", "w")
	assert.Equal(t, due.ID, c.Job.ID)

	// Uncapped exponential backoff saturates at DefaultMaxBackoff.
	_, err := f.Eng.Advance(f.Ctx, c.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	for i := 0; i < 40; i++ {
		j, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("flaky"))
		require.NoError(t, err)
		delay := j.NotBefore.Sub(f.Clock.Now())
		require.GreaterOrEqual(t, delay, time.Duration(0))
		require.LessOrEqual(t, delay, jobstate.DefaultMaxBackoff)
		f.Clock.Set(j.NotBefore)
		c, err = f.Eng.ClaimJob(f.Ctx, due.ID, jobstate.ClaimRequest{Worker: "w"})
		require.NoError(t, err, "retry %d", i+1)
		_, err = f.Eng.Advance(f.Ctx, c.Lease, m.StartDownload, jobstate.Call{})
		require.NoError(t, err)
	}
	assert.Equal(t, jobstate.DefaultMaxBackoff, jobstate.ExponentialBackoff(time.Second, 2, 0).Delay(40, 0))

	// Out of range: refused, nothing written.
	for name, nj := range map[string]jobstate.NewJob{
		"TTL":        {TTL: jobstate.MaxDuration + 1},
		"deadline":   {Deadline: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"not-before": {NotBefore: time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		nj.Machine = "transfer"
		_, err := f.Eng.Create(f.Ctx, nj)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
	}
	_, err = f.Eng.Claim(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w", TTL: 2562047 * time.Hour})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = f.Eng.Snooze(f.Ctx, c.Lease, jobstate.MaxDuration+1)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)

	// A clock at the zero time is refused rather than parking jobs for ever.
	before := f.Snapshot(due.ID)
	f.Clock.Set(time.Time{})
	_, err = f.Eng.Snooze(f.Ctx, c.Lease, 0)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: "transfer"})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = f.Eng.Sweep(f.Ctx)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Equal(t, before, f.Snapshot(due.ID))

	// A random source breaking its contract gives no negative delay.
	b := jobstate.ExponentialBackoff(time.Second, 2, time.Minute).WithJitter(jobstate.JitterFull)
	for _, r := range []float64{nanValue(), -1, 1, 2, -0.5} {
		d := b.Delay(3, r)
		assert.GreaterOrEqual(t, d, time.Duration(0), "draw %v", r)
		assert.LessOrEqual(t, d, 4*time.Second, "draw %v", r)
	}
}

func nanValue() float64 {
	var zero float64
	return zero / zero
}

// testNoAliasing: what the engine keeps from the caller is a copy, and
// what it returns shares nothing the caller could change in the store.
func testNoAliasing(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.QueueSpec())
	payload := []byte("payload-1")
	b := jobstate.FixedBackoff(time.Second)
	j := f.Create("queue", jobstate.NewJob{Payload: payload, Retry: &jobstate.RetryOverride{Backoff: &b}})
	copy(payload, "XXXXXXXXX")
	b.Initial = 3 * time.Hour
	got := f.Get(j.ID)
	assert.Equal(t, []byte("payload-1"), got.Payload, "the stored payload is the engine's copy")
	assert.Equal(t, time.Second, got.Backoff.Initial, "the stored backoff is the engine's copy")
	assert.True(t, got.OwnBackoff)
	assert.Equal(t, 3, got.MaxRetries, "overriding the backoff keeps the machine's MaxRetries")
	got.Backoff.Initial = time.Hour
	assert.Equal(t, time.Second, f.Get(j.ID).Backoff.Initial, "a returned job shares nothing but its byte slices")

	f.Fire(j.ID, m.Submit, "u")
	c := f.Claim("queue", "w")
	result := []byte("result-1")
	_, err := f.Eng.Succeed(f.Ctx, c.Lease, jobstate.CommitInput{Result: result})
	require.NoError(t, err)
	copy(result, "XXXXXXXX")
	assert.Equal(t, []byte("result-1"), f.Get(j.ID).Result, "the stored result is the engine's copy")
}

// testPriorityFirst: among due jobs, a higher priority is claimed first,
// whatever the age.
func testPriorityFirst(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.TransferSpec())
	var low []uuid.UUID
	for i := 0; i < 5; i++ {
		low = append(low, f.Create("transfer", jobstate.NewJob{}).ID)
		f.Clock.Advance(time.Second)
	}
	high := f.Create("transfer", jobstate.NewJob{Priority: 10})
	assert.Equal(t, high.ID, f.Claim("transfer", "w").Job.ID, "a high-priority job overtakes older low-priority ones")
	assert.Equal(t, low[0], f.Claim("transfer", "w").Job.ID, "then the oldest")
}

// testRetriedNotStarved: a retried job is due when its backoff ends; fresh
// jobs of equal priority created after that do not overtake it.
func testRetriedNotStarved(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, m.TransferSpec())
	r := f.Create("transfer", jobstate.NewJob{})
	c := f.Claim("transfer", "w")
	_, err := f.Eng.Advance(f.Ctx, c.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	failed, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("flaky"))
	require.NoError(t, err)
	f.Clock.Set(failed.NotBefore)
	for i := 0; i < 20; i++ {
		f.Clock.Advance(time.Millisecond)
		f.Create("transfer", jobstate.NewJob{})
	}
	assert.Equal(t, r.ID, f.Claim("transfer", "w").Job.ID, "the retried job, due first, is claimed first")
}
