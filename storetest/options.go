package storetest

import "github.com/jobstate/jobstate/internal/enginesuite"

// Option tunes the size of the suite's heavier tests, for a store run a
// second time in another configuration (pgstore with group commit, say),
// where the full sizes would add minutes and little coverage.
type Option func(*config)

type config struct {
	stressJobs int // jobs of Engine/StressWorkersCrashes
	nestedKeys int // keys of Hardening/NestedKeyedCreates
}

// The sizes of the heavier tests, unless an Option changes them.
const (
	DefaultStressJobs = enginesuite.DefaultStressJobs
	DefaultNestedKeys = 10_000
)

func newConfig(opts []Option) config {
	c := config{stressJobs: DefaultStressJobs, nestedKeys: DefaultNestedKeys}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithStressJobs sets the number of jobs of the engine's stress test
// (workers crashing before and after commits while a sweeper moves the
// clock): DefaultStressJobs otherwise, at most 1,000 with -short. Values
// below 100 are raised to 100.
func WithStressJobs(n int) Option {
	return func(c *config) { c.stressJobs = max(n, 100) }
}

// WithNestedKeys sets the number of distinct keys of the nested keyed
// creation test: DefaultNestedKeys otherwise. Values below 100 are raised
// to 100.
func WithNestedKeys(n int) Option {
	return func(c *config) { c.nestedKeys = max(n, 100) }
}
