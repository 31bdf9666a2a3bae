package pgstore_test

import (
	"fmt"
	"testing"
)

// BenchmarkClaimFinishKeysNoLimit claims and succeeds 10,000 jobs with a
// concurrency key on a machine without MaxPerKey, with four goroutines
// (one iteration: -benchtime=1x), reporting jobs/s: "onekey", every job
// of one key; "keys10", ten keys of 1,000 jobs each, interleaved.
func BenchmarkClaimFinishKeysNoLimit(b *testing.B) {
	const jobs = 10000
	for _, nkeys := range []int{1, 10} {
		name := "onekey"
		if nkeys > 1 {
			name = fmt.Sprint("keys", nkeys)
		}
		b.Run(name, func(b *testing.B) {
			keys := make([]string, jobs)
			for i := range keys {
				keys[i] = fmt.Sprint("k", i%nkeys)
			}
			drainAll(b, 0, keys)
		})
	}
}
