package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// A worker for the "task" machine: it runs until its context ends (here,
// once the only job has been handled), then shuts down gracefully.
func ExampleNew() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	def, err := jobstate.NewDefinition(taskSpec("task"))
	if err != nil {
		log.Fatal(err)
	}
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}
	created, err := eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte("invoice.pdf")})
	if err != nil {
		log.Fatal(err)
	}

	process := func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		fmt.Printf("processing %s, attempt %d\n", t.Job().Payload, t.Lease().Token)
		if _, err := t.Advance(ctx, "fetch", jobstate.Call{Reason: "downloading"}); err != nil {
			return jobstate.CommitInput{}, err
		}
		stop() // the example ends after one job; the commit still happens
		return jobstate.CommitInput{
			Result: []byte("processed"),
			Effect: func(ctx context.Context, j jobstate.Job) error {
				fmt.Println("effect applied once for", string(j.Payload))
				return nil
			},
		}, nil
	}
	w, err := worker.New(eng,
		worker.WithName("example-worker-1"),
		worker.Handle("task", worker.HandlerFunc(process), 4),
		worker.WithGracePeriod(30*time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Get(context.Background(), created.Job.ID)
	fmt.Println(job.State, string(job.Result))
	// Output:
	// processing invoice.pdf, attempt 1
	// effect applied once for invoice.pdf
	// DONE processed
}

// Drain works off what is due, then returns: for a batch process, or a
// test.
func ExampleWorker_Drain() {
	ctx := context.Background()
	def, err := jobstate.NewDefinition(taskSpec("task"))
	if err != nil {
		log.Fatal(err)
	}
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}
	for _, doc := range []string{"a.pdf", "b.pdf", "bad.pdf"} {
		if _, err := eng.Create(ctx, jobstate.NewJob{Machine: "task", Payload: []byte(doc)}); err != nil {
			log.Fatal(err)
		}
	}
	w, err := worker.New(eng, worker.Handle("task", worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		if string(t.Job().Payload) == "bad.pdf" {
			return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unsupported format"))
		}
		return jobstate.CommitInput{}, nil
	}), 2))
	if err != nil {
		log.Fatal(err)
	}
	n, err := w.Drain(ctx, 0)
	fmt.Println(n, err)
	counts, _ := eng.Counts(ctx, "task")
	fmt.Println(counts[done], "done,", counts[failed], "failed")
	// Output:
	// 3 <nil>
	// 2 done, 1 failed
}

// A handler reads why its context ended with context.Cause.
func ExampleHandlerFunc() {
	h := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		select {
		case <-time.After(time.Minute): // the work
			return jobstate.CommitInput{Result: []byte("done")}, nil
		case <-ctx.Done():
			var lost *worker.LeaseLostError
			switch cause := context.Cause(ctx); {
			case errors.As(cause, &lost):
				t.Logger().Warn("lease lost: stop writing", "error", cause)
			case errors.Is(cause, jobstate.ErrCancelled):
				t.Logger().Info("cancelled by the user")
			case errors.Is(cause, worker.ErrShutdown):
				t.Logger().Info("shutting down: the job is given back")
			}
			return jobstate.CommitInput{}, ctx.Err()
		}
	})
	_ = worker.Handle("task", h, 8, worker.Timeout(5*time.Minute))
}
