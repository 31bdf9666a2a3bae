package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// ErrInjected is the error of every fault a FaultyStore injects.
var ErrInjected = errors.New("storetest: injected fault")

// FaultPoint names where a FaultyStore may inject a fault.
type FaultPoint string

// The points at which a FaultyStore may fail an operation.
const (
	// FaultBeforeCall: the store is unreachable; the call fails before it
	// reaches the wrapped store.
	FaultBeforeCall FaultPoint = "before call"
	// FaultBeforeFunc: the store refuses the write after locking the job
	// (a lock timeout, a serialization failure), before the engine's
	// function runs.
	FaultBeforeFunc FaultPoint = "before function"
	// FaultAfterFunc: the write fails after the engine's function returned
	// it (a failed COMMIT). The wrapped store writes nothing, and every
	// action registered with OnCommit during the function is dropped, as a
	// transaction's writes would be.
	FaultAfterFunc FaultPoint = "after function"
)

// FaultyStore wraps a Store and fails its operations at the points its
// decide function chooses, so that tests can check what the engine
// promises whatever fails around it: a refused operation changes nothing,
// an effect runs at most once, and an effect that ran is recorded.
//
// It also models a store transaction for effects: an effect that calls
// OnCommit with the context it was given has its action run only if the
// write it ran in is applied, as an effect writing in a SQL store's
// transaction would.
type FaultyStore struct {
	inner  jobstate.Store
	decide func(FaultPoint) bool
}

// Faulty returns inner wrapped so that each operation consults decide at
// each point it passes, and fails with ErrInjected where decide returns
// true. A nil decide injects nothing.
func Faulty(inner jobstate.Store, decide func(FaultPoint) bool) *FaultyStore {
	if decide == nil {
		decide = func(FaultPoint) bool { return false }
	}
	return &FaultyStore{inner: inner, decide: decide}
}

var _ jobstate.Store = (*FaultyStore)(nil)

// tx collects the actions of the effects run inside one write.
type tx struct {
	mu      sync.Mutex
	actions []func()
}

type txKey struct{}

// OnCommit runs action once the write whose function ctx was given to is
// applied, or never if that write fails; outside a FaultyStore write it
// runs action at once.
func OnCommit(ctx context.Context, action func()) {
	t, ok := ctx.Value(txKey{}).(*tx)
	if !ok {
		action()
		return
	}
	t.mu.Lock()
	t.actions = append(t.actions, action)
	t.mu.Unlock()
}

func (t *tx) commit() {
	t.mu.Lock()
	actions := t.actions
	t.actions = nil
	t.mu.Unlock()
	for _, a := range actions {
		a()
	}
}

func (s *FaultyStore) fault(p FaultPoint) error {
	if s.decide(p) {
		return fmt.Errorf("%w: %s", ErrInjected, p)
	}
	return nil
}

// wrap returns fn running in a transaction t, failing where decide says.
func (s *FaultyStore) wrap(t *tx, fn jobstate.UpdateFunc) jobstate.UpdateFunc {
	return func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		if err := s.fault(FaultBeforeFunc); err != nil {
			return jobstate.Write{}, err
		}
		w, err := fn(context.WithValue(ctx, txKey{}, t), cur)
		if err != nil {
			return jobstate.Write{}, err
		}
		if err := s.fault(FaultAfterFunc); err != nil {
			return jobstate.Write{}, err
		}
		return w, nil
	}
}

// Create implements jobstate.Store.
func (s *FaultyStore) Create(ctx context.Context, machine, key string, fn jobstate.CreateFunc) (jobstate.Job, bool, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return jobstate.Job{}, false, err
	}
	t := &tx{}
	job, created, err := s.inner.Create(ctx, machine, key, func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
		if err := s.fault(FaultBeforeFunc); err != nil {
			return jobstate.Write{}, err
		}
		w, err := fn(context.WithValue(ctx, txKey{}, t), existing)
		if err != nil {
			return jobstate.Write{}, err
		}
		if err := s.fault(FaultAfterFunc); err != nil {
			return jobstate.Write{}, err
		}
		return w, nil
	})
	if err == nil {
		t.commit()
	}
	return job, created, err
}

// Update implements jobstate.Store.
func (s *FaultyStore) Update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return jobstate.Job{}, err
	}
	t := &tx{}
	job, err := s.inner.Update(ctx, id, s.wrap(t, fn))
	if err == nil {
		t.commit()
	}
	return job, err
}

// ClaimNext implements jobstate.Store. Faults before and after the
// function fail the candidate's write and end the search, as a failed
// statement would.
func (s *FaultyStore) ClaimNext(ctx context.Context, q jobstate.ClaimQuery, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return jobstate.Job{}, err
	}
	var t *tx
	job, err := s.inner.ClaimNext(ctx, q, func(ctx context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		t = &tx{} // a fresh transaction for each candidate
		return s.wrap(t, fn)(ctx, cur)
	})
	if err == nil && t != nil {
		t.commit()
	}
	return job, err
}

// Get implements jobstate.Store.
func (s *FaultyStore) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return jobstate.Job{}, err
	}
	return s.inner.Get(ctx, id)
}

// Executions implements jobstate.Store.
func (s *FaultyStore) Executions(ctx context.Context, id uuid.UUID) ([]jobstate.Execution, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return nil, err
	}
	return s.inner.Executions(ctx, id)
}

// History implements jobstate.Store.
func (s *FaultyStore) History(ctx context.Context, id uuid.UUID) ([]jobstate.Transition, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return nil, err
	}
	return s.inner.History(ctx, id)
}

// Effects implements jobstate.Store.
func (s *FaultyStore) Effects(ctx context.Context, id uuid.UUID) ([]jobstate.EffectRecord, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return nil, err
	}
	return s.inner.Effects(ctx, id)
}

// Due implements jobstate.Store.
func (s *FaultyStore) Due(ctx context.Context, q jobstate.DueQuery) ([]jobstate.DueJob, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return nil, err
	}
	return s.inner.Due(ctx, q)
}

// Stale implements jobstate.Store.
func (s *FaultyStore) Stale(ctx context.Context, machine string, before time.Time, limit int) ([]jobstate.Job, error) {
	if err := s.fault(FaultBeforeCall); err != nil {
		return nil, err
	}
	return s.inner.Stale(ctx, machine, before, limit)
}

// LimitsKeys implements jobstate.KeyLimiter with the wrapped store's
// answer: claims pass through with their limit, so the wrapped store
// enforces it.
func (s *FaultyStore) LimitsKeys() bool {
	kl, ok := s.inner.(jobstate.KeyLimiter)
	return ok && kl.LimitsKeys()
}
