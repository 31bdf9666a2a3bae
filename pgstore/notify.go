package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// channelName is the LISTEN/NOTIFY channel of a schema's store.
func channelName(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("jobstate_%016x", h.Sum64())
}

// maxPayload bounds a notification's payload (the server's limit is just
// under 8000 bytes); a longer machine name is sent as "" (any machine).
const maxPayload = 7000

func notifyPayload(machine string) string {
	if len(machine) > maxPayload {
		return ""
	}
	return machine
}

// listener is a store's one dedicated LISTEN connection, started by the
// first Subscribe, fanning each notification out to the subscribers of
// its machine.
type listener struct {
	pool    *pgxpool.Pool
	channel string

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	started bool
	closed  bool
	ready   chan struct{} // closed once the first LISTEN is in place
	stop    context.CancelFunc
	done    chan struct{}
}

type subscriber struct {
	ch       chan struct{}
	machines map[string]bool // nil: any
	end      chan struct{}
	once     sync.Once
}

func newListener(pool *pgxpool.Pool, channel string) *listener {
	return &listener{pool: pool, channel: channel, subs: make(map[*subscriber]struct{})}
}

// Subscribe implements jobstate.Notifier. The first subscription opens
// the store's listening connection (outside the pool) and returns once it
// listens, so that no job made ready after Subscribe returns goes
// unsignalled while the connection holds. When the connection is lost it
// is opened again, and every subscriber is signalled, since signals may
// have been lost meanwhile.
func (s *Store) Subscribe(ctx context.Context, machines ...string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return s.lis.subscribe(ctx, machines)
}

func (l *listener) subscribe(ctx context.Context, machines []string) (<-chan struct{}, func(), error) {
	sub := &subscriber{ch: make(chan struct{}, 1), end: make(chan struct{})}
	if len(machines) > 0 {
		sub.machines = make(map[string]bool, len(machines))
		for _, m := range machines {
			sub.machines[m] = true
		}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, errors.New("pgstore: subscribe: the store is closed")
	}
	if !l.started {
		l.started = true
		l.ready = make(chan struct{})
		l.done = make(chan struct{})
		lctx, cancel := context.WithCancel(context.Background())
		l.stop = cancel
		go l.run(lctx)
	}
	l.subs[sub] = struct{}{}
	ready := l.ready
	l.mu.Unlock()

	unsubscribe := func() { l.drop(sub) }
	go func() {
		select {
		case <-ctx.Done():
			unsubscribe()
		case <-sub.end:
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		unsubscribe()
		return nil, nil, ctx.Err()
	}
	return sub.ch, unsubscribe, nil
}

// signal wakes the subscribers of machine ("" wakes all) without
// blocking.
func (l *listener) signal(machine string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sub := range l.subs {
		if machine != "" && sub.machines != nil && !sub.machines[machine] {
			continue
		}
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
}

// run keeps a connection listening until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	readyOnce := sync.Once{}
	delay := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx, func() {
			readyOnce.Do(func() { close(l.ready) })
			delay = 50 * time.Millisecond
			l.signal("") // signals may have been lost while not listening
		})
		// The first attempt ends Subscribe's wait even when it failed:
		// signals are a hint, and polling covers the gap.
		readyOnce.Do(func() { close(l.ready) })
		if ctx.Err() != nil {
			return
		}
		_ = err // the connection was lost: open it again after a pause
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
}

func (l *listener) listen(ctx context.Context, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.signal(n.Payload)
	}
}

// close stops the listener and ends every subscription.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	started, stop, done := l.started, l.stop, l.done
	subs := make([]*subscriber, 0, len(l.subs))
	for sub := range l.subs {
		subs = append(subs, sub)
	}
	l.mu.Unlock()
	if started {
		stop()
		<-done
	}
	for _, sub := range subs {
		l.drop(sub)
	}
}

// drop ends a subscription, once.
func (l *listener) drop(sub *subscriber) {
	sub.once.Do(func() {
		l.mu.Lock()
		delete(l.subs, sub)
		close(sub.ch)
		l.mu.Unlock()
		close(sub.end)
	})
}
