package jobstatetest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate/jobstatetest"
)

// Timers re-armed from other goroutines while the clock moves: under the
// race detector, any field of a timer read outside the clock's lock shows.
func TestClockConcurrentResetAndAdvance(t *testing.T) {
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	const timers = 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < timers; i++ {
		tm := clk.NewTimer(time.Duration(i+1) * time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-tm.C():
					tm.Reset(time.Second)
				default:
					tm.Reset(time.Duration(1+i) * time.Second)
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		clk.Advance(time.Second)
	}
	close(stop)
	wg.Wait()
}

// Once Advance has returned, a timer Reset to a later time holds no
// reading of the earlier firing: its channel stays empty until its new
// time comes.
func TestClockResetAfterFireHoldsNoStaleReading(t *testing.T) {
	clk := jobstatetest.NewClock(jobstatetest.Epoch)
	tm := clk.NewTimer(time.Second)
	clk.Advance(time.Second)
	tm.Reset(time.Minute)
	select {
	case at := <-tm.C():
		t.Fatalf("a reading of %v after Reset", at)
	default:
	}
	at := clk.Advance(time.Minute)
	select {
	case got := <-tm.C():
		if !got.Equal(at) {
			t.Fatalf("fired with %v, want %v", got, at)
		}
	default:
		t.Fatal("the re-armed timer did not fire")
	}
}
