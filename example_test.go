package jobstate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// queueSpec is a document queue: a document is created, submitted, processed
// by a worker, retried after a transient failure (three times, one second
// apart), and ends succeeded or failed. It is simpler than the document
// processing lifecycle (examples/docproc), which also has a cancellation
// and a resource exhaustion rule, and an error classifier.
func queueSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "CREATED", Kind: jobstate.KindInitial},
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "RETRYING", Kind: jobstate.KindWaiting},
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
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)}},
	}
}

func ExampleNewDefinition() {
	spec := queueSpec()
	def, err := jobstate.NewDefinition(spec)
	fmt.Println(def.Name(), def.Initial(), err)

	// A broken table is refused at construction, with every problem named.
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{"SUCCEEDED"}, Event: "reopen", To: "QUEUED"})
	spec.States[5].Outcome = ""
	_, err = jobstate.NewDefinition(spec)
	fmt.Println(errors.Is(err, jobstate.ErrInvalidDefinition))
	fmt.Println(err)
	// Output:
	// queue CREATED <nil>
	// true
	// jobstate: invalid definition "queue": 2 problem(s)
	//   - terminal state "FAILED" has no outcome
	//   - rule #7 (SUCCEEDED --reopen--> QUEUED) leaves terminal state "SUCCEEDED"; nothing may leave a terminal state
}

func ExampleDefinition_Step() {
	def, _ := jobstate.NewDefinition(queueSpec())
	job := jobstate.Job{Machine: "queue", State: "QUEUED", Kind: jobstate.KindReady, Version: 2}
	rec, err := def.Step(context.Background(), &job, jobstate.Input{Event: jobstate.EventClaim, Actor: "worker-1"})
	fmt.Println(rec.From, "->", rec.To, "version", job.Version, err)

	_, err = def.Step(context.Background(), &job, jobstate.Input{Event: "submit"})
	fmt.Println(errors.Is(err, jobstate.ErrInvalidTransition), job.State)
	// Output:
	// QUEUED -> RUNNING version 3 <nil>
	// true RUNNING
}

// A worker's loop: claim, do the work, commit its effect exactly once.
func ExampleEngine() {
	ctx := context.Background()
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	def, _ := jobstate.NewDefinition(queueSpec())
	eng, _ := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))

	c, _ := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Payload: []byte("report.pdf")})
	eng.Fire(ctx, c.Job.ID, "submit", jobstate.Call{Actor: "alice"})

	claimed, _ := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "worker-1"})
	job, _ := eng.Succeed(ctx, claimed.Lease, jobstate.CommitInput{
		Result: []byte("12 pages"),
		Effect: func(ctx context.Context, j jobstate.Job) error {
			fmt.Printf("storing %s for %s\n", j.Result, j.Payload)
			return nil
		},
	})
	fmt.Println(job.State, job.Outcome)

	history, _ := eng.History(ctx, job.ID)
	for _, t := range history {
		fmt.Printf("v%d %s --%s--> %s\n", t.Version, t.From, t.Event, t.To)
	}
	// Output:
	// storing 12 pages for report.pdf
	// SUCCEEDED succeeded
	// v1  --create--> CREATED
	// v2 CREATED --submit--> QUEUED
	// v3 QUEUED --claim--> RUNNING
	// v4 RUNNING --succeed--> SUCCEEDED
}

// Failures are classified and retried with backoff until retries run out.
func ExampleEngine_Fail() {
	ctx := context.Background()
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	def, _ := jobstate.NewDefinition(queueSpec())
	eng, _ := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
	c, _ := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
	eng.Fire(ctx, c.Job.ID, "submit", jobstate.Call{})

	claimed, _ := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	job, _ := eng.Fail(ctx, claimed.Lease, errors.New("timeout"))
	fmt.Println(job.State, job.RetryCount, job.NotBefore.Sub(clock.Now()))

	clock.Advance(time.Second)
	eng.Sweep(ctx) // RETRYING → QUEUED once the backoff has passed
	claimed, _ = eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	job, _ = eng.Fail(ctx, claimed.Lease, jobstate.Permanent(errors.New("corrupt document")))
	fmt.Println(job.State, job.ErrorClass, job.LastError)
	// Output:
	// RETRYING 1 1s
	// FAILED permanent corrupt document
}

