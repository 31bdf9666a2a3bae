package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// Image is what the image API returns on success.
type Image struct {
	URL string
}

// FakeAPI stands in for the image generation API: each prompt answers with
// its scripted outcomes in turn (the last one repeating), or with an image.
// Each call takes Latency on the manual clock.
type FakeAPI struct {
	mu      sync.Mutex
	clock   Advancer
	latency time.Duration
	script  map[string][]error
	calls   map[string]int
}

// Advancer is a manual clock.
type Advancer interface {
	Advance(d time.Duration) time.Time
}

// NewFakeAPI returns an API whose calls take latency on clock.
func NewFakeAPI(clock Advancer, latency time.Duration) *FakeAPI {
	return &FakeAPI{clock: clock, latency: latency, script: make(map[string][]error), calls: make(map[string]int)}
}

// Script sets the outcomes of the calls for prompt, in order; nil is a
// success. The last outcome repeats.
func (f *FakeAPI) Script(prompt string, outcomes ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[prompt] = outcomes
}

// Generate calls the API for r.
func (f *FakeAPI) Generate(_ context.Context, r Request) (Image, error) {
	f.mu.Lock()
	n := f.calls[r.Prompt]
	f.calls[r.Prompt]++
	var err error
	if s := f.script[r.Prompt]; len(s) > 0 {
		err = s[min(n, len(s)-1)]
	}
	f.mu.Unlock()
	if f.latency > 0 {
		f.clock.Advance(f.latency)
	}
	if err != nil {
		return Image{}, err
	}
	return Image{URL: fmt.Sprintf("https://api.example/v1/out/%x.png", jobstate.Key(r.UserID, r.Prompt)[:12])}, nil
}

// Download fetches a generated image.
func (f *FakeAPI) Download(_ context.Context, img Image) ([]byte, error) {
	return []byte("\x89PNG generated " + img.URL), nil
}

// Calls returns how often prompt was sent to the API.
func (f *FakeAPI) Calls(prompt string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[prompt]
}

// App is the image generation service: the engine over a store (the
// in-memory store unless built with NewAppOn), the application database
// and the image API, on a manual clock that also drives the worker
// runtime's timers.
type App struct {
	Def   *jobstate.Definition
	Eng   *jobstate.Engine
	Store jobstate.Store
	Clock *jobstatetest.Clock
	DB    *AppDB
	API   *FakeAPI
}

// NewApp builds the service on the in-memory store at start, with the
// users' credit balances and the engine options given (such as
// jobstate.WithIDs).
func NewApp(start time.Time, balances map[string]int, opts ...jobstate.Option) (*App, error) {
	return NewAppOn(memstore.New(), start, balances, opts...)
}

