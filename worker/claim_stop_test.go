package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// holdingStore lets claims through until armed; from then on each claim
// is made in the store, reported on claimed, and its answer held until
// release is closed: a claim in flight whose jobs are leased already, as
// a claim committed by a remote store whose answer has not arrived yet.
type holdingStore struct {
	jobstate.Store
	armed   atomic.Bool
	claimed chan struct{}
	release chan struct{}
}

func newHoldingStore() *holdingStore {
	return &holdingStore{Store: memstore.New(), claimed: make(chan struct{}, 16), release: make(chan struct{})}
}

// hold reports an armed claim and waits for the release.
func (s *holdingStore) hold() {
	if s.armed.Load() {
		s.claimed <- struct{}{}
		<-s.release
	}
}

func (s *holdingStore) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	j, err := s.Store.ClaimNext(ctx, q, fn)
	s.hold()
	return j, err
}

// batchHoldingStore is holdingStore with the BatchClaimer capability,
// by repeated ClaimNext calls of the store it wraps.
type batchHoldingStore struct{ *holdingStore }

func (s batchHoldingStore) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	out, err := claimOneByOne(ctx, s.Store, q, n, fn)
	if err != nil {
		return nil, err
	}
	s.hold()
	return out, nil
}

// claimStopGrace is the grace period of TestStopWaitsForClaimInFlight:
// shorter than the lease (30 s), and no other timer of the worker is due
// at its end.
const claimStopGrace = 7 * time.Second

// TestStopWaitsForClaimInFlight: a stop while a handler's goroutine has
// a claim in flight (its handler returned, it claims the next job) does
// not let Run return before that claim has returned and the leases of the
// jobs it took are given back, whether the claim returns after a hard
// stop or after the grace period ended: the jobs are ready again with no
// live execution, their executions ended, no failure counted, and their
// handlers never started.
func TestStopWaitsForClaimInFlight(t *testing.T) {
	stores := []struct {
		name  string
		store func(*holdingStore) jobstate.Store
	}{
		{"one-by-one", func(s *holdingStore) jobstate.Store { return s }},
		{"batch", func(s *holdingStore) jobstate.Store { return batchHoldingStore{s} }},
	}
	stops := []struct {
		name string
		// second ends the grace period once the first signal's grace
		// timer is armed.
		second func(w *worker.Worker, env storeEnv)
		hard   bool
	}{
		{"hard", func(w *worker.Worker, _ storeEnv) { w.Stop() }, true},
		{"grace-ended", func(_ *worker.Worker, env storeEnv) { env.clock.Advance(claimStopGrace) }, false},
	}
	for _, sc := range stores {
		for _, st := range stops {
			t.Run(sc.name+"/"+st.name, func(t *testing.T) { testStopWithClaimInFlight(t, sc.store, st.second, st.hard) })
		}
	}
}

// testStopWithClaimInFlight runs one case of TestStopWaitsForClaimInFlight
// on the store made by store; second follows the first stop signal once
// the claim is in flight. hard says whether it is a hard stop, which is
// seen by the time Stop returns: the job claimed then is never started.
func testStopWithClaimInFlight(t *testing.T, store func(*holdingStore) jobstate.Store, second func(*worker.Worker, storeEnv), hard bool) {
	hs := newHoldingStore()
	env := newStoreEnv(t, store(hs))
	ctx := context.Background()
	first, err := env.eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte("first")})
	require.NoError(t, err)
	h := newBlocking()
	w, err := worker.New(env.eng, quiet(worker.Handle("task", h, 1), worker.WithClock(env.clock), worker.WithGracePeriod(claimStopGrace))...)
	require.NoError(t, err)
	errc := runWorker(ctx, w)
	tk := recv(t, h.started)
	require.Equal(t, first.Job.ID, tk.Job().ID)

	hs.armed.Store(true)
	next, err := env.eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte("next")})
	require.NoError(t, err)
	h.release <- struct{}{} // the first handler returns; its goroutine claims the next job
	recv(t, hs.claimed)
	j, err := env.eng.Get(ctx, next.Job.ID)
	require.NoError(t, err)
	require.Equal(t, 1, j.Leases, "the claim in flight leased the next job")

	w.Stop()                                                     // the first signal
	waitTimer(t, env.clock, env.clock.Now().Add(claimStopGrace)) // the grace period runs
	second(w, env)
	close(hs.release)
	require.NoError(t, recv(t, errc))

	j, err = env.eng.Get(ctx, next.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, queued, j.State, "given back: ready again")
	assert.Zero(t, j.Leases, "no lease left to lapse once Run has returned")
	assert.Zero(t, j.RetryCount, "giving a lease back is no failure")
	execs, err := env.eng.Executions(ctx, next.Job.ID)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	assert.Equal(t, jobstate.ExecAborted, execs[0].Status, "the execution ended as given back")
	if hard {
		assert.Empty(t, h.started, "a job whose claim returned after the hard stop never started")
	}

	fin, err := env.eng.Get(ctx, first.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, done, fin.State, "the handler that returned before the stop committed")
}
