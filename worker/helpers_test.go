package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// The test machine (machines.TaskSpec): QUEUED → RUNNING (→ FETCHING) →
// DONE, retries back to QUEUED after a 1 s backoff, three retries,
// cancellable everywhere, and a "reject" out of the active states.
const (
	queued    = machines.TaskQueued
	running   = machines.TaskRunning
	fetching  = machines.TaskFetching
	done      = machines.TaskDone
	failed    = machines.TaskFailed
	cancelled = machines.TaskCancelled
	rejected  = machines.TaskRejected
)

var errBadInput = machines.ErrTaskBadInput

func taskSpec(name string) jobstate.Spec { return machines.TaskSpec(name) }

func taskMachine(t testing.TB, name string) *jobstate.Definition {
	t.Helper()
	def, err := jobstate.NewDefinition(taskSpec(name))
	require.NoError(t, err)
	return def
}

// newEnv is a jobstatetest.Env with the "task" machine.
func newEnv(t *testing.T, opts ...jobstate.Option) *jobstatetest.Env {
	t.Helper()
	return jobstatetest.New(t, append([]jobstate.Option{jobstate.WithMachines(taskMachine(t, "task"))}, opts...)...)
}

// storeEnv is an engine on a given store, with a manual clock.
type storeEnv struct {
	eng   *jobstate.Engine
	clock *jobstatetest.Clock
}

func newStoreEnv(t testing.TB, store jobstate.Store, defs ...*jobstate.Definition) storeEnv {
	t.Helper()
	if len(defs) == 0 {
		defs = []*jobstate.Definition{taskMachine(t, "task")}
	}
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	eng, err := jobstate.New(store, jobstate.WithMachines(defs...), jobstate.WithClock(clk))
	require.NoError(t, err)
	return storeEnv{eng: eng, clock: clk}
}

// countingStore counts ClaimNext calls. It wraps the store through the
// interface, so that it offers no capability but those of jobstate.Store.
type countingStore struct {
	jobstate.Store
	claims atomic.Int64
}

func (s *countingStore) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	s.claims.Add(1)
	return s.Store.ClaimNext(ctx, q, fn)
}

// batchStore adds the BatchClaimer capability, by repeated ClaimNext
// calls (enough for the worker's use; not all-or-nothing on errors), and
// records the sizes asked for.
type batchStore struct {
	countingStore
	mu    sync.Mutex
	sizes []int
}

func (s *batchStore) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
	return claimOneByOne(ctx, s.Store, q, n, fn)
}

// claimOneByOne claims up to n jobs from store by ClaimNext calls, as a
// BatchClaimer's ClaimBatch does.
func claimOneByOne(ctx context.Context, store jobstate.Store, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	var out []jobstate.Job
	for len(out) < n {
		j, err := store.ClaimNext(ctx, q, fn)
		if errors.Is(err, jobstate.ErrNoJob) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func (s *batchStore) batchSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

// notifyStore adds the Notifier capability: every write that leaves a job
// ready signals the subscribers.
type notifyStore struct {
	countingStore
	mu   sync.Mutex
	subs map[chan struct{}]bool
}

func newNotifyStore() *notifyStore {
	return &notifyStore{countingStore: countingStore{Store: memstore.New()}, subs: make(map[chan struct{}]bool)}
}

func (s *notifyStore) Subscribe(ctx context.Context, _ ...string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = true
	s.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, ch)
			close(ch)
			s.mu.Unlock()
		})
	}
	context.AfterFunc(ctx, stop)
	return ch, stop, nil
}

func (s *notifyStore) signal(j jobstate.Job) {
	if j.Kind != jobstate.KindReady {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *notifyStore) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	j, created, err := s.Store.Create(ctx, machine, key, fn)
	if err == nil && created {
		s.signal(j)
	}
	return j, created, err
}

func (s *notifyStore) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	j, err := s.Store.Update(ctx, id, fn)
	if err == nil {
		s.signal(j)
	}
	return j, err
}

// runWorker runs w in a goroutine and returns a channel that gets Run's
// error.
func runWorker(ctx context.Context, w *worker.Worker) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Run(ctx) }()
	return ch
}

// recv waits for a value from ch, failing the test if ctx ends first (the
// test's deadline, as a guard against a hang; nothing waits on time).
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("timed out waiting: the worker is stuck")
		panic("unreachable")
	}
}

func waitPending(t testing.TB, clk *jobstatetest.Clock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clk.WaitPending(ctx, n), "waiting for %d timers (have %d)", n, clk.Pending())
}

func waitTimer(t testing.TB, clk *jobstatetest.Clock, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, clk.WaitTimer(ctx, at), "waiting for a timer at %s", at)
}

func ok() (jobstate.CommitInput, error) { return jobstate.CommitInput{}, nil }
