// Package sqlitestore is a jobstate.Store in one SQLite database file,
// through modernc.org/sqlite, a pure-Go translation of SQLite: programs
// that use it build without a C toolchain (CGO_ENABLED=0 works) and need
// no server, yet their jobs survive a restart, a crash of the process or,
// with the default synchronous setting, a power loss.
//
// Open makes the file if needed, puts it in WAL mode and migrates its
// schema (embedded, versioned migrations: Migrate). The store has one
// writer connection, on which every write is one IMMEDIATE transaction,
// and a pool of readers that never wait for it. The engine's functions
// run inside the write's transaction, so a commit effect that writes the
// program's own tables through Tx is exactly-once, and a program can hold
// a transaction of its own (Begin, WithTx) in which its rows and its jobs
// commit or roll back together.
//
// It has every optional capability of jobstate: batch claims and
// creations in one transaction, listing, counts, pruning, limits of
// live executions per concurrency key (Policy.MaxPerKey, enforced in the
// claim's transaction), and notifications to the workers of the same
// process. A file that cannot
// be written (a full disk, a read-only file or directory) gives a
// *jobstate.UnavailableError naming the cause (ErrDiskFull, ErrReadOnly,
// …), and leaves the database as it was.
//
// docs/store.md describes its design, its crash test and its figures.
package sqlitestore
