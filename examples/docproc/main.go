// Command docproc runs document processing jobs on the
// in-memory store and prints the lifecycle's four example traces, each with
// its timings and the job's metadata:
//
//	go run ./examples/docproc
//
// The machine is the lifecycle's table (CREATED, QUEUED, RUNNING, RETRYING,
// SUCCEEDED, FAILED); errors are classified by the lifecycle's lists of
// retryable and non-retryable failures; retries are bounded at 3 with a
// fixed 1 s backoff. The example declares all that; which state comes next
// is always the engine's decision. Time is a manual clock, so the retry
// delays pass instantly and the timings are exact.
//
// The files: machine.go declares the machine and its error classes,
// service.go is the service (the engine, its API, the worker and the
// traces), main.go prints the demonstration.
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
)

// main runs the demonstration on standard output.
func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "docproc:", err)
		os.Exit(1)
	}
}

// run replays the lifecycle's four example traces and prints each with the
// job's metadata.
func run(ctx context.Context, out io.Writer) error {
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	fmt.Fprintf(out, "Document processing on the in-memory store: maxRetries %d, fixed %s backoff.\n", MaxRetries, RetryDelay)
	fmt.Fprintf(out, "Each attempt takes %s; an idle worker looks again every %s.\n", WorkTime, IdleWait)
	for i, tr := range Traces {
		// Each trace on its own service, from the same clock reading.
		a, err := NewApp(start, jobstate.WithIDs(SeqIDs()))
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
