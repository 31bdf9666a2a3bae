package enginesuite

import (
	"context"
	"sync"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
)

// TestStressJobsSize: the stress test runs Sizes.StressJobs jobs, or
// DefaultStressJobs when that is not positive.
func TestStressJobsSize(t *testing.T) {
	assert.Equal(t, DefaultStressJobs, Sizes{}.stressJobs())
	assert.Equal(t, DefaultStressJobs, Sizes{StressJobs: -1}.stressJobs())
	assert.Equal(t, 1, Sizes{StressJobs: 1}.stressJobs())
	assert.Equal(t, 2_500, Sizes{StressJobs: 2_500}.stressJobs())
}

// TestCounterCountsConcurrentRuns: Counter's zero value counts every run
// of its Effect, from any number of goroutines.
func TestCounterCountsConcurrentRuns(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				assert.NoError(t, c.Effect(context.Background(), jobstate.Job{}))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(workers*100), c.Get())
}
