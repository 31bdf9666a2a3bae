//go:build !race

package conformancetest_test

// raceEnabled reports whether the tests run under the race detector,
// which makes them several times slower.
const raceEnabled = false
