// Command jobstate is the operators' tool for jobstate: it checks and
// draws JSON machine definitions, migrates a PostgreSQL store's schema,
// lists and inspects jobs, counts them per state, and cancels, redrives
// or retries one job or every job a filter selects, each move recorded in
// the job's history with the operator as its actor.
//
// Usage:
//
//	jobstate validate FILE.json...
//	jobstate diagram FILE.json
//	jobstate migrate up|status [--database-url URL] [--schema NAME]
//	jobstate list [filters] [--json] [--cursor C | --all]
//	jobstate get ID [--json]
//	jobstate counts [--machine NAME] [--json]
//	jobstate cancel|redrive|retry (ID | filters) [--yes] [--actor WHO] [--reason TEXT]
//
// Commands that read or move jobs take the machines' JSON definitions with
// --definitions (a file or a directory of *.json files; repeatable) or
// JOBSTATE_DEFINITIONS (paths separated by the system's list separator),
// and the database with --database-url or JOBSTATE_DATABASE_URL.
//
// Exit codes: 0 success; 1 definition problems, a refused or failed move,
// a job not found, a schema not migrated; 2 usage errors (an unknown flag,
// a bad value, a malformed id, an unknown machine or state, a bad database
// URL); 3 the database could not be reached or failed; 130 interrupted.
// docs/command.md is the manual.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
