package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/internal/machines/exactlyonce"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
)

// RunEngine runs the engine's lifecycle on the store: every operation, the
// commit boundary and its failure modes, retries, idempotency, expiry and
// recovery.
func RunEngine(t *testing.T, newStore NewStore, opts ...Option) {
	cfg := newConfig(opts)
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"DocProcTraces", testDocProcTraces},
		{"RefusedOperationsChangeNothing", testRefusals},
		{"ObserversSeeEveryTransition", testObservers},
		{"HeartbeatKeepsLease", testHeartbeat},
		{"FM001DuplicateRetryPrevented", testFM001},
		{"CrashBeforeCommit", testCrashBeforeCommit},
		{"CrashAfterCommitFinalized", testCrashAfterCommit},
		{"DuplicateCommitSameExecution", testDuplicateCommit},
		{"CommitEffectErrorWritesNothing", testCommitEffectError},
		{"ConcurrentExecutionsFirstWins", testConcurrentExecutions},
		{"OnceOnlyEffect", testOnceEffect},
		{"Idempotency", testIdempotency},
		{"CreationGuardAndEffect", testCreationGuardAndEffect},
		{"CancelActiveTellsLeaseHolder", testCancelActive},
		{"DeadlineBySweepAndLazily", testDeadlines},
		{"ExhaustThroughWaitingState", testExhaustChain},
		{"ErrorClasses", testErrorClasses},
		{"SnoozeDoesNotCount", testSnooze},
		{"SeveralActiveStatesOneLease", testSeveralActiveStates},
		{"ClaimPassesOverRefusedJobs", testClaimGuards},
		{"StuckView", testStuck},
		{"DerivedStateFollowsExecutions", testDerived},
		{"RuleEffects", testRuleEffects},
		{"RuleEffectSeesItsFiring", testFiring},
		{"LazyExpiryBeforeAnyOperation", testLazyExpiryEverywhere},
		{"OverdueJobsAreNotClaimed", testOverdueNotClaimed},
		{"SweepRequeuesThenExpires", testRequeueThenExpire},
		{"FireCannotMoveALeasedJob", testFireNeedsLease},
		{"RecoverWorkerAtStartUp", testRecoverWorker},
		{"RequireStartBeforeCommit", testRequireStart},
		{"CommittedJobOnlyFinishes", testCommittedOnlyFinishes},
		{"RetryWithoutRouteFails", testRetryWithoutRoute},
		{"IfVersionOnEveryCall", testIfVersion},
		{"RedriveDeadLetter", testRedrive},
		{"RedriveObserverAndFiring", testRedriveObserverAndFiring},
		{"StressWorkersCrashes", func(t *testing.T, ns NewStore) { testStress(t, ns, cfg.stressJobs) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

// testDocProcTraces replays the four example traces of document processing
// on its literal machine and a fake clock, with retry counts, error classes
// (the lifecycle's classifier) and the 1 s backoff.
func testDocProcTraces(t *testing.T, newStore NewStore) {
	run := func(t *testing.T, outcomes []error) (*fixture, jobstate.Job) {
		f := newFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
		j := f.create(docproc.Name, jobstate.NewJob{Payload: []byte("doc")})
		f.fire(j.ID, docproc.Submit, "user")
		for i, outcome := range outcomes {
			c := f.claim(docproc.Name, "w")
			assert.Equal(t, docproc.Running, c.Job.State)
			assert.False(t, c.Job.StartedAt.IsZero())
			if outcome == nil {
				_, err := f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
				require.NoError(t, err)
				break
			}
			got, err := f.eng.Fail(f.ctx, c.Lease, outcome)
			require.NoError(t, err)
			if got.Terminal() {
				require.Equal(t, len(outcomes)-1, i, "terminal before the trace's end")
				break
			}
			assert.Equal(t, docproc.Retrying, got.State)
			assert.Equal(t, i+1, got.RetryCount)
			assert.True(t, got.NotBefore.Equal(f.clock.Now().Add(time.Second)), "fixed 1 s backoff")
			// Not ready before the second has passed.
			f.clock.Advance(999 * time.Millisecond)
			f.sweep()
			assert.Equal(t, docproc.Retrying, f.get(j.ID).State)
			_, err = f.eng.Claim(f.ctx, jobstate.ClaimRequest{Machine: docproc.Name, Worker: "w"})
			assert.ErrorIs(t, err, jobstate.ErrNoJob)
			f.clock.Advance(time.Millisecond)
			f.sweep()
			assert.Equal(t, docproc.Queued, f.get(j.ID).State)
		}
		return f, f.get(j.ID)
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
			h, err := f.eng.History(f.ctx, j.ID)
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
			def, _ := f.eng.Machine(docproc.Name)
			st, err := def.Replay(h)
			require.NoError(t, err)
			assert.Equal(t, j.State, st)
		})
	}
}

