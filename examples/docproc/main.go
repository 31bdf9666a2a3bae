// Command docproc runs seed 001's document processing jobs on the
// in-memory store and prints the seed's four example traces, each with
// its timings and the job's metadata:
//
//	go run ./examples/docproc
//
// The machine is the seed's table (CREATED, QUEUED, RUNNING, RETRYING,
// SUCCEEDED, FAILED); errors are classified by the seed's lists of
// retryable and non-retryable failures; retries are bounded at 3 with a
// fixed 1 s backoff. The example declares all that; which state comes next
// is always the engine's decision. Time is a manual clock, so the retry
// delays pass instantly and the timings are exact.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// The states of seed 001.
const (
	Created   jobstate.State = "CREATED"
	Queued    jobstate.State = "QUEUED"
	Running   jobstate.State = "RUNNING"
	Succeeded jobstate.State = "SUCCEEDED"
	Failed    jobstate.State = "FAILED"
	Retrying  jobstate.State = "RETRYING"
)

// EventSubmit is the job submission (CREATED → QUEUED), the one move of
// the table a caller fires by name. The others are the engine's lifecycle
// events: claim (processing begins), succeed, retry, fail, requeue (retry
// delay elapsed) and cancel (resource exhaustion or cancellation).
const EventSubmit jobstate.Event = "submit"

// The example's settings.
const (
	// Machine is the name the definition is registered under.
	Machine = "docproc"
	// MaxRetries is the seed's maxRetries: always 3.
	MaxRetries = 3
	// RetryDelay is the seed's fixed backoff.
	RetryDelay = time.Second
	// LeaseTTL is how long a worker may hold a job without a heartbeat.
	LeaseTTL = 30 * time.Second
	// WorkTime is how long one processing attempt takes in the
	// demonstration.
	WorkTime = 250 * time.Millisecond
	// IdleWait is how long an idle worker waits before looking again.
	IdleWait = 250 * time.Millisecond
)

// kindError is an error with a message of its own that belongs to a wider
// kind: errors.Is finds the kind.
type kindError struct {
	msg  string
	kind error
}

// Error returns the error's own message.
func (e *kindError) Error() string { return e.msg }

// Unwrap returns the kind.
func (e *kindError) Unwrap() error { return e.kind }

// Retryable failures (seed 001, "Retryable Failures"): they may succeed on
// retry.
var (
	// ErrTransient: a transient system error (temporary resource
	// unavailable).
	ErrTransient = errors.New("transient system error")
	// ErrResourceUnavailable is the transient error of the third example
	// trace.
	ErrResourceUnavailable error = &kindError{"temporary unavailable", ErrTransient}
	// ErrTimeout: a timeout or deadline exceeded (context.DeadlineExceeded
	// is one too).
	ErrTimeout = errors.New("timeout")
	// ErrQueueOverload: the queue is overloaded.
	ErrQueueOverload = errors.New("queue overload")
	// ErrDependencyUnavailable: a temporary external dependency is
	// unavailable.
	ErrDependencyUnavailable = errors.New("external dependency temporarily unavailable")
)

// Non-retryable failures (seed 001, "Non-Retryable Failures"): retrying
// cannot help; the job fails at once.
var (
	// ErrInvalidDocument: invalid input document.
	ErrInvalidDocument = errors.New("invalid input document")
	// ErrCorruptDocument and ErrUnsupportedFormat are the two invalid
	// documents the seed names; the second is the error of the fourth
	// example trace.
	ErrCorruptDocument   error = &kindError{"corrupted document", ErrInvalidDocument}
	ErrUnsupportedFormat error = &kindError{"invalid document format", ErrInvalidDocument}
	// ErrValidation: job validation failure.
	ErrValidation = errors.New("job validation failure")
	// ErrProcessingTimeout: a processing timeout that is permanent, not
	// transient (unlike ErrTimeout).
	ErrProcessingTimeout = errors.New("processing timeout (permanent)")
	// ErrConfiguration: a configuration error.
	ErrConfiguration = errors.New("configuration error")
	// ErrResourceLimit: a resource limit exceeded.
	ErrResourceLimit = errors.New("resource limit exceeded")
	// ErrQuotaExceeded, ErrFileTooLarge and ErrTooComplex are the three
	// resource limits the seed names.
	ErrQuotaExceeded error = &kindError{"quota exceeded", ErrResourceLimit}
	ErrFileTooLarge  error = &kindError{"file size limit exceeded", ErrResourceLimit}
	ErrTooComplex    error = &kindError{"complexity limit exceeded", ErrResourceLimit}
)

