// Command pgcompare compares jobstate (the engine, pgstore and the worker
// runtime) with river v0.51 on one PostgreSQL cluster that it starts for
// the run (pgstore/pgtest: a throwaway cluster with the server's default
// settings, fsync on and synchronous_commit on), each library in a
// database of its own, and prints a markdown report:
//
//	cd bench/pgcompare
//	GOWORK=off go run .                      # work, insert, claim, notify
//	GOWORK=off go run . -only work -runs 5   # one section, more runs
//	GOWORK=off go run . -h                   # every flag
//
// Sections: work (jobs worked per second at each worker count: the worker
// runtime against river.Client with MaxWorkers equal, fetch cooldown 2 ms
// and poll interval 20 ms), insert (one at a time, batches, COPY, and
// batches of keyed jobs against river's unique jobs), claim (latency of
// one claim at each number of ready jobs), notify (create → claim
// latency in an idle system), and for analysis floor (the least a
// lease-based queue with exactly-once commits costs this server: a queue
// of two SQL statements per job beside jobstate and river, on a narrow
// row and on jobstate's own row, with -floor-variant altering copies
// of that row), async (the worker
// runtime's slots freed before the commit) and loop (goroutines looping
// ClaimMany → Succeed). Each figure is the median of -runs runs with its
// spread, the libraries alternating which runs first; ratios are
// jobstate/river. The work and insert sections also report the CPU a job
// cost the benchmark's process and the cluster's processes in the same
// runs (read from Linux's /proc; "n/a" where it cannot be read), a figure
// less noisy than a rate on a shared machine. The work section also
// reports the bytes and objects the benchmark's process allocated per
// job (runtime.MemStats), which the garbage collector's share of that CPU
// follows.
//
// It is a module of its own, outside the repository's go.work, because
// river v0.51 requires Go 1.26; GOWORK=off makes the go command use this
// module's go.mod, which points at the repository's jobstate and pgstore
// with replace directives.
package main