func testRefusals(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, docproc.Spec(docproc.Plain()), bounty.Spec(bounty.Plain()))
	j := f.create(docproc.Name, jobstate.NewJob{})
	check := func(err, want error) {
		t.Helper()
		before := f.snapshot(j.ID)
		require.ErrorIs(t, err, want)
		assert.Equal(t, before, f.snapshot(j.ID), "a refused operation changes nothing")
	}
	_, err := f.eng.Fire(f.ctx, j.ID, "start_processing", jobstate.Call{})
	check(err, jobstate.ErrInvalidTransition)
	var te *jobstate.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, docproc.Created, te.From)
	assert.Equal(t, jobstate.Event("start_processing"), te.Event)

	_, err = f.eng.Fire(f.ctx, j.ID, jobstate.EventClaim, jobstate.Call{})
	check(err, jobstate.ErrInvalidArgument)
	_, err = f.eng.Fire(f.ctx, j.ID, docproc.Submit, jobstate.Call{IfVersion: 7})
	check(err, jobstate.ErrVersionConflict)
	_, err = f.eng.Fire(f.ctx, uuid.New(), docproc.Submit, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	_, err = f.eng.Create(f.ctx, jobstate.NewJob{Machine: "nope"})
	assert.ErrorIs(t, err, jobstate.ErrUnknownMachine)

	// Terminal finality.
	f.fire(j.ID, docproc.Submit, "u")
	f.fire(j.ID, jobstate.EventCancel, "u")
	for _, ev := range []jobstate.Event{docproc.Submit, jobstate.EventCancel, "anything"} {
		_, err = f.eng.Fire(f.ctx, j.ID, ev, jobstate.Call{})
		check(err, jobstate.ErrTerminal)
	}

	// Guard refusals carry the guard's own error.
	b := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	before := f.snapshot(b.ID)
	_, err = f.eng.Fire(f.ctx, b.ID, bounty.Fund, jobstate.Call{Actor: "mallory"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.ErrorIs(t, err, bounty.ErrNotBuyer)
	assert.Equal(t, before, f.snapshot(b.ID))

	// Lease operations with a made-up lease.
	fake := jobstate.Lease{JobID: b.ID, ExecID: uuid.New(), Token: 1}
	_, err = f.eng.Heartbeat(f.ctx, fake)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.eng.Commit(f.ctx, fake, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.eng.Fail(f.ctx, fake, errors.New("x"))
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.eng.Fail(f.ctx, fake, nil)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = f.eng.ClaimJob(f.ctx, b.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "an open bounty is not ready")
	_, err = f.eng.ClaimJob(f.ctx, b.ID, jobstate.ClaimRequest{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Equal(t, before, f.snapshot(b.ID))
}

func testObservers(t *testing.T, newStore NewStore) {
	var mu sync.Mutex
	var seen []jobstate.Transition
	obs := jobstate.WithObserver(func(_ context.Context, j jobstate.Job, tr jobstate.Transition) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, tr)
	})
	f := newFixture(t, newStore, []jobstate.Option{obs}, docproc.Spec(docproc.Plain()))
	j := f.create(docproc.Name, jobstate.NewJob{})
	f.fire(j.ID, docproc.Submit, "u")
	c := f.claim(docproc.Name, "w")
	_, err := f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	_, err = f.eng.Fire(f.ctx, j.ID, docproc.Submit, jobstate.Call{})
	require.Error(t, err)
	h, err := f.eng.History(f.ctx, j.ID)
	require.NoError(t, err)
	assert.Equal(t, h, seen, "observers see every committed transition, in order, and nothing refused")
}

func testHeartbeat(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.create(docproc.Name, jobstate.NewJob{})
	f.fire(j.ID, docproc.Submit, "u")
	c := f.claim(docproc.Name, "w")
	assert.Equal(t, 1, c.Lease.Token)
	assert.True(t, c.Lease.ExpiresAt.Equal(Epoch.Add(30*time.Second)))
	f.clock.Advance(20 * time.Second)
	l, err := f.eng.Heartbeat(f.ctx, c.Lease)
	require.NoError(t, err)
	assert.True(t, l.ExpiresAt.Equal(Epoch.Add(50*time.Second)))
	f.clock.Advance(20 * time.Second) // past the first expiry, before the renewed one
	r := f.sweep()
	assert.Zero(t, r.Aborted)
	assert.Equal(t, docproc.Running, f.get(j.ID).State)
	f.clock.Advance(10 * time.Second) // exactly at the renewed expiry: expired
	_, err = f.eng.Heartbeat(f.ctx, l)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	r = f.sweep()
	assert.Equal(t, 1, r.Aborted)
	assert.Equal(t, 1, r.Retried)
	got := f.get(j.ID)
	assert.Equal(t, docproc.Retrying, got.State, "a lost lease is a retryable failure")
	assert.Equal(t, 1, got.RetryCount)
	assert.Equal(t, "lease expired", got.LastError)
}

// testFM001 reproduces the exactly-once lifecycle's FM_001 on its literal
// machine and proves it prevented: worker A stalls past its lease, B re-runs
// the job and commits, A's late commit and finish are refused and change
// nothing; the effect ran once.
func testFM001(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	var fx counter
	j := f.create(exactlyonce.Name, jobstate.NewJob{})
	a := f.claim(exactlyonce.Name, "A")
	_, err := f.eng.Start(f.ctx, a.Lease)
	require.NoError(t, err)
	f.clock.Advance(11 * time.Second) // A stalls past its 10 s lease
	r := f.sweep()
	assert.Equal(t, 1, r.Aborted)
	assert.Equal(t, exactlyonce.Pending, f.get(j.ID).State, "lease expired and nothing committed: back to PENDING")
	b := f.claim(exactlyonce.Name, "B")
	assert.Equal(t, 2, b.Lease.Token, "a new fencing token")
	_, err = f.eng.Start(f.ctx, b.Lease)
	require.NoError(t, err)
	_, err = f.eng.Commit(f.ctx, b.Lease, jobstate.CommitInput{Effect: fx.effect})
	require.NoError(t, err)

	before := f.snapshot(j.ID)
	_, err = f.eng.Commit(f.ctx, a.Lease, jobstate.CommitInput{Effect: fx.effect})
	var ce *jobstate.CommitError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, b.Lease.ExecID, ce.Winner, "the refusal names the winner")
	_, err = f.eng.Finish(f.ctx, a.Lease)
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	_, err = f.eng.Heartbeat(f.ctx, a.Lease)
	assert.Error(t, err)
	assert.Equal(t, before, f.snapshot(j.ID))

	done, err := f.eng.Finish(f.ctx, b.Lease)
	require.NoError(t, err)
	assert.Equal(t, exactlyonce.Succeeded, done.State)
	assert.Equal(t, int64(1), fx.get(), "the effect ran exactly once")
	st := f.snapshot(j.ID)
	require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	require.Len(t, st.Execs, 2)
	assert.Equal(t, jobstate.ExecAborted, st.Execs[0].Status)
	assert.Equal(t, jobstate.ExecDone, st.Execs[1].Status)
}

// testCrashBeforeCommit: a worker dies mid-job (its context cancelled, its
// goroutine abandoned) before committing; recovery retries safely.
func testCrashBeforeCommit(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	var fx counter
	j := f.create(exactlyonce.Name, jobstate.NewJob{})
	wctx, kill := context.WithCancel(f.ctx)
	c := f.claim(exactlyonce.Name, "A")
	started := make(chan struct{})
	stopped := make(chan struct{})
	go func() { // the worker: starts, then blocks until killed
		defer close(stopped)
		if _, err := f.eng.Start(wctx, c.Lease); err != nil {
			t.Error(err)
		}
		close(started)
		<-wctx.Done()
		// A dying worker's last write, with a dead context, changes nothing.
		if _, err := f.eng.Commit(wctx, c.Lease, jobstate.CommitInput{Effect: fx.effect}); err == nil {
			t.Error("commit with a cancelled context succeeded")
		}
	}()
	<-started
	kill()
	<-stopped
	f.clock.Advance(10 * time.Second)
	f.sweep()
	assert.Equal(t, exactlyonce.Pending, f.get(j.ID).State)
	b := f.claim(exactlyonce.Name, "B")
	_, err := f.eng.Start(f.ctx, b.Lease)
	require.NoError(t, err)
	_, err = f.eng.Succeed(f.ctx, b.Lease, jobstate.CommitInput{Effect: fx.effect})
	require.NoError(t, err)
	assert.Equal(t, int64(1), fx.get())
	assert.Equal(t, exactlyonce.Succeeded, f.get(j.ID).State)
}

// testCrashAfterCommit: the worker commits and dies before finishing; the
// sweep finalizes the job without applying the effect again.
func testCrashAfterCommit(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	var fx counter
	j := f.create(exactlyonce.Name, jobstate.NewJob{})
	c := f.claim(exactlyonce.Name, "A")
	_, err := f.eng.Start(f.ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{Effect: fx.effect, Result: []byte("url")})
	require.NoError(t, err)
	// The worker dies here.
	f.clock.Advance(9 * time.Second)
	assert.Zero(t, f.sweep().Finalized, "nothing to do while the lease lives")
	f.clock.Advance(time.Second)
	r := f.sweep()
	assert.Equal(t, 1, r.Finalized)
	got := f.get(j.ID)
	assert.Equal(t, exactlyonce.Succeeded, got.State)
	assert.Equal(t, []byte("url"), got.Result)
	assert.Equal(t, c.Lease.ExecID, got.Committed)
	assert.Equal(t, int64(1), fx.get(), "recovery does not re-apply the effect")
	st := f.snapshot(j.ID)
	assert.Equal(t, jobstate.ExecDone, st.Execs[0].Status)
	require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	_, err = f.eng.Finish(f.ctx, c.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "the late worker learns it is finished")
}

func testDuplicateCommit(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	var fx counter
	f.create(exactlyonce.Name, jobstate.NewJob{})
	c := f.claim(exactlyonce.Name, "A")
	_, err := f.eng.Start(f.ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{Effect: fx.effect})
	require.NoError(t, err)
	before := f.snapshot(c.Job.ID)
	_, err = f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{Effect: fx.effect})
	var ce *jobstate.CommitError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, c.Lease.ExecID, ce.Winner)
	_, err = f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{Effect: fx.effect})
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	_, err = f.eng.Fail(f.ctx, c.Lease, errors.New("late failure"))
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted, "a committed execution cannot fail")
	assert.Equal(t, before, f.snapshot(c.Job.ID))
	assert.Equal(t, int64(1), fx.get())
}

