package memstore

import (
	"context"
	"sync"

	"github.com/jobstate/jobstate"
)

// subscriptions are the store's Notifier subscribers. Its lock is never
// held with the store's, and a signal is a send that cannot block.
type subscriptions struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch       chan struct{}
	machines map[string]bool // nil: every machine
}

// Subscribe implements jobstate.Notifier. The store signals after every
// write that leaves a job ready when it was not, or in another state or
// with another not-before time than before: a creation in a ready state,
// a requeue, a retry, an abandon or a snooze.
func (s *Store) Subscribe(ctx context.Context, machines ...string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	sub := &subscriber{ch: make(chan struct{}, 1)}
	if len(machines) > 0 {
		sub.machines = make(map[string]bool, len(machines))
		for _, m := range machines {
			sub.machines[m] = true
		}
	}
	s.subs.mu.Lock()
	if s.subs.subs == nil {
		s.subs.subs = make(map[*subscriber]struct{})
	}
	s.subs.subs[sub] = struct{}{}
	s.subs.mu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			s.subs.mu.Lock()
			delete(s.subs.subs, sub)
			close(sub.ch)
			s.subs.mu.Unlock()
		})
	}
	stopWatching := context.AfterFunc(ctx, end)
	return sub.ch, func() { stopWatching(); end() }, nil
}

// signal tells the subscribers of machine that a job may be claimable.
func (s *Store) signal(machine string) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	for sub := range s.subs.subs {
		if sub.machines == nil || sub.machines[machine] {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}
}

// becameReady reports whether a write from old to cur may have made a job
// claimable.
func becameReady(old, cur *jobstate.Job) bool {
	return cur.Kind == jobstate.KindReady &&
		(old == nil || old.Kind != jobstate.KindReady || old.State != cur.State || !old.NotBefore.Equal(cur.NotBefore))
}
