// Command quickstart runs the document processing machine, the literal
// definition of that lifecycle, on the in-memory store: one job succeeds,
// one succeeds after a retry, one fails permanently. It prints each job's
// history and the machine's diagram.
//
//	go run ./examples/quickstart
//
// Time is a manual clock, so the 1 s retry backoff passes instantly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/memstore"
)

// newMachine returns the document processing machine: its literal
// definition (internal/machines/docproc), with the lifecycle's own error
// classifier, which sorts its retryable and non-retryable failures.
func newMachine() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(docproc.Spec(docproc.Plain()))
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	def, err := newMachine()
	if err != nil {
		return err
	}
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
	if err != nil {
		return err
	}

	// Each document's worker outcome, attempt by attempt: a timeout is
	// retryable, an invalid document format is not (the lifecycle's
	// classifier says so).
	plan := map[string][]error{
		"invoice.pdf": {nil},
		"scan.tiff":   {docproc.ErrTimeout, nil},
		"broken.doc":  {docproc.ErrUnsupportedFormat},
	}
	order := []string{"invoice.pdf", "scan.tiff", "broken.doc"}
	ids := make(map[string]jobstate.Job)
	for _, name := range order {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: docproc.Name, Payload: []byte(name)})
		if err != nil {
			return err
		}
		if _, err := eng.Fire(ctx, c.Job.ID, docproc.Submit, jobstate.Call{Actor: "alice"}); err != nil {
			return err
		}
		ids[name] = c.Job
	}

	// The worker loop: claim what is due, run it, report the outcome.
	attempts := make(map[string]int)
	for done := 0; done < len(order); {
		claimed, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: docproc.Name, Worker: "worker-1"})
		if errors.Is(err, jobstate.ErrNoJob) {
			clock.Advance(time.Second) // let backoffs pass
			if _, err := eng.Sweep(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		name := string(claimed.Job.Payload)
		outcome := plan[name][attempts[name]]
		attempts[name]++
		var job jobstate.Job
		if outcome == nil {
			job, err = eng.Succeed(ctx, claimed.Lease, jobstate.CommitInput{Result: []byte("processed " + name)})
		} else {
			job, err = eng.Fail(ctx, claimed.Lease, outcome)
		}
		if err != nil {
			return err
		}
		if job.Terminal() {
			done++
		}
	}

	for _, name := range order {
		job, err := eng.Get(ctx, ids[name].ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s (attempts %d, retries %d", name, job.State, job.Attempt, job.RetryCount)
		if job.LastError != "" {
			fmt.Fprintf(out, ", last error %q, %s", job.LastError, job.ErrorClass)
		}
		fmt.Fprintln(out, ")")
		history, err := eng.History(ctx, job.ID)
		if err != nil {
			return err
		}
		for _, t := range history {
			fmt.Fprintf(out, "  v%-2d %s  %-9s --%-8s--> %-9s %s\n", t.Version, t.At.Format("15:04:05"), orDash(t.From), t.Event, t.To, t.Reason)
		}
	}
	fmt.Fprintln(out, "\nThe machine, as a Mermaid state diagram:")
	fmt.Fprintln(out, def.Mermaid())
	return nil
}

func orDash(s jobstate.State) string {
	if s == "" {
		return "-"
	}
	return string(s)
}