func testCommitEffectError(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.create(docproc.Name, jobstate.NewJob{})
	f.fire(j.ID, docproc.Submit, "u")
	c := f.claim(docproc.Name, "w")
	before := f.snapshot(j.ID)
	boom := errors.New("payment provider down")
	_, err := f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{Effect: func(context.Context, jobstate.Job) error { return boom }})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, before, f.snapshot(j.ID))
	_, err = f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
	assert.NoError(t, err, "the execution may try again")
}

// testConcurrentExecutions: bounty marketplace's several submissions to one
// bounty, on its literal machine, as many at once as it accepts; the first
// to commit wins atomically and the others are discarded.
func testConcurrentExecutions(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, bounty.Spec(bounty.Plain()))
	j := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.fire(j.ID, bounty.Fund, "buyer")
	var leases []jobstate.Lease
	for i := 0; i < bounty.MaxSubmissionsCap; i++ {
		c, err := f.eng.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: fmt.Sprint("w", i)})
		require.NoError(t, err)
		require.Equal(t, bounty.Funded, c.Job.State, "the bounty stays funded while judged")
		leases = append(leases, c.Lease)
	}
	assert.Equal(t, bounty.MaxSubmissionsCap, f.get(j.ID).Leases)
	_, err := f.eng.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "late"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable, "at most MaxExecutions live leases")
	_, err = f.eng.Cancel(f.ctx, j.ID, jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, bounty.ErrJudging, "cancel refused while judging")

	// One submission fails its judging: only its execution ends.
	got, err := f.eng.Fail(f.ctx, leases[0], errors.New("score 40 < 80"))
	require.NoError(t, err)
	assert.Equal(t, bounty.Funded, got.State)
	assert.Equal(t, bounty.MaxSubmissionsCap-1, got.Leases)

	var wg sync.WaitGroup
	results := make([]error, len(leases)-1)
	for i, l := range leases[1:] {
		wg.Add(1)
		go func(i int, l jobstate.Lease) {
			defer wg.Done()
			_, results[i] = f.eng.Succeed(f.ctx, l, jobstate.CommitInput{Result: []byte(l.Owner)})
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
	st := f.snapshot(j.ID)
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
	var refunds counter
	f := newFixture(t, newStore, nil, bountySpec(&refunds))
	j := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.fire(j.ID, bounty.Fund, "buyer")
	_, err := f.eng.Apply(f.ctx, j.ID, "refund", jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "no refund while funded")
	_, err = f.eng.Apply(f.ctx, j.ID, "nope", jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrUnknownEffect)
	f.fire(j.ID, jobstate.EventCancel, "buyer")
	_, err = f.eng.Apply(f.ctx, j.ID, "refund", jobstate.Call{Actor: "mallory"})
	assert.ErrorIs(t, err, bounty.ErrNotBuyer)

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.eng.Apply(f.ctx, j.ID, "refund", jobstate.Call{Actor: "buyer"})
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
	assert.Equal(t, int64(1), refunds.get(), "refund exactly once")
	st := f.snapshot(j.ID)
	assert.Equal(t, bounty.Cancelled, st.Job.State, "a refund is not a state")
	require.Len(t, st.Effects, 1)
	assert.Equal(t, "buyer", st.Effects[0].Actor)
}

func testIdempotency(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, imagegen.Spec(imagegen.Plain()))
	key := jobstate.KeyAt(f.clock.Now(), time.Minute, "user-1", "a cat", "512x512")
	c1, err := f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.False(t, c1.Existing)
	c2, err := f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.True(t, c2.Existing)
	assert.Equal(t, c1.Job.ID, c2.Job.ID)

	before := f.snapshot(c1.Job.ID)
	_, err = f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a dog")})
	var kc *jobstate.KeyConflictError
	require.ErrorAs(t, err, &kc)
	assert.Equal(t, c1.Job.ID, kc.Holder)
	assert.Equal(t, before, f.snapshot(c1.Job.ID))

	// A failed job frees its key (image generation).
	c := f.claim(imagegen.Name, "w")
	_, err = f.eng.Fail(f.ctx, c.Lease, errors.New("API 500"))
	require.NoError(t, err)
	assert.Equal(t, imagegen.Failed, f.get(c1.Job.ID).State)
	c3, err := f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.False(t, c3.Existing)
	assert.NotEqual(t, c1.Job.ID, c3.Job.ID)

	// The next minute is another key.
	f.clock.Advance(time.Minute)
	assert.NotEqual(t, key, jobstate.KeyAt(f.clock.Now(), time.Minute, "user-1", "a cat", "512x512"))
	assert.NotEqual(t, jobstate.Key("ab", "c"), jobstate.Key("a", "bc"))

	// Retention.
	g := newFixture(t, newStore, nil, withRetention(m.QueueSpec(), time.Hour))
	r1, err := g.eng.Create(g.ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	g.clock.Advance(59 * time.Minute)
	r2, err := g.eng.Create(g.ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, r1.Job.ID, r2.Job.ID)
	g.clock.Advance(time.Minute)
	r3, err := g.eng.Create(g.ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	assert.False(t, r3.Existing, "the key is released when its retention ends")
}

func withRetention(s jobstate.Spec, d time.Duration) jobstate.Spec {
	s.Policy.Idempotency.Retention = d
	return s
}

func testCreationGuardAndEffect(t *testing.T, newStore NewStore) {
	var credits counter
	quota := errors.New("quota exceeded")
	h := imagegen.Plain()
	h.Create = hook.Guard{Name: "quota", Func: func(_ context.Context, in jobstate.GuardInput) error {
		if in.Actor == "broke" {
			return quota
		}
		return nil
	}}
	h.ReserveCredits = hook.Effect{Name: "reserve credits", Func: credits.effect}
	f := newFixture(t, newStore, nil, imagegen.Spec(h))
	_, err := f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Actor: "broke", Key: "k1"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.ErrorIs(t, err, quota)
	assert.Zero(t, credits.get(), "no effect when the guard refuses")

	var wg sync.WaitGroup
	ids := make([]uuid.UUID, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := f.eng.Create(f.ctx, jobstate.NewJob{Machine: imagegen.Name, Actor: "alice", Key: "k2", Payload: []byte("p")})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = c.Job.ID
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int64(1), credits.get(), "concurrent creates with one key: one credit reservation")
	for _, id := range ids {
		assert.Equal(t, ids[0], id)
	}

	boom := errors.New("ledger down")
	h.ReserveCredits.Func = func(context.Context, jobstate.Job) error { return boom }
	g := newFixture(t, newStore, nil, imagegen.Spec(h))
	_, err = g.eng.Create(g.ctx, jobstate.NewJob{Machine: imagegen.Name, Key: "k3"})
	assert.ErrorIs(t, err, boom)
	_, err = g.eng.Claim(g.ctx, jobstate.ClaimRequest{Machine: imagegen.Name, Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob, "a failed creation effect leaves no job")
}

// testCancelActive runs the transfer machine with a cancel rule from its
// active states (file delivery allows a cancel from QUEUED only).
func testCancelActive(t *testing.T, newStore NewStore) {
	spec := m.TransferSpec()
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.TClaimed, m.TDownloading, m.TStreaming}, Event: jobstate.EventCancel, To: m.TCancelled})
	f := newFixture(t, newStore, nil, spec)
	j := f.create("transfer", jobstate.NewJob{})
	c := f.claim("transfer", "w")
	_, err := f.eng.Advance(f.ctx, c.Lease, m.StartDownload, jobstate.Call{})
	require.NoError(t, err)
	got, err := f.eng.Cancel(f.ctx, j.ID, jobstate.Call{Actor: "user"})
	require.NoError(t, err)
	assert.Equal(t, m.TCancelled, got.State)
	assert.Zero(t, got.Leases)
	_, err = f.eng.Heartbeat(f.ctx, c.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	assert.ErrorIs(t, err, jobstate.ErrCancelled, "the holder learns of the cancel")
	_, err = f.eng.Advance(f.ctx, c.Lease, m.Stream, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrCancelled)
}

func testDeadlines(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()), bounty.Spec(bounty.Plain()))
	j := f.create(delivery.Name, jobstate.NewJob{TTL: time.Hour})
	assert.True(t, j.Deadline.Equal(Epoch.Add(time.Hour)))
	f.clock.Advance(time.Hour - time.Nanosecond)
	assert.Zero(t, f.sweep().Expired)
	f.clock.Advance(time.Nanosecond)
	assert.Equal(t, 1, f.sweep().Expired)
	got := f.get(j.ID)
	assert.Equal(t, delivery.Expired, got.State)
	assert.Equal(t, jobstate.OutcomeExpired, got.Outcome)

	// Lazy expiry on read (bounty marketplace), with judging submissions failed.
	b := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer", Deadline: f.clock.Now().Add(time.Minute)})
	f.fire(b.ID, bounty.Fund, "buyer")
	c, err := f.eng.ClaimJob(f.ctx, b.ID, jobstate.ClaimRequest{Worker: "w", TTL: time.Hour})
	require.NoError(t, err)
	f.clock.Advance(time.Minute)
	assert.Equal(t, bounty.Funded, f.get(b.ID).State, "the store still holds funded")
	read, err := f.eng.Get(f.ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, bounty.Expired, read.State, "expired on read")
	st := f.snapshot(b.ID)
	assert.Equal(t, jobstate.ExecAborted, st.Execs[0].Status)
	_, err = f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
}