// NewAppOn builds the service on store at start, with the users' credit
// balances and the engine options given. The application database stays
// in memory whatever the store.
func NewAppOn(store jobstate.Store, start time.Time, balances map[string]int, opts ...jobstate.Option) (*App, error) {
	db := NewAppDB(balances)
	def, err := NewDefinition(db)
	if err != nil {
		return nil, err
	}
	clock := jobstatetest.NewClock(start)
	eng, err := jobstate.New(store, append([]jobstate.Option{jobstate.WithMachines(def), jobstate.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("imagegen: engine: %w", err)
	}
	return &App{Def: def, Eng: eng, Store: store, Clock: clock, DB: db, API: NewFakeAPI(clock, 3*time.Second)}, nil
}

// CreateJob is the API's createJob: one job per idempotency key, behind
// the creation guard, paid for by the creation effect.
func (a *App) CreateJob(ctx context.Context, r Request) (jobstate.Created, error) {
	return a.Eng.Create(ctx, jobstate.NewJob{
		Machine: a.Def.Name(),
		Payload: r.encode(),
		Owner:   r.UserID,
		Actor:   r.UserID,
		Key:     IdempotencyKey(a.Eng.Now(), r),
	})
}

// Redrive is the operator's action on a dead letter after manual review:
// the job runs again as a new job, queued at once, which it returns.
// Errors are Engine.Redrive's: a *jobstate.TransitionError with
// jobstate.ErrInvalidTransition unless the job is in dead_letter,
// jobstate.ErrEffectApplied if it was redriven already, jobstate.ErrNotFound.
// The new job costs the user nothing (see ReserveCredits).
func (a *App) Redrive(ctx context.Context, id uuid.UUID, operator, reason string) (jobstate.Job, error) {
	ctx = context.WithValue(ctx, redriveKey{}, redriveMark{of: id, operator: operator})
	return a.Eng.Redrive(ctx, id, jobstate.Call{Actor: operator, Reason: reason})
}

// Handler is the worker's handler: the lifecycle's execution actions
// (startedAt and a heartbeat), the API call, and its outcome as the event
// the lifecycle names for it: a safety block is the reject event (E,
// through Task.Advance), any other error a failure (D; the engine retries
// it or dead-letters it), an image a success (C) whose actions run as the
// commit's effect, exactly once.
func (a *App) Handler() worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		if _, err := a.Eng.Start(ctx, t.Lease()); err != nil {
			return jobstate.CommitInput{}, fmt.Errorf("start: %w", err)
		}
		if err := t.Heartbeat(ctx); err != nil {
			return jobstate.CommitInput{}, fmt.Errorf("heartbeat: %w", err)
		}
		job := t.Job()
		r, err := decodeRequest(job.Payload)
		if err != nil {
			return jobstate.CommitInput{}, jobstate.Permanent(fmt.Errorf("unreadable request: %w", err))
		}
		img, apiErr := a.API.Generate(ctx, r)
		switch {
		case errors.Is(apiErr, ErrSafetyBlock):
			// Advance ends the execution: what the handler returns next
			// is ignored.
			_, err := t.Advance(ctx, EventReject, jobstate.Call{Reason: apiErr.Error()})
			return jobstate.CommitInput{}, err
		case apiErr != nil:
			return jobstate.CommitInput{}, apiErr
		}
		data, err := a.API.Download(ctx, img)
		if err != nil {
			return jobstate.CommitInput{}, err
		}
		return jobstate.CommitInput{
			Result: []byte(ResultURL(job.ID)),
			Effect: a.DB.StoreAsset(img, data),
		}, nil
	})
}

// Worker returns a worker named name running Handler, one job at a time,
// on the service's clock; a job's commit ends before the next is claimed.
func (a *App) Worker(name string, h worker.Handler) (*worker.Worker, error) {
	w, err := worker.New(a.Eng,
		worker.WithName(name),
		worker.WithClock(a.Clock),
		worker.WithCommitsAhead(0),
		worker.Handle(a.Def.Name(), h, 1),
	)
	if err != nil {
		return nil, fmt.Errorf("imagegen: worker: %w", err)
	}
	return w, nil
}

// Work is one pickup by a worker named name: it runs one due job through
// the worker runtime (worker.Worker.Drain with a limit of 1, which sweeps
// first when no job is due) and returns the job as its execution left it;
// jobstate.ErrNoJob when nothing is due.
func (a *App) Work(ctx context.Context, name string) (jobstate.Job, error) {
	ran := make(chan uuid.UUID, 1)
	h := a.Handler()
	w, err := a.Worker(name, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		ran <- t.Job().ID
		return h.Work(ctx, t)
	}))
	if err != nil {
		return jobstate.Job{}, err
	}
	n, err := w.Drain(ctx, 1)
	if err != nil && !errors.Is(err, worker.ErrDrainLimit) {
		return jobstate.Job{}, fmt.Errorf("imagegen: drain: %w", err)
	}
	if n == 0 {
		return jobstate.Job{}, jobstate.ErrNoJob
	}
	return a.Eng.Get(ctx, <-ran)
}

// RetryCount returns the lifecycle's retryCount of a job (see RetryCount).
func (a *App) RetryCount(ctx context.Context, id uuid.UUID) (int, error) {
	h, err := a.Eng.History(ctx, id)
	if err != nil {
		return 0, err
	}
	return RetryCount(h), nil
}

// Tick lets d pass on the clock and runs the engine's sweep (due retries
// back to queued, lost leases recovered).
func (a *App) Tick(ctx context.Context, d time.Duration) error {
	a.Clock.Advance(d)
	_, err := a.Eng.Sweep(ctx)
	return err
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
