//go:build !race

package sqlitestore_test

// raceEnabled: the tests run under the race detector, which makes the
// pure-Go SQLite several times slower.
const raceEnabled = false
