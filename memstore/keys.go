package memstore

import "sync"

// keyID is an idempotency key within its machine.
type keyID struct{ machine, key string }

// keyLocks holds one lock per key that a Create is using, so that a
// Create's function runs under a lock no other key shares: it may create
// jobs under other keys. A key's lock exists while some Create holds or
// waits for it, so the map holds no more locks than there are Creates
// under way.
type keyLocks struct {
	mu    sync.Mutex
	locks map[keyID]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // Creates holding or waiting for mu; guarded by keyLocks.mu
}

// lock locks k and returns its lock, to be given back to unlock.
func (kl *keyLocks) lock(k keyID) *keyLock {
	kl.mu.Lock()
	if kl.locks == nil {
		kl.locks = make(map[keyID]*keyLock)
	}
	l := kl.locks[k]
	if l == nil {
		l = &keyLock{}
		kl.locks[k] = l
	}
	l.refs++
	kl.mu.Unlock()
	l.mu.Lock()
	return l
}

// unlock unlocks k, and removes its lock when no other Create wants it.
func (kl *keyLocks) unlock(k keyID, l *keyLock) {
	l.mu.Unlock()
	kl.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(kl.locks, k)
	}
	kl.mu.Unlock()
}
