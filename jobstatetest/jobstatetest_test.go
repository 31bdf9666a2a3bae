package jobstatetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/jobstatetest/envtest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// TestEnvOnMemstore runs envtest's checks on the Env that New makes.
func TestEnvOnMemstore(t *testing.T) {
	envtest.Run(t, func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env {
		return jobstatetest.New(t, opts...)
	})
}

// bareStore hides every optional capability of the store it wraps
// (batches, notifications, counts, listing, savepoints): the Env must need
// none of them.
type bareStore struct{ jobstate.Store }

// TestEnvOnAnyStore runs envtest's checks on an Env from NewWithStore, on
// a store with no optional capability.
func TestEnvOnAnyStore(t *testing.T) {
	envtest.Run(t, func(t testing.TB, opts ...jobstate.Option) *jobstatetest.Env {
		return jobstatetest.NewWithStore(t, bareStore{memstore.New()}, opts...)
	})
}

// TestNewWithStore: the Env runs on the store given, which it leaves to
// the test, and its Store field is left nil.
func TestNewWithStore(t *testing.T) {
	store := memstore.New()
	e := jobstatetest.NewWithStore(t, store, jobstate.WithMachines(queueMachine()))
	if e.Store != nil {
		t.Error("Env.Store is set on a store NewWithStore was given")
	}
	if e.Engine.Store() != jobstate.Store(store) {
		t.Error("the engine does not run on the store given")
	}
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	e.Run("queue", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, nil
	}))
	got, err := store.Get(context.Background(), job.ID)
	if err != nil {
		t.Fatalf("the job is not in the store given: %v", err)
	}
	if got.State != "SUCCEEDED" || !got.CompletedAt.Equal(jobstatetest.Epoch) {
		t.Errorf("the store holds the job %s, completed at %s; want SUCCEEDED at the Env's clock", got.State, got.CompletedAt)
	}
	if m := jobstatetest.New(t, jobstate.WithMachines(queueMachine())); m.Store == nil || m.Engine.Store() != jobstate.Store(m.Store) {
		t.Error("New's Env.Store is not its engine's memstore")
	}
	r := &recorder{}
	func() {
		defer func() {
			if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "nil store") {
				t.Errorf("a nil store: %v, want a fatal error naming it", v)
			}
		}()
		jobstatetest.NewWithStore(r, nil)
	}()
}

// recorder is a TB that records failures instead of failing the test.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	panic("fatal: " + fmt.Sprintf(format, args...))
}

// TestClockTimers: timers fire when the clock reaches them, in time order,
// and Reset and Stop behave as the worker.Timer contract says.
func TestClockTimers(t *testing.T) {
	c := jobstatetest.NewClock(jobstatetest.Epoch)
	a := c.NewTimer(2 * time.Second)
	fired := make(chan string, 4)
	c.AfterFunc(time.Second, func() { fired <- "f" })
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop reports whether it stopped an armed timer")
	}
	if n := c.Pending(); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	if at, ok := c.Next(); !ok || !at.Equal(jobstatetest.Epoch.Add(time.Second)) {
		t.Errorf("next %s %v", at, ok)
	}
	c.Advance(time.Second)
	if got := <-fired; got != "f" {
		t.Error(got)
	}
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	now := c.Advance(time.Second)
	if got := <-a.C(); !got.Equal(now) {
		t.Errorf("fired with %s, want %s", got, now)
	}
	a.Reset(time.Second)
	a.Reset(3 * time.Second) // re-arms: only the later deadline counts
	c.Advance(2 * time.Second)
	select {
	case <-a.C():
		t.Fatal("a reset timer fired at its old deadline")
	default:
	}
	c.Advance(time.Second)
	<-a.C()
	if c.Pending() != 0 {
		t.Errorf("pending %d", c.Pending())
	}
	a.Reset(0)
	<-a.C() // at once
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitPending(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitPending: %v", err)
	}
	c.NewTimer(time.Minute)
	if err := c.WaitPending(context.Background(), 1); err != nil {
		t.Error(err)
	}
	if err := c.WaitTimer(context.Background(), c.Now().Add(time.Minute)); err != nil {
		t.Error(err)
	}
}
