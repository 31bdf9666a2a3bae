package memstore

import (
	"sync"
	"testing"
)

// TestStoreLockExcludes: writers holding storeLock exclude each other and
// every reader, whether they took it while retrying or after sleeping
// (many goroutines on few processors exercise both paths).
func TestStoreLockExcludes(t *testing.T) {
	var l storeLock
	var a, b int // written together under Lock, read together under RLock
	var wg sync.WaitGroup
	const writers, readers, rounds = 8, 4, 2000
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l.Lock()
				a++
				b++
				l.Unlock()
			}
		}()
	}
	errs := make(chan string, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l.RLock()
				x, y := a, b
				l.RUnlock()
				if x != y {
					errs <- "a reader saw a writer's half-done update"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if a != writers*rounds || b != writers*rounds {
		t.Fatalf("counts %d, %d, want %d: an update was lost", a, b, writers*rounds)
	}
	if !l.TryLock() {
		t.Fatal("the lock is still held after every holder released it")
	}
	l.Unlock()
}