// RetryableErrors and NonRetryableErrors are the seed's two lists, as the
// classifier reads them.
var (
	RetryableErrors    = []error{ErrTransient, ErrTimeout, context.DeadlineExceeded, ErrQueueOverload, ErrDependencyUnavailable}
	NonRetryableErrors = []error{ErrInvalidDocument, ErrValidation, ErrProcessingTimeout, ErrConfiguration, ErrResourceLimit}
)

// Classify is the machine's error classifier (Policy.Classify): the
// seed's non-retryable failures are permanent, its retryable ones
// retryable. Any other error is left to the library's default, retryable.
// A worker may also mark an error itself with jobstate.Permanent or
// jobstate.Retryable, which wins over the classifier.
func Classify(err error) (jobstate.ErrorClass, time.Duration) {
	for _, e := range NonRetryableErrors {
		if errors.Is(err, e) {
			return jobstate.ClassPermanent, 0
		}
	}
	for _, e := range RetryableErrors {
		if errors.Is(err, e) {
			return jobstate.ClassRetryable, 0
		}
	}
	return jobstate.ClassNone, 0
}

// NewDefinition declares seed 001's machine: its states, its seven valid
// transitions (every other one is refused), and its retry policy.
func NewDefinition() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(jobstate.Spec{
		Name: Machine,
		States: []jobstate.StateSpec{
			{Name: Created, Kind: jobstate.KindInitial, Description: "created, not yet submitted to the queue"},
			{Name: Queued, Kind: jobstate.KindReady, Description: "waiting in the processing queue"},
			{Name: Running, Kind: jobstate.KindActive, Description: "actively being processed"},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "completed successfully"},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed, Description: "failed permanently"},
			{Name: Retrying, Kind: jobstate.KindWaiting, Description: "scheduled for retry after a transient failure"},
		},
		Initial: Created,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Created}, Event: EventSubmit, To: Queued, Description: "job submission"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running, Description: "processing begins"},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded, Description: "processing completed successfully"},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed, Description: "unrecoverable error or max retries exceeded"},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Retrying, Description: "transient error and retries remaining"},
			{From: []jobstate.State{Retrying}, Event: jobstate.EventRequeue, To: Queued, Description: "retry delay elapsed"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventCancel, To: Failed, Description: "resource exhaustion or cancellation"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:     LeaseTTL,
			Retry:        jobstate.RetryPolicy{MaxRetries: MaxRetries, Backoff: jobstate.FixedBackoff(RetryDelay)},
			Classify:     Classify,
			ClassifyName: "Classify",
		},
	})
}

// Document is a job's payload.
type Document struct {
	Name string `json:"name"`
}

// Processor does one processing attempt of a document and returns its
// output, or the error it failed with.
type Processor func(ctx context.Context, doc Document, attempt int) ([]byte, error)

// Metadata is the job metadata of the seed, read from a job: null fields
// are nil.
type Metadata struct {
	JobID       uuid.UUID      `json:"jobId"`
	State       jobstate.State `json:"state"`
	CreatedAt   time.Time      `json:"createdAt"`
	StartedAt   *time.Time     `json:"startedAt"`
	CompletedAt *time.Time     `json:"completedAt"`
	RetryCount  int            `json:"retryCount"`
	MaxRetries  int            `json:"maxRetries"`
	LastError   *string        `json:"lastError"`
	ErrorType   *string        `json:"errorType"`
}

// The values of Metadata.ErrorType.
const (
	ErrorTypeRetryable = "RETRYABLE"
	ErrorTypeTerminal  = "TERMINAL"
)

// MetadataOf presents a job as the seed's metadata. errorType is the class
// of the most recent error: RETRYABLE for a transient one (also when it
// was the last of a job whose retries are spent), TERMINAL for a
// non-retryable one.
func MetadataOf(job jobstate.Job) Metadata {
	m := Metadata{JobID: job.ID, State: job.State, CreatedAt: job.CreatedAt, RetryCount: job.RetryCount, MaxRetries: job.MaxRetries}
	if !job.StartedAt.IsZero() {
		t := job.StartedAt
		m.StartedAt = &t
	}
	if !job.CompletedAt.IsZero() {
		t := job.CompletedAt
		m.CompletedAt = &t
	}
	if job.LastError != "" {
		s := job.LastError
		m.LastError = &s
	}
	var et string
	switch job.ErrorClass {
	case jobstate.ClassRetryable:
		et = ErrorTypeRetryable
	case jobstate.ClassPermanent:
		et = ErrorTypeTerminal
	}
	if et != "" {
		m.ErrorType = &et
	}
	return m
}

