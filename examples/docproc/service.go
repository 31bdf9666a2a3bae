package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// Document is a job's payload.
type Document struct {
	Name string `json:"name"`
}

// Processor does one processing attempt of a document and returns its
// output, or the error it failed with.
type Processor func(ctx context.Context, doc Document, attempt int) ([]byte, error)

// Metadata is the job metadata of the lifecycle, read from a job: null fields
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

// MetadataOf presents a job as the lifecycle's metadata. errorType is the class
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

// App is the document processing service: the engine over a store (the
// in-memory store unless built with NewAppOn), on a manual clock that
// also drives the worker runtime's timers.
type App struct {
	Def   *jobstate.Definition
	Eng   *jobstate.Engine
	Store jobstate.Store
	Clock *jobstatetest.Clock
}

// NewApp builds the service on the in-memory store with its clock at start
// and the engine options given (such as jobstate.WithIDs).
func NewApp(start time.Time, opts ...jobstate.Option) (*App, error) {
	return NewAppOn(memstore.New(), start, opts...)
}

// NewAppOn builds the service on store with its clock at start and the
// engine options given.
func NewAppOn(store jobstate.Store, start time.Time, opts ...jobstate.Option) (*App, error) {
	def, err := NewDefinition()
	if err != nil {
		return nil, err
	}
	clock := jobstatetest.NewClock(start)
	eng, err := jobstate.New(store, append([]jobstate.Option{jobstate.WithMachines(def), jobstate.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("docproc: engine: %w", err)
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

// Cancel cancels a job out of band: from CREATED, QUEUED, RUNNING or
// RETRYING to FAILED. A running attempt is aborted; its worker's report is
// then refused (jobstate.ErrCancelled).
func (a *App) Cancel(ctx context.Context, id uuid.UUID, actor, reason string) (jobstate.Job, error) {
	return a.Eng.Cancel(ctx, id, jobstate.Call{Actor: actor, Reason: reason})
}

// ExhaustResources fails a queued job for resource exhaustion: QUEUED →
// FAILED, refused from any other state.
func (a *App) ExhaustResources(ctx context.Context, id uuid.UUID, actor, reason string) (jobstate.Job, error) {
	return a.Eng.Fire(ctx, id, EventResourceExhaustion, jobstate.Call{Actor: actor, Reason: reason})
}

// Handler is the worker's handler: it decodes the job's document, marks
// the execution started, and runs one processing attempt; the runtime
// reports the outcome (a result, or the error to classify) and the engine
// decides where the job goes from there.
func (a *App) Handler(process Processor) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		job := t.Job()
		var doc Document
		if err := json.Unmarshal(job.Payload, &doc); err != nil {
			return jobstate.CommitInput{}, fmt.Errorf("%w: %v", ErrCorruptDocument, err)
		}
		if _, err := a.Eng.Start(ctx, t.Lease()); err != nil {
			return jobstate.CommitInput{}, fmt.Errorf("start: %w", err)
		}
		out, err := process(ctx, doc, job.Attempt)
		if err != nil {
			return jobstate.CommitInput{}, err
		}
		return jobstate.CommitInput{Result: out}, nil
	})
}

// Worker returns a worker named name that runs process on the service's
// jobs, one at a time, on the service's clock; each job's commit ends
// before the next job is claimed, so that the traces are the same on
// every run.
func (a *App) Worker(name string, process Processor) (*worker.Worker, error) {
	w, err := worker.New(a.Eng,
		worker.WithName(name),
		worker.WithClock(a.Clock),
		worker.WithCommitsAhead(0),
		worker.Handle(Machine, a.Handler(process), 1),
	)
	if err != nil {
		return nil, fmt.Errorf("docproc: worker: %w", err)
	}
	return w, nil
}

// Trace is one of the lifecycle's example traces: a document and the outcome of
// each processing attempt (nil for success).
type Trace struct {
	Name     string
	Document Document
	Attempts []error
}

// Traces are the lifecycle's four examples.
var Traces = []Trace{
	{"Successful Processing", Document{"invoice.pdf"}, []error{nil}},
	{"Failure with Successful Retry", Document{"scan.tiff"}, []error{ErrTimeout, nil}},
	{"Failure Exhausting Retries", Document{"report.docx"}, []error{ErrResourceUnavailable, ErrResourceUnavailable, ErrResourceUnavailable, ErrResourceUnavailable}},
	{"Non-Retryable Failure", Document{"broken.doc"}, []error{ErrUnsupportedFormat}},
}

// Advancer is a manual clock.
type Advancer interface {
	Advance(d time.Duration) time.Time
}

// Scripted returns a processor that takes WorkTime on clock and then ends
// attempt n with outcomes[n-1] (the last one repeating).
func Scripted(clock Advancer, outcomes []error) Processor {
	return func(_ context.Context, doc Document, attempt int) ([]byte, error) {
		clock.Advance(WorkTime)
		if err := outcomes[min(attempt, len(outcomes))-1]; err != nil {
			return nil, err
		}
		return []byte("processed " + doc.Name), nil
	}
}

// RunTrace creates and submits the trace's document, then lets a worker
// work the queue (worker.Worker.Drain) until the job has ended, an idle
// worker looking again every IdleWait, and returns the job and its
// history.
func RunTrace(ctx context.Context, a *App, tr Trace) (jobstate.Job, []jobstate.Transition, error) {
	job, err := a.CreateJob(ctx, tr.Document, "alice")
	if err != nil {
		return job, nil, err
	}
	if _, err := a.Submit(ctx, job.ID, "alice"); err != nil {
		return job, nil, err
	}
	w, err := a.Worker("worker-1", Scripted(a.Clock, tr.Attempts))
	if err != nil {
		return job, nil, err
	}
	for {
		// Drain runs the due jobs and sweeps (moving RETRYING jobs whose
		// delay has elapsed back to QUEUED) until nothing is due.
		if _, err := w.Drain(ctx, 0); err != nil {
			return job, nil, fmt.Errorf("docproc: drain: %w", err)
		}
		if job, err = a.Eng.Get(ctx, job.ID); err != nil {
			return job, nil, err
		}
		if job.Terminal() {
			break
		}
		a.Clock.Advance(IdleWait)
	}
	hist, err := a.Eng.History(ctx, job.ID)
	return job, hist, err
}

// RenderTrace draws a history the way the lifecycle draws its examples, each
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
		case t.To == Failed && (t.Event == jobstate.EventCancel || t.Event == EventResourceExhaustion):
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