// testExhaustChain: image generation, on its literal machine, parks
// failures in a waiting "failed" state and re-queues them with exponential
// backoff while retryCount, incremented, stays below MAX_RETRIES (3); the
// third failure goes on to dead_letter in the same write: three attempts.
func testExhaustChain(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, imagegen.Spec(imagegen.Plain()))
	j := f.create(imagegen.Name, jobstate.NewJob{})
	delays := []time.Duration{2 * time.Second, 4 * time.Second}
	for i := 0; i < imagegen.MaxRetries; i++ {
		c := f.claim(imagegen.Name, "w")
		got, err := f.eng.Fail(f.ctx, c.Lease, errors.New("API timeout"))
		require.NoError(t, err)
		if i < imagegen.MaxRetries-1 {
			assert.Equal(t, imagegen.Failed, got.State)
			assert.True(t, got.NotBefore.Equal(f.clock.Now().Add(delays[i])), "exponential backoff %d", i)
			f.clock.Advance(delays[i])
			f.sweep()
		} else {
			assert.Equal(t, imagegen.DeadLetter, got.State)
			assert.Equal(t, jobstate.OutcomeDeadLettered, got.Outcome)
			assert.Equal(t, imagegen.EngineMaxRetries, got.RetryCount, "the engine counts the retried failures")
			assert.Equal(t, imagegen.MaxRetries, got.Attempt)
		}
	}
	h, err := f.eng.History(f.ctx, j.ID)
	require.NoError(t, err)
	last := h[len(h)-2:]
	assert.Equal(t, []jobstate.Event{jobstate.EventFail, jobstate.EventExhaust}, []jobstate.Event{last[0].Event, last[1].Event})
	assert.Equal(t, last[0].Version+1, last[1].Version)
}