// App is the document processing service: the engine over the in-memory
// store, on a manual clock.
type App struct {
	Def   *jobstate.Definition
	Eng   *jobstate.Engine
	Store *memstore.Store
	Clock *jobstate.ManualClock
}

// NewApp builds the service with its clock at start and the engine options
// given (such as jobstate.WithIDs).
func NewApp(start time.Time, opts ...jobstate.Option) (*App, error) {
	def, err := NewDefinition()
	if err != nil {
		return nil, err
	}
	clock := jobstate.NewManualClock(start)
	store := memstore.New()
	eng, err := jobstate.New(store, append([]jobstate.Option{jobstate.WithMachines(def), jobstate.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &App{Def: def, Eng: eng, Store: store, Clock: clock}, nil
}

// CreateJob creates a job for doc, in CREATED.
func (a *App) CreateJob(ctx context.Context, doc Document, actor string) (jobstate.Job, error) {
	payload, err := json.Marshal(doc)
	if err != nil {
		return jobstate.Job{}, err
	}
	c, err := a.Eng.Create(ctx, jobstate.NewJob{Machine: Machine, Payload: payload, Owner: actor, Actor: actor})
	return c.Job, err
}

// Submit submits a created job to the queue.
func (a *App) Submit(ctx context.Context, id uuid.UUID, actor string) (jobstate.Job, error) {
	return a.Eng.Fire(ctx, id, EventSubmit, jobstate.Call{Actor: actor})
}

// Cancel ends a queued job out of band, for resource exhaustion or a
// cancellation, as the seed's QUEUED → FAILED.
func (a *App) Cancel(ctx context.Context, id uuid.UUID, actor, reason string) (jobstate.Job, error) {
	return a.Eng.Cancel(ctx, id, jobstate.Call{Actor: actor, Reason: reason})
}

// Work is one attempt by a worker: claim the next due job, process it, and
// report the outcome; the engine decides where the job goes from there.
// jobstate.ErrNoJob when nothing is due.
func (a *App) Work(ctx context.Context, worker string, process Processor) (jobstate.Job, error) {
	c, err := a.Eng.Claim(ctx, jobstate.ClaimRequest{Machine: Machine, Worker: worker})
	if err != nil {
		return jobstate.Job{}, err
	}
	var doc Document
	if err := json.Unmarshal(c.Job.Payload, &doc); err != nil {
		return a.Eng.Fail(ctx, c.Lease, fmt.Errorf("%w: %v", ErrCorruptDocument, err))
	}
	if _, err := a.Eng.Start(ctx, c.Lease); err != nil {
		return jobstate.Job{}, err
	}
	out, err := process(ctx, doc, c.Job.Attempt)
	if err != nil {
		return a.Eng.Fail(ctx, c.Lease, err)
	}
	return a.Eng.Succeed(ctx, c.Lease, jobstate.CommitInput{Result: out})
}

// Tick lets d pass on the clock and runs the engine's sweep, which moves
// RETRYING jobs whose delay has elapsed back to QUEUED.
func (a *App) Tick(ctx context.Context, d time.Duration) error {
	a.Clock.Advance(d)
	_, err := a.Eng.Sweep(ctx)
	return err
}

// Trace is one of the seed's example traces: a document and the outcome of
// each processing attempt (nil for success).
type Trace struct {
	Name     string
	Document Document
	Attempts []error
}

// Traces are the seed's four examples.
var Traces = []Trace{
	{"Successful Processing", Document{"invoice.pdf"}, []error{nil}},
	{"Failure with Successful Retry", Document{"scan.tiff"}, []error{ErrTimeout, nil}},
	{"Failure Exhausting Retries", Document{"report.docx"}, []error{ErrResourceUnavailable, ErrResourceUnavailable, ErrResourceUnavailable, ErrResourceUnavailable}},
	{"Non-Retryable Failure", Document{"broken.doc"}, []error{ErrUnsupportedFormat}},
}

// Scripted returns a processor that takes WorkTime on clock and then ends
// attempt n with outcomes[n-1] (the last one repeating).
func Scripted(clock *jobstate.ManualClock, outcomes []error) Processor {
	return func(_ context.Context, doc Document, attempt int) ([]byte, error) {
		clock.Advance(WorkTime)
		if err := outcomes[min(attempt, len(outcomes))-1]; err != nil {
			return nil, err
		}
		return []byte("processed " + doc.Name), nil
	}
}

// RunTrace creates and submits the trace's document, then works the queue
// until the job has ended, and returns the job and its history.
func RunTrace(ctx context.Context, a *App, tr Trace) (jobstate.Job, []jobstate.Transition, error) {
	job, err := a.CreateJob(ctx, tr.Document, "alice")
	if err != nil {
		return job, nil, err
	}
	if _, err := a.Submit(ctx, job.ID, "alice"); err != nil {
		return job, nil, err
	}
	process := Scripted(a.Clock, tr.Attempts)
	for !job.Terminal() {
		_, err := a.Work(ctx, "worker-1", process)
		if errors.Is(err, jobstate.ErrNoJob) {
			err = a.Tick(ctx, IdleWait)
		}
		if err != nil {
			return job, nil, err
		}
		if job, err = a.Eng.Get(ctx, job.ID); err != nil {
			return job, nil, err
		}
	}
	hist, err := a.Eng.History(ctx, job.ID)
	return job, hist, err
}

// RenderTrace draws a history the way the seed draws its examples, each
// move indented under the one before, after its time since creation and
// its event.
func RenderTrace(job jobstate.Job, hist []jobstate.Transition) string {
	var b strings.Builder
	claims, retries := 0, 0
	for i, t := range hist {
		var notes []string
		switch t.To {
		case Running:
			claims++
			if claims > 1 {
				notes = append(notes, fmt.Sprintf("retry attempt %d", claims-1))
			}
			if i+1 < len(hist) {
				switch next := hist[i+1]; {
				case next.Event == jobstate.EventRetry:
					notes = append(notes, "transient error: "+next.Reason)
				case next.Event == jobstate.EventFail && i+2 == len(hist) && job.ErrorClass == jobstate.ClassRetryable:
					notes = append(notes, fmt.Sprintf("transient error: %s, but retryCount >= maxRetries", next.Reason))
				case next.Event == jobstate.EventFail:
					notes = append(notes, next.Reason)
				}
			}
		case Retrying:
			retries++
			notes = append(notes, fmt.Sprintf("retryCount = %d", retries))
		case Queued:
			if t.From == Retrying {
				notes = append(notes, "after "+t.At.Sub(hist[i-1].At).String())
			}
		}
		text := string(t.To)
		if len(notes) > 0 {
			text += " (" + strings.Join(notes, ", ") + ")"
		}
		switch {
		case t.To == Succeeded:
			text += " ✓"
		case t.To == Failed && t.Event == jobstate.EventCancel:
			text += " ✗ (" + t.Reason + ")"
		case t.To == Failed && job.ErrorClass == jobstate.ClassRetryable:
			text += " ✗ (exhausted retries)"
		case t.To == Failed:
			text += " ✗ (non-retryable, no retry attempt)"
		}
		if i > 0 {
			text = strings.Repeat("  ", i-1) + "→ " + text
		}
		fmt.Fprintf(&b, "+%.3fs  %-7s  %s\n", t.At.Sub(hist[0].At).Seconds(), t.Event, text)
	}
	return b.String()
}

// SeqIDs returns an id source counting from 1, for output that is the
// same on every run.
func SeqIDs() func() (uuid.UUID, error) {
	var mu sync.Mutex
	n := 0
	return func() (uuid.UUID, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		var id uuid.UUID
		id[6], id[8] = 0x70, 0x80 // version 7, RFC 4122 variant
		id[14], id[15] = byte(n>>8), byte(n)
		return id, nil
	}
}

// main runs the demonstration on standard output.
func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "docproc:", err)
		os.Exit(1)
	}
}

// run replays the seed's four example traces and prints each with the
// job's metadata.
func run(ctx context.Context, out io.Writer) error {
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	fmt.Fprintf(out, "Document processing (seed 001) on the in-memory store: maxRetries %d, fixed %s backoff.\n", MaxRetries, RetryDelay)
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
