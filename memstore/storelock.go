package memstore

import (
	"runtime"
	"sync"
)

// storeLock is the store's lock: a sync.RWMutex that a writer or reader
// finding it held first retries for a few microseconds, yielding its
// processor between tries, before it sleeps. Every write of every job takes
// the lock for about a microsecond; a goroutine that sleeps for it is woken
// onto the processor of the goroutine that released it, where it waits
// until that one blocks, so two writers sleeping for each other in turn
// share one processor between them. Retrying keeps each on its own.
type storeLock struct {
	rw sync.RWMutex
}

// lockTries bounds the retries before sleeping.
const lockTries = 32

func (l *storeLock) Lock() {
	if !retry(l.rw.TryLock) {
		l.rw.Lock()
	}
}

func (l *storeLock) Unlock() { l.rw.Unlock() }

func (l *storeLock) RLock() {
	if !retry(l.rw.TryRLock) {
		l.rw.RLock()
	}
}

func (l *storeLock) RUnlock() { l.rw.RUnlock() }

// retry calls try up to lockTries times, yielding the processor between
// calls, and reports whether one succeeded.
func retry(try func() bool) bool {
	for range lockTries {
		if try() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

// TryLock takes the lock if it is free, without waiting.
func (l *storeLock) TryLock() bool { return l.rw.TryLock() }
