package memstore

import "sync"

// keyID is an idempotency key within its machine.
type keyID struct{ machine, key string }

// keyLocks holds one lock per key that a Create is using, so that a
// Create's function runs under a lock no other key shares: it may create
// jobs under other keys. A key's lock exists while some Create holds or
// waits for it, and is then removed.
type keyLocks struct {
	mu    sync.Mutex
	locks map[keyID]*keyLock
	peak  int // the most locks held at once since locks was made
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
		kl.peak = max(kl.peak, len(kl.locks))
	}
	l.refs++
	kl.mu.Unlock()
	l.mu.Lock()
	return l
}

// unlock unlocks k, removing its lock when no one else wants it. A map
// that once held many locks is dropped when it empties, so that its room
// is given back.
func (kl *keyLocks) unlock(k keyID, l *keyLock) {
	l.mu.Unlock()
	kl.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(kl.locks, k)
		if len(kl.locks) == 0 && kl.peak > 64 {
			kl.locks, kl.peak = nil, 0
		}
	}
	kl.mu.Unlock()
}
