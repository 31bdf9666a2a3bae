//go:build unix

// Command idlecpu measures the CPU time an idle worker uses: it runs a
// worker with the default poll and sweep intervals over an empty memstore
// for a while, and reports the process's user and system CPU time
// (getrusage) as a share of one core.
//
//	go run ./worker/internal/idlecpu -d 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

func main() {
	d := flag.Duration("d", 10*time.Second, "how long the worker idles")
	machines := flag.Int("machines", 1, "machines handled (one claim per machine per poll)")
	flag.Parse()
	if err := run(*d, *machines); err != nil {
		fmt.Fprintln(os.Stderr, "idlecpu:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, machines int) error {
	var defs []*jobstate.Definition
	var opts []worker.Option
	for i := 0; i < machines; i++ {
		def, err := jobstate.NewDefinition(jobstate.Spec{
			Name: fmt.Sprintf("m%d", i),
			States: []jobstate.StateSpec{
				{Name: "QUEUED", Kind: jobstate.KindReady},
				{Name: "RUNNING", Kind: jobstate.KindActive},
				{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
				{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			},
			Initial: "QUEUED",
			Rules: []jobstate.Rule{
				{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
				{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "DONE"},
				{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			},
		})
		if err != nil {
			return err
		}
		defs = append(defs, def)
		opts = append(opts, worker.Handle(def.Name(), worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
			return jobstate.CommitInput{}, nil
		}), 10))
	}
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(defs...))
	if err != nil {
		return err
	}
	w, err := worker.New(eng, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	before, err := cpu()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := w.Run(ctx); err != nil {
		return err
	}
	wall := time.Since(start)
	after, err := cpu()
	if err != nil {
		return err
	}
	used := after - before
	fmt.Printf("idle worker (%d machine(s), poll %s, sweep %s): %s CPU over %s wall = %.3f%% of one core\n",
		machines, worker.DefaultPollInterval, worker.DefaultSweepInterval, used, wall.Round(time.Millisecond), 100*used.Seconds()/wall.Seconds())
	return nil
}

// cpu returns the process's user plus system CPU time.
func cpu() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
