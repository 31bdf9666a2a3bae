// Command docproc runs document processing jobs through the worker
// runtime, on the in-memory store or on PostgreSQL, and prints the lifecycle's four example traces, each with
// its timings and the job's metadata:
//
//	go run ./examples/docproc
//	go run ./examples/docproc -store postgres [-database-url URL]
//	go run ./examples/docproc -store sqlite [-db PATH]
//
// With -store postgres and no -database-url (nor JOBSTATE_DATABASE_URL)
// it starts a throwaway PostgreSQL cluster for the run.
// With -store sqlite it runs on SQLite files in a temporary directory,
// or at PATH (which must not exist yet) and beside it.
//
// The machine is the lifecycle's table (CREATED, QUEUED, RUNNING, RETRYING,
// SUCCEEDED, FAILED); errors are classified by the lifecycle's lists of
// retryable and non-retryable failures; retries are bounded at 3 with a
// fixed 1 s backoff. The example declares all that; which state comes next
// is always the engine's decision. Time is a manual clock, so the retry
// delays pass instantly and the timings are exact.
//
// The files: machine.go declares the machine and its error classes,
// service.go is the service (the engine, its API, the worker's handler
// and the traces), main.go prints the demonstration.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
)

// main runs the demonstration on standard output.
func main() {
	exstore.Main("docproc", nil, func(ctx context.Context, b *exstore.Backend) error {
		return run(ctx, os.Stdout, b)
	})
}

// run replays the lifecycle's four example traces and prints each with the
// job's metadata.
func run(ctx context.Context, out io.Writer, b *exstore.Backend) error {
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	fmt.Fprintf(out, "Document processing on %s: maxRetries %d, fixed %s backoff.\n", b.Describe(), MaxRetries, RetryDelay)
	fmt.Fprintf(out, "Each attempt takes %s; an idle worker looks again every %s.\n", WorkTime, IdleWait)
	for i, tr := range Traces {
		// Each trace on its own service, from the same clock reading.
		store, err := b.NewStore(ctx)
		if err != nil {
			return err
		}
		a, err := NewAppOn(store, start, jobstate.WithIDs(SeqIDs()))
		if err != nil {
			return err
		}
		job, hist, err := RunTrace(ctx, a, tr)
		if err != nil {
			return fmt.Errorf("%s: %w", tr.Name, err)
		}
		if _, err := a.Def.Replay(hist); err != nil {
			return fmt.Errorf("%s: history does not replay: %w", tr.Name, err)
		}
		meta, err := json.MarshalIndent(MetadataOf(job), "  ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%d. %s (%s)\n\n", i+1, tr.Name, tr.Document.Name)
		for _, l := range strings.SplitAfter(RenderTrace(job, hist), "\n") {
			if l != "" {
				fmt.Fprint(out, "  "+l)
			}
		}
		fmt.Fprintf(out, "\n  %s\n", meta)
	}
	return nil
}
