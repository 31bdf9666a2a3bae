package jobstatetest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// printer is a jobstatetest.TB that prints failures, for examples.
type printer struct{}

func (printer) Helper()                           {}
func (printer) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (printer) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// A handler that fails once, then succeeds: RunFor lets the 1 s backoff
// pass on the manual clock, and the assertions check the outcome. In a
// test, pass t instead of printer{}.
func Example() {
	e := jobstatetest.New(printer{}, jobstate.WithMachines(queueMachine()))
	var ledger jobstatetest.Ledger
	job := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("scan.tiff")})
	w := e.Worker(worker.Handle("queue", worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		if t.Lease().Token == 1 {
			return jobstate.CommitInput{}, errors.New("timeout")
		}
		return jobstate.CommitInput{Result: []byte("ok"), Effect: ledger.Effect}, nil
	}), 1))

	fmt.Println("jobs run:", e.RunFor(w, 5*time.Second, time.Second))
	e.AssertState(job.ID, "SUCCEEDED")
	e.AssertHistory(job.ID, "create", "claim", "retry", "requeue", "claim", "succeed")
	e.AssertAppliedOnce(&ledger, job.ID)
	// Output:
	// jobs run: 2
}

// A failing assertion says what it expected and shows the job.
func ExampleEnv_AssertState() {
	e := jobstatetest.New(printer{}, jobstate.WithMachines(queueMachine()))
	job := e.Create(jobstate.NewJob{Machine: "queue"})
	e.Run("queue", worker.HandlerFunc(func(context.Context, *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unsupported format"))
	}))
	e.AssertState(job.ID, "SUCCEEDED")
	// Output is like this (the ids vary):
	//
	// FAIL: job 0195...: state FAILED, want SUCCEEDED
	//   job 0195... on "queue": FAILED, attempt 1, 0 retries, last error (permanent) "unsupported format"
	//   history:
	//     v1   00:00:00.000  - --create--> QUEUED
	//     v2   00:00:00.000  QUEUED --claim--> RUNNING  by test-worker
	//     v3   00:00:00.000  RUNNING --fail--> FAILED  by test-worker  (unsupported format)
	//   executions:
	//     #1 ABORTED by test-worker: unsupported format
}

// NewWithStore runs the Env on a store the test made and owns: here a
// memstore; on PostgreSQL, package pgstore/pgtest makes such an Env on a
// store in a schema of its own (pgtest.NewEnv). The store keeps the
// instants of the Env's clock.
func ExampleNewWithStore() {
	store := memstore.New()
	e := jobstatetest.NewWithStore(printer{}, store, jobstate.WithMachines(queueMachine()))
	job := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("invoice.pdf")})
	fmt.Println("jobs run:", e.Run("queue", worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Result: []byte("processed")}, nil
	})))
	e.AssertHistory(job.ID, "create", "claim", "succeed")
	stored, err := store.Get(context.Background(), job.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(stored.State, string(stored.Result), stored.CompletedAt.Equal(jobstatetest.Epoch))
	// Output:
	// jobs run: 1
	// SUCCEEDED processed true
}
