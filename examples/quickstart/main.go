// Command quickstart runs the document processing machine on the
// in-memory store: one job succeeds, one succeeds after a retry, one fails
// permanently. It prints each job's history and the machine's diagram.
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
	"github.com/jobstate/jobstate/memstore"
)

// The document processing machine of document processing, as a table.
func docsMachine() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(jobstate.Spec{
		Name: "docs",
		States: []jobstate.StateSpec{
			{Name: "CREATED", Kind: jobstate.KindInitial, Description: "created, not yet submitted"},
			{Name: "QUEUED", Kind: jobstate.KindReady, Description: "waiting in the processing queue"},
			{Name: "RUNNING", Kind: jobstate.KindActive, Description: "being processed"},
			{Name: "RETRYING", Kind: jobstate.KindWaiting, Description: "waiting out the backoff"},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"CREATED"}, Event: "submit", To: "QUEUED"},
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventCancel, To: "FAILED"},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
		},
	})
}

// errTimeout is a transient failure (retryable by default).
var errTimeout = errors.New("timeout")

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	def, err := docsMachine()
	if err != nil {
		return err
	}
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
	if err != nil {
		return err
	}

	// Each document's worker outcome, attempt by attempt.
	plan := map[string][]error{
		"invoice.pdf": {nil},
		"scan.tiff":   {errTimeout, nil},
		"broken.doc":  {jobstate.Permanent(errors.New("unsupported format"))},
	}
	order := []string{"invoice.pdf", "scan.tiff", "broken.doc"}
	ids := make(map[string]jobstate.Job)
	for _, name := range order {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "docs", Payload: []byte(name)})
		if err != nil {
			return err
		}
		if _, err := eng.Fire(ctx, c.Job.ID, "submit", jobstate.Call{Actor: "alice"}); err != nil {
			return err
		}
		ids[name] = c.Job
	}

	// The worker loop: claim what is due, run it, report the outcome.
	attempts := make(map[string]int)
	for done := 0; done < len(order); {
		claimed, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "docs", Worker: "worker-1"})
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