// An execution that lost its lease cannot commit: the winner is named.
func ExampleEngine_Commit() {
	ctx := context.Background()
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	spec := queueSpec()
	spec.Policy.LeaseTTL = 10 * time.Second
	def, _ := jobstate.NewDefinition(spec)
	eng, _ := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
	c, _ := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
	eng.Fire(ctx, c.Job.ID, "submit", jobstate.Call{})

	a, _ := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "A"})
	clock.Advance(11 * time.Second) // A stalls past its lease
	eng.Sweep(ctx)                  // A's execution is aborted, the job retried
	clock.Advance(time.Second)
	eng.Sweep(ctx)
	b, _ := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "B"})
	_, err := eng.Commit(ctx, b.Lease, jobstate.CommitInput{})
	fmt.Println("B commits:", err)

	_, err = eng.Commit(ctx, a.Lease, jobstate.CommitInput{})
	var ce *jobstate.CommitError
	fmt.Println("A commits:", errors.As(err, &ce), ce.Winner == b.Lease.ExecID)
	// Output:
	// B commits: <nil>
	// A commits: true true
}

func ExampleKey() {
	// Length-prefixed parts: ("ab","c") and ("a","bc") differ.
	fmt.Println(jobstate.Key("ab", "c") == jobstate.Key("a", "bc"))
	// Image generation: the same request within one minute is one job.
	t := time.Date(2026, 1, 1, 9, 30, 10, 0, time.UTC)
	k1 := jobstate.KeyAt(t, time.Minute, "user-7", "a red fox", "1024x1024")
	k2 := jobstate.KeyAt(t.Add(40*time.Second), time.Minute, "user-7", "a red fox", "1024x1024")
	fmt.Println(k1 == k2)
	// Output:
	// false
	// true
}

// Listing a user's jobs, newest first, a page at a time.
func ExampleEngine_List() {
	ctx := context.Background()
	clock := jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	def, _ := jobstate.NewDefinition(queueSpec())
	eng, _ := jobstate.New(memstore.New(), jobstate.WithMachines(def), jobstate.WithClock(clock))
	for _, doc := range []string{"a.pdf", "b.pdf", "c.pdf"} {
		eng.Create(ctx, jobstate.NewJob{Machine: "queue", Owner: "alice", Payload: []byte(doc)})
		clock.Advance(time.Second)
	}
	eng.Create(ctx, jobstate.NewJob{Machine: "queue", Owner: "bob", Payload: []byte("x.pdf")})

	q := jobstate.ListQuery{Owner: "alice", Desc: true, Limit: 2}
	for cursor, n := "", 1; ; n++ {
		page, err := eng.List(ctx, q, cursor)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, j := range page.Jobs {
			fmt.Printf("page %d: %s %s\n", n, j.Payload, j.State)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	// Output:
	// page 1: c.pdf CREATED
	// page 1: b.pdf CREATED
	// page 2: a.pdf CREATED
}

func ExampleEngine_CreateMany() {
	ctx := context.Background()
	def, _ := jobstate.NewDefinition(queueSpec())
	eng, _ := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	var batch []jobstate.NewJob
	for _, doc := range []string{"a.pdf", "b.pdf", "c.pdf"} {
		batch = append(batch, jobstate.NewJob{Machine: "queue", Payload: []byte(doc), Actor: "import"})
	}
	// A key makes a job's creation idempotent: a batch sent twice (a
	// retried import) creates its keyed jobs once.
	batch = append(batch, jobstate.NewJob{Machine: "queue", Payload: []byte("d.pdf"), Key: "import:d.pdf"})
	created, err := eng.CreateMany(ctx, batch)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range created {
		fmt.Println(string(c.Job.Payload), c.Job.State, c.Existing)
	}
	again, err := eng.CreateMany(ctx, batch[3:])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(again[0].Existing, again[0].Job.ID == created[3].Job.ID)
	// Output:
	// a.pdf CREATED false
	// b.pdf CREATED false
	// c.pdf CREATED false
	// d.pdf CREATED false
	// true true
}
