// Package enginesuite is the engine's behaviour suite: the lifecycles of
// the machines jobstate was built to run, the commit boundary and its
// failure modes, retries, idempotency, expiry, recovery, and a stress test
// of crashing workers, all through a jobstate.Engine on a store the caller
// makes.
//
// The root module's engine_test.go runs it on memstore;
// storetest.RunEngine runs it on any store, as part of storetest.Run. It
// imports only the standard library, github.com/google/uuid and the root
// module's own packages, so that the root module's tests need no test
// library.
package enginesuite

import (
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

// NewStore makes a fresh, empty store for one test. It may register
// cleanups with t.Cleanup.
type NewStore func(t *testing.T) jobstate.Store

// DefaultStressJobs is the number of jobs of the stress test unless
// Sizes.StressJobs says otherwise.
const DefaultStressJobs = 10_000

// Sizes are the sizes of the suite's heavier tests; a field of zero or
// less takes its default.
type Sizes struct {
	// StressJobs is the number of jobs of the stress test (workers
	// crashing before and after commits while a sweeper moves the clock):
	// DefaultStressJobs when not positive, at most 1,000 with -short.
	StressJobs int
}

// stressJobs returns the number of jobs of the stress test before the
// -short limit.
func (s Sizes) stressJobs() int {
	if s.StressJobs <= 0 {
		return DefaultStressJobs
	}
	return s.StressJobs
}

// Epoch returns the fake clock's starting time in every test of the
// suite: 2026-01-01 00:00 UTC.
func Epoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// workers is the number of goroutines of the suite's concurrent tests.
const workers = 8

// Run runs the engine's behaviour on stores made by newStore, each test a
// subtest named for the behaviour it checks, every one on a fresh store:
// every operation, the commit boundary and its failure modes, retries,
// idempotency, expiry and recovery. sizes set the size of the stress
// test.
func Run(t *testing.T, newStore NewStore, sizes Sizes) {
	stressJobs := sizes.stressJobs()
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"DocProcTraces", testDocProcTraces},
		{"RefusedOperationsChangeNothing", testRefusals},
		{"ObserversSeeEveryTransition", testObservers},
		{"HeartbeatKeepsLease", testHeartbeat},
		{"ExpiredLeaseCannotCommitAfterRerun", testExpiredLeaseCannotCommitAfterRerun},
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
		{"StressWorkersCrashes", func(t *testing.T, ns NewStore) { testStress(t, ns, stressJobs) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}