// testErrorClasses runs file delivery's literal machine with its error
// taxonomy (delivery.Classify).
func testErrorClasses(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))

	j := f.create(delivery.Name, jobstate.NewJob{})
	c := f.claim(delivery.Name, "w")
	_, err := f.eng.Advance(f.ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser})
	require.NoError(t, err)
	got, err := f.eng.Fail(f.ctx, c.Lease, jobstate.RetryAfter(errors.New("429"), 42*time.Second))
	require.NoError(t, err)
	assert.Equal(t, delivery.Queued, got.State, "retryable: straight back to QUEUED")
	assert.True(t, got.NotBefore.Equal(f.clock.Now().Add(42*time.Second)), "Retry-After wins over the backoff")
	assert.Equal(t, jobstate.ClassRetryable, got.ErrorClass)

	f.clock.Advance(42 * time.Second)
	c = f.claim(delivery.Name, "w")
	assert.Equal(t, 2, c.Job.Attempt)
	got, err = f.eng.Fail(f.ctx, c.Lease, &delivery.HTTPError{Service: "disk", Status: 404})
	require.NoError(t, err)
	assert.Equal(t, delivery.Failed, got.State, "the classifier made 404 permanent")
	assert.Equal(t, jobstate.ClassPermanent, got.ErrorClass)
	assert.Equal(t, 1, got.RetryCount, "a permanent error never retries")

	k := f.create(delivery.Name, jobstate.NewJob{})
	c = f.claim(delivery.Name, "w")
	got, err = f.eng.Fail(f.ctx, c.Lease, context.DeadlineExceeded)
	require.NoError(t, err)
	assert.Equal(t, delivery.Queued, got.State, "deadline exceeded is retryable")
	assert.Equal(t, k.ID, got.ID)
	_ = j
}

func testSnooze(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, docproc.Spec(docproc.Plain()))
	j := f.create(docproc.Name, jobstate.NewJob{})
	f.fire(j.ID, docproc.Submit, "u")
	for i := 0; i < 5; i++ {
		c := f.claim(docproc.Name, "w")
		got, err := f.eng.Snooze(f.ctx, c.Lease, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 0, got.RetryCount, "a snooze is no failure")
		assert.True(t, got.NotBefore.Equal(f.clock.Now().Add(time.Minute)))
		f.clock.Advance(time.Minute)
		f.sweep()
	}
	c := f.claim(docproc.Name, "w")
	assert.Equal(t, 6, c.Job.Attempt)
	_, err := f.eng.Snooze(f.ctx, c.Lease, -time.Second)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}

func testSeveralActiveStates(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	j := f.create(delivery.Name, jobstate.NewJob{})
	c := f.claim(delivery.Name, "w")
	for _, ev := range []jobstate.Event{delivery.StartDownload, delivery.StreamToLocalAPI} {
		f.clock.Advance(20 * time.Second)
		l, err := f.eng.Heartbeat(f.ctx, c.Lease)
		require.NoError(t, err)
		c.Lease = l
		_, err = f.eng.Advance(f.ctx, c.Lease, ev, jobstate.Call{Args: activeUser})
		require.NoError(t, err)
	}
	assert.Equal(t, delivery.Streaming, f.get(j.ID).State)
	assert.Equal(t, 1, f.get(j.ID).Leases, "one lease across CLAIMED, DOWNLOADING, STREAMING")
	got, err := f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	assert.Equal(t, delivery.Delivered, got.State)

	// A heartbeat exactly T old is not yet stuck; one strictly older takes
	// the abandon rule (file delivery's heartbeat_timeout), with attempt+1
	// at the next claim.
	k := f.create(delivery.Name, jobstate.NewJob{})
	f.claim(delivery.Name, "w")
	f.clock.Advance(delivery.HeartbeatTimeout)
	assert.Zero(t, f.sweep().Aborted, "a heartbeat exactly T old is not stuck")
	f.clock.Advance(time.Nanosecond)
	assert.Equal(t, 1, f.sweep().Aborted)
	h, err := f.eng.History(f.ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.EventAbandon, h[len(h)-1].Event)
	assert.Equal(t, delivery.Queued, f.get(k.ID).State)
	assert.Equal(t, 2, f.claim(delivery.Name, "w").Job.Attempt)
}

