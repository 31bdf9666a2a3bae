package jobstatetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/worker"
)

// queueMachine is the README's "queue" machine.
func queueMachine() *jobstate.Definition {
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: "CANCELLED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventRetry, To: "RETRYING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"RETRYING"}, Event: jobstate.EventRequeue, To: "QUEUED"},
			{From: []jobstate.State{"QUEUED", "RUNNING", "RETRYING"}, Event: jobstate.EventCancel, To: "CANCELLED"},
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)}},
	})
	if err != nil {
		panic(err)
	}
	return def
}

// TestReadmeQueueMachine tests the README's machine with its worker: a
// success, a retry after a timeout, a permanent failure.
func TestReadmeQueueMachine(t *testing.T) {
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine()))
	var stored jobstatetest.Ledger
	invoice := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("invoice.pdf")})
	scan := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("scan.tiff")})
	broken := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("broken.doc")})
	w := e.Worker(worker.Handle("queue", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) (jobstate.CommitInput, error) {
		switch doc := string(tk.Job().Payload); {
		case doc == "broken.doc":
			return jobstate.CommitInput{}, jobstate.Permanent(errors.New("unsupported format"))
		case doc == "scan.tiff" && tk.Lease().Token == 1:
			return jobstate.CommitInput{}, errors.New("timeout")
		default:
			return jobstate.CommitInput{Result: []byte("processed " + doc), Effect: stored.Effect}, nil
		}
	}), 2))
	e.RunFor(w, 2*time.Second, time.Second)
	e.AssertHistory(invoice.ID, "create", "claim", "succeed")
	e.AssertHistory(scan.ID, "create", "claim", "retry", "requeue", "claim", "succeed")
	e.AssertState(broken.ID, "FAILED")
	e.AssertAppliedOnce(&stored, invoice.ID, scan.ID)
	if stored.Applied(broken.ID) != 0 {
		t.Error("a failed document was stored")
	}
}

// TestReadmeQueueMachineCancels: the README's machine cancels a queued job,
// and refuses to cancel a job that has ended.
func TestReadmeQueueMachineCancels(t *testing.T) {
	e := jobstatetest.New(t, jobstate.WithMachines(queueMachine()))
	ctx := context.Background()
	job := e.Create(jobstate.NewJob{Machine: "queue", Payload: []byte("draft.doc")})
	if _, err := e.Engine.Cancel(ctx, job.ID, jobstate.Call{Actor: "user-7", Reason: "withdrawn"}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	e.AssertState(job.ID, "CANCELLED")
	if _, err := e.Engine.Cancel(ctx, job.ID, jobstate.Call{}); !errors.Is(err, jobstate.ErrTerminal) {
		t.Errorf("cancelling a cancelled job: %v, want ErrTerminal", err)
	}
}
