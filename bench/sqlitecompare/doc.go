// Command sqlitecompare measures jobstate's SQLite store (sqlitestore)
// beside the in-memory store (memstore), the PostgreSQL store (pgstore,
// on a throwaway cluster it starts: pgstore/pgtest, fsync and
// synchronous_commit on) and river v0.51's SQLite driver (riversqlite,
// on modernc.org/sqlite, the driver sqlitestore uses), on one machine in
// one run, and prints a markdown report:
//
//	cd bench/sqlitecompare
//	GOWORK=off go run .                      # work, insert, claim
//	GOWORK=off go run . -only work -runs 5   # one section, more runs
//	GOWORK=off go run . -h                   # every flag
//
// Sections: work (no-op jobs worked per second through the worker
// runtime at each handler count, river.Client with MaxWorkers equal,
// fetch cooldown 2 ms and poll interval 20 ms), insert (the latency of
// one Create, and of a batch through CreateMany) and claim (the latency
// of one Engine.Claim with the jobs ready). Each figure is the median of
// -runs runs with its spread; the stores alternate which runs first.
// SQLite files live in a temporary directory on the disk of os.TempDir.
//
// It is a module of its own, outside the repository's go.work, because
// river v0.51 requires Go 1.26; GOWORK=off makes the go command use this
// module's go.mod, which points at the repository's modules with replace
// directives.
package main