func testClaimGuards(t *testing.T, newStore NewStore) {
	spec := m.QueueSpec()
	for i := range spec.Rules {
		if spec.Rules[i].Event == jobstate.EventClaim {
			spec.Rules[i].Guard = func(_ context.Context, in jobstate.GuardInput) error {
				if in.Actor == in.Job.Owner {
					return errors.New("no self-dealing")
				}
				return nil
			}
		}
	}
	f := newFixture(t, newStore, nil, spec)
	mine := f.create("queue", jobstate.NewJob{Owner: "w"})
	f.fire(mine.ID, m.Submit, "w")
	f.clock.Advance(time.Second)
	theirs := f.create("queue", jobstate.NewJob{Owner: "other"})
	f.fire(theirs.ID, m.Submit, "other")
	c := f.claim("queue", "w")
	assert.Equal(t, theirs.ID, c.Job.ID, "the older job is passed over for this worker")
	_, err := f.eng.Claim(f.ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
	_, err = f.eng.ClaimJob(f.ctx, mine.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.Equal(t, mine.ID, f.claim("queue", "x").Job.ID)
}

func testStuck(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	f.create(delivery.Name, jobstate.NewJob{})
	f.create(delivery.Name, jobstate.NewJob{})
	a := f.claim(delivery.Name, "a")
	f.clock.Advance(10 * time.Second)
	b := f.claim(delivery.Name, "b")
	f.clock.Advance(10 * time.Second)
	stuck, err := f.eng.Stuck(f.ctx, delivery.Name, 15*time.Second, 0)
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	assert.Equal(t, a.Job.ID, stuck[0].ID)
	_, err = f.eng.Heartbeat(f.ctx, a.Lease)
	require.NoError(t, err)
	stuck, err = f.eng.Stuck(f.ctx, delivery.Name, 5*time.Second, 0)
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	assert.Equal(t, b.Job.ID, stuck[0].ID)
}

func testDerived(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	j := f.create(exactlyonce.Name, jobstate.NewJob{})
	check := func() {
		t.Helper()
		st := f.snapshot(j.ID)
		require.NoError(t, jobstate.CheckProjection(st.Job, st.Execs))
	}
	check()
	_, err := f.eng.Fire(f.ctx, j.ID, jobstate.EventCancel, jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "no direct moves of a derived job")
	c := f.claim(exactlyonce.Name, "w")
	check()
	_, err = f.eng.Fail(f.ctx, c.Lease, errors.New("crash"))
	require.NoError(t, err)
	check()
	c = f.claim(exactlyonce.Name, "w")
	check()
	_, err = f.eng.Start(f.ctx, c.Lease)
	require.NoError(t, err)
	check()
	_, err = f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	check()
	_, err = f.eng.Finish(f.ctx, c.Lease)
	require.NoError(t, err)
	check()
}

// testRuleEffects: a rule's effect runs inside the move's atomic write,
// once per firing; its error aborts the move.
// testRuleEffects runs image generation's literal machine, whose safety
// rejection writes an audit record.
func testRuleEffects(t *testing.T, newStore NewStore) {
	var audits counter
	fail := false
	h := imagegen.Plain()
	h.AuditSafeBlock = hook.Effect{Name: "audit SAFE_BLOCK", Func: func(ctx context.Context, j jobstate.Job) error {
		if fail {
			return errors.New("audit log down")
		}
		assert.Equal(t, imagegen.Rejected, j.State, "the effect sees the job as the move leaves it")
		return audits.effect(ctx, j)
	}}
	f := newFixture(t, newStore, nil, imagegen.Spec(h))
	j := f.create(imagegen.Name, jobstate.NewJob{})
	c := f.claim(imagegen.Name, "w")
	fail = true
	before := f.snapshot(j.ID)
	_, err := f.eng.Advance(f.ctx, c.Lease, imagegen.Reject, jobstate.Call{Reason: "nsfw"})
	assert.EqualError(t, err, "audit log down")
	assert.Equal(t, before, f.snapshot(j.ID), "a failed rule effect writes nothing")
	fail = false
	got, err := f.eng.Advance(f.ctx, c.Lease, imagegen.Reject, jobstate.Call{Reason: "nsfw"})
	require.NoError(t, err)
	assert.Equal(t, imagegen.Rejected, got.State)
	assert.Equal(t, int64(1), audits.get())
	st := f.snapshot(j.ID)
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
	f := newFixture(t, newStore, nil, spec)
	j := f.create("queue", jobstate.NewJob{})
	_, err := f.eng.Fire(f.ctx, j.ID, m.Submit, jobstate.Call{Actor: "alice", Reason: "ready", Args: 42})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "alice", got[0].Transition.Actor)
	assert.Equal(t, "ready", got[0].Transition.Reason)
	assert.Equal(t, m.Queued, got[0].Transition.To)
	assert.Equal(t, 42, got[0].Args)
	_, ok := jobstate.FiringOf(f.ctx)
	assert.False(t, ok, "no firing outside a rule effect")
}

// testLazyExpiryEverywhere: on a lazily expiring machine, every operation
// on an overdue job finds it expired, not only Get.
func testLazyExpiryEverywhere(t *testing.T, newStore NewStore) {
	var refunds counter
	f := newFixture(t, newStore, nil, bountySpec(&refunds))
	mk := func() (jobstate.Job, jobstate.Lease) {
		j := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer", Deadline: f.clock.Now().Add(time.Minute)})
		f.fire(j.ID, bounty.Fund, "buyer")
		c, err := f.eng.ClaimJob(f.ctx, j.ID, jobstate.ClaimRequest{Worker: "w", TTL: time.Hour})
		require.NoError(t, err)
		return j, c.Lease
	}
	a, la := mk()
	b, _ := mk()
	c, _ := mk()
	f.clock.Advance(time.Minute)
	_, err := f.eng.Succeed(f.ctx, la, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost, "a verdict after the deadline finds the bounty expired")
	assert.Equal(t, bounty.Expired, f.get(a.ID).State)
	_, err = f.eng.Cancel(f.ctx, b.ID, jobstate.Call{Actor: "buyer"})
	assert.ErrorIs(t, err, jobstate.ErrTerminal)
	assert.Equal(t, bounty.Expired, f.get(b.ID).State)
	_, err = f.eng.ClaimJob(f.ctx, c.ID, jobstate.ClaimRequest{Worker: "w2"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
	assert.Equal(t, bounty.Expired, f.get(c.ID).State)
	_, err = f.eng.Apply(f.ctx, c.ID, "refund", jobstate.Call{Actor: "buyer"})
	assert.NoError(t, err)
}

func testOverdueNotClaimed(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	late := f.create(delivery.Name, jobstate.NewJob{TTL: time.Minute})
	f.clock.Advance(time.Second)
	fresh := f.create(delivery.Name, jobstate.NewJob{TTL: time.Hour})
	f.clock.Advance(time.Minute)
	c := f.claim(delivery.Name, "w")
	assert.Equal(t, fresh.ID, c.Job.ID, "the overdue job is passed over, left for the sweep")
	_, err := f.eng.ClaimJob(f.ctx, late.ID, jobstate.ClaimRequest{Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNotClaimable)
	assert.Equal(t, 1, f.sweep().Expired)
	assert.Equal(t, delivery.Expired, f.get(late.ID).State)
}

func testRequeueThenExpire(t *testing.T, newStore NewStore) {
	spec := m.QueueSpec()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "EXPIRED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired})
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.Queued}, Event: jobstate.EventExpire, To: "EXPIRED"})
	f := newFixture(t, newStore, nil, spec)
	j := f.create("queue", jobstate.NewJob{TTL: 10 * time.Second})
	f.fire(j.ID, m.Submit, "u")
	c := f.claim("queue", "w")
	_, err := f.eng.Fail(f.ctx, c.Lease, errors.New("timeout"))
	require.NoError(t, err)
	f.clock.Advance(time.Minute) // past the backoff and the deadline
	r := f.sweep()
	assert.Equal(t, 1, r.Requeued)
	assert.Equal(t, 1, r.Expired, "requeued into a state that can expire, the job expires in the same sweep")
	assert.Equal(t, jobstate.State("EXPIRED"), f.get(j.ID).State)
}

func testFireNeedsLease(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()))
	j := f.create(delivery.Name, jobstate.NewJob{})
	c := f.claim(delivery.Name, "w1")
	before := f.snapshot(j.ID)
	_, err := f.eng.Fire(f.ctx, j.ID, delivery.StartDownload, jobstate.Call{Actor: "mallory", Args: activeUser})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Equal(t, before, f.snapshot(j.ID))
	_, err = f.eng.Advance(f.ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser})
	assert.NoError(t, err, "the lease holder may")
}

