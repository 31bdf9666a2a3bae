package sqlitestore

import (
	"context"
	"sync"
)

// subscriptions are the store's Notifier subscribers. A signal is a send
// that cannot block.
type subscriptions struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch       chan struct{}
	machines map[string]bool // nil: every machine
}

// Subscribe implements jobstate.Notifier within the process: the store
// signals after every committed write that leaves a job ready when it was
// not, or in another state or with another not-before time than before (a
// creation in a ready state, a requeue, a retry, an abandon or a snooze).
// Writes of other processes on the same file are not heard: their
// workers find those jobs by polling. After Close, the channel returned
// is closed at once.
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
	if s.subs.closed {
		s.subs.mu.Unlock()
		close(sub.ch)
		return sub.ch, func() {}, nil
	}
	if s.subs.subs == nil {
		s.subs.subs = make(map[*subscriber]struct{})
	}
	s.subs.subs[sub] = struct{}{}
	s.subs.mu.Unlock()
	end := func() { s.subs.drop(sub) }
	stopWatching := context.AfterFunc(ctx, end)
	return sub.ch, func() { stopWatching(); end() }, nil
}

// drop ends sub's subscription and closes its channel, once.
func (ss *subscriptions) drop(sub *subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok := ss.subs[sub]; ok {
		delete(ss.subs, sub)
		close(sub.ch)
	}
}

// close ends every subscription.
func (ss *subscriptions) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for sub := range ss.subs {
		delete(ss.subs, sub)
		close(sub.ch)
	}
}

// signal tells the subscribers of the machines that a job may be
// claimable.
func (s *Store) signal(machines ...string) {
	if len(machines) == 0 {
		return
	}
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	for sub := range s.subs.subs {
		for _, m := range machines {
			if sub.machines == nil || sub.machines[m] {
				select {
				case sub.ch <- struct{}{}:
				default:
				}
				break
			}
		}
	}
}