func testRecoverWorker(t *testing.T, newStore NewStore) {
	var fx counter
	f := newFixture(t, newStore, nil, exactlyonce.Spec(), bounty.Spec(bounty.Plain()))
	a := f.create(exactlyonce.Name, jobstate.NewJob{})
	f.create(exactlyonce.Name, jobstate.NewJob{})
	ca := f.claim(exactlyonce.Name, "server-1")
	cb := f.claim(exactlyonce.Name, "server-1")
	_, err := f.eng.Start(f.ctx, cb.Lease)
	require.NoError(t, err)
	_, err = f.eng.Commit(f.ctx, cb.Lease, jobstate.CommitInput{Effect: fx.effect})
	require.NoError(t, err)
	b := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	f.fire(b.ID, bounty.Fund, "buyer")
	_, err = f.eng.ClaimJob(f.ctx, b.ID, jobstate.ClaimRequest{Worker: "server-1"})
	require.NoError(t, err)
	other, err := f.eng.ClaimJob(f.ctx, b.ID, jobstate.ClaimRequest{Worker: "server-2"})
	require.NoError(t, err)

	_, err = f.eng.RecoverWorker(f.ctx, "")
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	r, err := f.eng.RecoverWorker(f.ctx, "server-1") // leases still live: no waiting for them
	require.NoError(t, err)
	assert.Equal(t, 3, r.Jobs)
	assert.Equal(t, 1, r.Finalized)
	assert.Equal(t, 2, r.Aborted)
	assert.Equal(t, exactlyonce.Pending, f.get(a.ID).State)
	assert.Equal(t, exactlyonce.Succeeded, f.get(cb.Job.ID).State)
	assert.Equal(t, int64(1), fx.get(), "finalized without re-applying the effect")
	st := f.snapshot(b.ID)
	assert.Equal(t, bounty.Funded, st.Job.State)
	assert.Equal(t, 1, st.Job.Leases, "server-2's submission is untouched")
	_, err = f.eng.Heartbeat(f.ctx, ca.Lease)
	assert.ErrorIs(t, err, jobstate.ErrLeaseLost)
	_, err = f.eng.Heartbeat(f.ctx, other.Lease)
	assert.NoError(t, err)
}

func testRequireStart(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, exactlyonce.Spec())
	f.create(exactlyonce.Name, jobstate.NewJob{})
	c := f.claim(exactlyonce.Name, "w")
	before := f.snapshot(c.Job.ID)
	_, err := f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "LEASED → COMMITTED is refused")
	assert.Equal(t, before, f.snapshot(c.Job.ID))
	_, err = f.eng.Start(f.ctx, c.Lease)
	require.NoError(t, err)
	_, err = f.eng.Start(f.ctx, c.Lease)
	require.NoError(t, err, "a repeated start changes nothing and succeeds")
	_, err = f.eng.Succeed(f.ctx, c.Lease, jobstate.CommitInput{})
	assert.NoError(t, err)
}

// testCommittedOnlyFinishes: a committed job leaves its active states only
// by finishing, even through a user rule into a success state.
func testCommittedOnlyFinishes(t *testing.T, newStore NewStore) {
	spec := m.TransferSpec()
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.TStreaming}, Event: "ack", To: m.TDelivered})
	f := newFixture(t, newStore, nil, spec)
	j := f.create("transfer", jobstate.NewJob{})
	c := f.claim("transfer", "w")
	for _, ev := range []jobstate.Event{m.StartDownload, m.Stream} {
		_, err := f.eng.Advance(f.ctx, c.Lease, ev, jobstate.Call{})
		require.NoError(t, err)
	}
	_, err := f.eng.Commit(f.ctx, c.Lease, jobstate.CommitInput{})
	require.NoError(t, err)
	before := f.snapshot(j.ID)
	_, err = f.eng.Advance(f.ctx, c.Lease, "ack", jobstate.Call{})
	assert.ErrorIs(t, err, jobstate.ErrAlreadyCommitted)
	assert.Equal(t, before, f.snapshot(j.ID))
	got, err := f.eng.Finish(f.ctx, c.Lease)
	require.NoError(t, err)
	assert.Equal(t, m.TDelivered, got.State)
}

// testRetryWithoutRoute: a per-job retry override on a machine without
// retry rules makes a retryable failure fail the job, not stick it.
func testRetryWithoutRoute(t *testing.T, newStore NewStore) {
	f := newFixture(t, newStore, nil, toggleLikeSpec())
	f.create("plain", jobstate.NewJob{Retry: &jobstate.RetryOverride{MaxRetries: jobstate.Retries(5)}})
	c := f.claim("plain", "w")
	got, err := f.eng.Fail(f.ctx, c.Lease, errors.New("flaky"))
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("failed"), got.State)
	k := f.create("plain", jobstate.NewJob{Retry: &jobstate.RetryOverride{MaxRetries: jobstate.Retries(5)}})
	f.claim("plain", "w")
	f.clock.Advance(time.Hour)
	r := f.sweep()
	assert.Equal(t, 1, r.Failed, "a lost lease with no retry route fails the job")
	assert.Equal(t, jobstate.State("failed"), f.get(k.ID).State)
}

// toggleLikeSpec is a machine with no retry route: ready → run → done or
// failed.
func toggleLikeSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "plain",
		States: []jobstate.StateSpec{
			{Name: "ready", Kind: jobstate.KindReady},
			{Name: "run", Kind: jobstate.KindActive},
			{Name: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "ready",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"ready"}, Event: jobstate.EventClaim, To: "run"},
			{From: []jobstate.State{"run"}, Event: jobstate.EventSucceed, To: "done"},
			{From: []jobstate.State{"run"}, Event: jobstate.EventFail, To: "failed"},
		},
	}
}

func testIfVersion(t *testing.T, newStore NewStore) {
	var refunds counter
	f := newFixture(t, newStore, nil, delivery.Spec(delivery.Plain()), bountySpec(&refunds))
	j := f.create(delivery.Name, jobstate.NewJob{})
	c := f.claim(delivery.Name, "w")
	_, err := f.eng.Advance(f.ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser, IfVersion: c.Job.Version + 7})
	assert.ErrorIs(t, err, jobstate.ErrVersionConflict)
	_, err = f.eng.Advance(f.ctx, c.Lease, delivery.StartDownload, jobstate.Call{Args: activeUser, IfVersion: f.get(j.ID).Version})
	assert.NoError(t, err)
	b := f.create(bounty.Name, jobstate.NewJob{Owner: "buyer", Actor: "buyer"})
	got := f.fire(b.ID, jobstate.EventCancel, "buyer")
	_, err = f.eng.Apply(f.ctx, b.ID, "refund", jobstate.Call{Actor: "buyer", IfVersion: got.Version - 1})
	assert.ErrorIs(t, err, jobstate.ErrVersionConflict)
	assert.Zero(t, refunds.get())
	_, err = f.eng.Apply(f.ctx, b.ID, "refund", jobstate.Call{Actor: "buyer", IfVersion: got.Version})
	assert.NoError(t, err)
}

// testRedrive: an operator runs a dead-lettered image generation job again
// (its literal machine allows it from dead_letter); the dead letter stays
// final, a new job takes its place, once.
func testRedrive(t *testing.T, newStore NewStore) {
	var credits counter
	hooks := imagegen.Plain()
	hooks.ReserveCredits = hook.Effect{Name: "reserve credits", Func: credits.effect}
	f := newFixture(t, newStore, nil, imagegen.Spec(hooks))
	j := f.create(imagegen.Name, jobstate.NewJob{Payload: []byte("a fox"), Owner: "alice", Priority: 3})
	_, err := f.eng.Redrive(f.ctx, j.ID, jobstate.Call{Actor: "ops"})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "only from the states the machine names")
	for i := 0; i < imagegen.MaxRetries; i++ {
		c := f.claim(imagegen.Name, "w")
		_, err := f.eng.Fail(f.ctx, c.Lease, errors.New("API 500"))
		require.NoError(t, err)
		f.clock.Advance(time.Minute)
		f.sweep()
	}
	dead := f.snapshot(j.ID)
	require.Equal(t, imagegen.DeadLetter, dead.Job.State)

	n, err := f.eng.Redrive(f.ctx, j.ID, jobstate.Call{Actor: "ops", Reason: "API fixed"})
	require.NoError(t, err)
	assert.NotEqual(t, j.ID, n.ID)
	assert.Equal(t, imagegen.Queued, n.State)
	assert.Equal(t, []byte("a fox"), n.Payload)
	assert.Equal(t, "alice", n.Owner)
	assert.Equal(t, 3, n.Priority)
	assert.Equal(t, imagegen.EngineMaxRetries, n.MaxRetries)
	assert.Equal(t, int64(2), credits.get(), "the new job goes through the creation effect")
	h, err := f.eng.History(f.ctx, n.ID)
	require.NoError(t, err)
	assert.Equal(t, "ops", h[0].Actor)
	assert.Contains(t, h[0].Reason, j.ID.String())
	assert.Contains(t, h[0].Reason, "API fixed")

	after := f.snapshot(j.ID)
	assert.Equal(t, imagegen.DeadLetter, after.Job.State, "the dead letter stays final")
	assert.Equal(t, dead.History, after.History)
	require.Len(t, after.Effects, 1)
	assert.Equal(t, jobstate.RedriveEffect, after.Effects[0].Name)
	assert.Equal(t, "ops", after.Effects[0].Actor)

	_, err = f.eng.Redrive(f.ctx, j.ID, jobstate.Call{Actor: "ops"})
	assert.ErrorIs(t, err, jobstate.ErrEffectApplied, "a job is redriven once")
	assert.Equal(t, int64(2), credits.get())
}

// testRedriveObserverAndFiring: observers hear of the new job after the
// old job's update, so they may act on the old job; the creation effect
// sees the creation record through FiringOf. It runs the parking machine,
// redriven from rejected.
func testRedriveObserverAndFiring(t *testing.T, newStore NewStore) {
	var reasons []string
	spec := m.ParkingSpec()
	spec.Policy.RedriveFrom = []jobstate.State{m.PRejected}
	spec.Create.Effect = func(ctx context.Context, j jobstate.Job) error {
		f, ok := jobstate.FiringOf(ctx)
		require.True(t, ok)
		reasons = append(reasons, f.Transition.Actor+": "+f.Transition.Reason)
		return nil
	}
	var f *fixture
	var old uuid.UUID
	var touched bool
	obs := jobstate.WithObserver(func(ctx context.Context, j jobstate.Job, tr jobstate.Transition) {
		if tr.Event == jobstate.EventCreate && j.ID != old && old != uuid.Nil {
			_, err := f.eng.Apply(ctx, old, "nothing", jobstate.Call{}) // takes the old job's lock
			touched = errors.Is(err, jobstate.ErrUnknownEffect)
		}
	})
	f = newFixture(t, newStore, []jobstate.Option{obs}, spec)
	j := f.create("parking", jobstate.NewJob{Actor: "alice", Reason: "first"})
	f.fire(j.ID, m.Reject, "moderator")
	old = j.ID
	_, err := f.eng.Redrive(f.ctx, j.ID, jobstate.Call{Actor: "ops"})
	require.NoError(t, err)
	assert.True(t, touched, "the observer ran, and could use the old job")
	require.Len(t, reasons, 2)
	assert.Equal(t, "alice: first", reasons[0])
	assert.Contains(t, reasons[1], "ops: redrive of job")
}

// bountySpec is the bounty marketplace's literal machine with its Plain
// hooks, the refund counted by refunds.
func bountySpec(refunds *counter) jobstate.Spec {
	h := bounty.Plain()
	h.Refund = hook.Effect{Name: "refund", Func: refunds.effect}
	return bounty.Spec(h)
}

// activeUser is file delivery's start_download argument for a user who is
// ACTIVE.
var activeUser = delivery.DownloadArgs{User: delivery.UserActive}
