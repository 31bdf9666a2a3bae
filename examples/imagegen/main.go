// Command imagegen runs seed 000's image generation jobs on the in-memory
// store: jobs are created straight into "queued" behind a creation guard
// (prompt validation, quota) and an idempotency key, pay for themselves with
// a credit reservation made once at creation, are retried with exponential
// backoff, end in "dead_letter" when their retries are spent, in "rejected"
// when the safety filter blocks them (an audit record, no refund), and in
// "completed" when the image is stored as an asset. After manual review an
// operator may run a dead-lettered job again, once, as a new job
// (Engine.Redrive); the user's reservation covers it (see App.Redrive).
//
//	go run ./examples/imagegen
//
// The example declares the table, the guard and the effects; every decision
// about which state comes next is the engine's. Time is a manual clock, so
// the backoffs pass instantly, and job ids come from a counter, so the
// output is the same on every run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// The states of seed 000, named as the seed names them.
const (
	Queued     jobstate.State = "queued"
	Running    jobstate.State = "running"
	Completed  jobstate.State = "completed"
	Failed     jobstate.State = "failed"
	Rejected   jobstate.State = "rejected"
	DeadLetter jobstate.State = "dead_letter"
)

// EventReject is the safety rejection (seed 000, transition E): a user
// event, fired by the worker through its lease when the image API's safety
// filter blocks the prompt.
const EventReject jobstate.Event = "reject"

// The example's settings.
const (
	// Machine is the name the definition is registered under.
	Machine = "imagegen"
	// CreditsPerImage is what one job reserves at creation.
	CreditsPerImage = 5
	// MaxRetries is the seed's MAX_RETRIES: failures retried before the job
	// is dead-lettered, so a job that always fails runs MaxRetries+1 times.
	// (The seed's pseudocode, read literally, re-queues only MAX_RETRIES-1
	// times; docs/examples/imagegen.md explains the choice.)
	MaxRetries = 3
	// MaxPromptRunes bounds a prompt's length (PromptGuard.validate).
	MaxPromptRunes = 500
	// LeaseTTL is how long a worker holds a job without a heartbeat.
	LeaseTTL = 30 * time.Second
	// AuditSafeBlock is the audit action a safety rejection writes.
	AuditSafeBlock = "SAFE_BLOCK"
)

// Backoff is seed 000's "Calculate Backoff (Exponential)": 2 s before the
// first retry, doubling, capped at one minute (2 s, 4 s, 8 s for the three
// retries). No jitter, so the schedule can be checked value by value.
var Backoff = jobstate.ExponentialBackoff(2*time.Second, 2, time.Minute)

// Errors of the creation guard. The engine wraps them in a
// *jobstate.TransitionError with jobstate.ErrGuardRefused, so callers
// match either.
var (
	// ErrInvalidPrompt: PromptGuard.validate() refused the request.
	ErrInvalidPrompt = errors.New("invalid prompt")
	// ErrQuotaExceeded: Quota.check() refused: the user's credits do not
	// cover the job.
	ErrQuotaExceeded = errors.New("quota exceeded")
)

// Errors of the (simulated) image API.
var (
	// ErrAPITimeout and ErrAPI500 are the seed's failure triggers: retried.
	ErrAPITimeout = errors.New("image API timeout")
	ErrAPI500     = errors.New("image API: 500 internal error")
	// ErrSafetyBlock is the API's safety filter (NSFW detected): the job is
	// rejected, not failed.
	ErrSafetyBlock = errors.New("image API safety filter: NSFW detected")
)

// Params are the generation parameters that belong to the idempotency key.
type Params struct {
	Size  string `json:"size"`
	Style string `json:"style,omitempty"`
}

// allowedSizes are the sizes PromptGuard.validate accepts.
var allowedSizes = map[string]bool{"512x512": true, "1024x1024": true, "1024x1792": true}

// Request is a user's createJob call; it is stored as the job's payload.
type Request struct {
	UserID string `json:"user"`
	Prompt string `json:"prompt"`
	Params Params `json:"params"`
}

// encode returns the request as a job payload.
func (r Request) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of strings always encodes
	}
	return b
}

// decodeRequest reads a job's payload back.
func decodeRequest(payload []byte) (Request, error) {
	var r Request
	err := json.Unmarshal(payload, &r)
	return r, err
}

// IdempotencyKey is the seed's Hash(userId + prompt + params +
// timestamp_minute): requests in the same minute share it.
func IdempotencyKey(now time.Time, r Request) string {
	params, err := json.Marshal(r.Params) // fields in declaration order: canonical
	if err != nil {
		panic(err)
	}
	return jobstate.KeyAt(now, time.Minute, r.UserID, r.Prompt, string(params))
}

// NewDefinition declares seed 000's machine. Its guard and effects read and
// write db, the application's own database.
func NewDefinition(db *AppDB) (*jobstate.Definition, error) {
	return jobstate.NewDefinition(jobstate.Spec{
		Name: Machine,
		States: []jobstate.StateSpec{
			{Name: Queued, Kind: jobstate.KindReady, Description: "created, validated, awaiting a worker"},
			{Name: Running, Kind: jobstate.KindActive, Description: "picked up by a worker, API called"},
			{Name: Completed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "generated, asset URL stored"},
			{Name: Failed, Kind: jobstate.KindWaiting, Description: "API error, waiting out the backoff"},
			{Name: Rejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected, Description: "blocked by moderation or safety"},
			{Name: DeadLetter, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeDeadLettered, Description: "max retries exceeded, for manual review"},
		},
		// queued is the initial state: createJob (null → queued) is the
		// creation itself, guarded and with its action below.
		Initial: Queued,
		Rules: []jobstate.Rule{
			// B. Execution: a worker's pickup.
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running},
			// C. Success, through Engine.Succeed; its actions are the
			// commit's effect (see App.Report).
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Completed},
			// D. Failure: running → failed either way. With retries left
			// the engine counts the retry and sets the backoff (retry);
			// with none left it goes on to dead_letter in the same write
			// (fail, then exhaust).
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Failed},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed},
			{From: []jobstate.State{Failed}, Event: jobstate.EventRequeue, To: Queued, Description: "retry: backoff elapsed"},
			{From: []jobstate.State{Failed}, Event: jobstate.EventExhaust, To: DeadLetter, Description: "retries spent"},
			// E. Rejection, running → rejected. The seed's state table
			// lists rejected among the next states of queued instead
			// (moderation before any worker ran it) and not of running;
			// the table here has both, so that neither reading of the
			// seed is refused.
			{From: []jobstate.State{Queued, Running}, Event: EventReject, To: Rejected,
				Effect: db.AuditSafeBlock, EffectName: "audit " + AuditSafeBlock + ", no refund"},
		},
		Policy: jobstate.Policy{
			LeaseTTL: LeaseTTL,
			Retry:    jobstate.RetryPolicy{MaxRetries: MaxRetries, Backoff: Backoff},
			Idempotency: jobstate.IdempotencyPolicy{
				// The seed returns the existing job "if it exists and is not
				// failed", so a job in failed lets the same request create a
				// new one. dead_letter releases the key too: a dead-lettered
				// job is a failed job whose retries are spent; it will never
				// produce an image, which is exactly the case in which the
				// seed wants the request to start over, and holding the key
				// would hand the user back a dead job until the minute ends.
				// It cannot double-charge an accidental resend either: a UI
				// network retry arrives within seconds, while dead_letter
				// comes after four attempts and 2+4+8 s of backoff, so a
				// request arriving then is a deliberate new attempt and
				// pays for one. The terminal states that keep the key are
				// those in which the first request got its answer:
				// completed (the image) and rejected (a policy decision,
				// which resending the same prompt within the minute must
				// not buy a second try at).
				ReleaseIn: []jobstate.State{Failed, DeadLetter},
			},
			// The seed's "dead_letter: Max retries exceeded. Manual
			// review?": after the review an operator may run the job
			// again (App.Redrive, Engine.Redrive). dead_letter stays
			// final; the run is a new job, made at most once per dead
			// letter. completed and rejected are answers, not redriven.
			RedriveFrom: []jobstate.State{DeadLetter},
		},
		Create: jobstate.CreateSpec{
			Guard:      db.CreationGuard,
			GuardName:  "PromptGuard.validate, Quota.check",
			Effect:     db.ReserveCredits,
			EffectName: "deduct credits (reserved)",
		},
	})
}

// ValidatePrompt is PromptGuard.validate(): a non-blank prompt of at most
// MaxPromptRunes characters and a known image size.
func ValidatePrompt(r Request) error {
	p := strings.TrimSpace(r.Prompt)
	switch {
	case p == "":
		return fmt.Errorf("%w: empty", ErrInvalidPrompt)
	case utf8.RuneCountInString(p) > MaxPromptRunes:
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidPrompt, MaxPromptRunes)
	case !allowedSizes[r.Params.Size]:
		return fmt.Errorf("%w: unsupported size %q", ErrInvalidPrompt, r.Params.Size)
	}
	return nil
}

// Reservation is one credit deduction made at creation.
type Reservation struct {
	JobID   uuid.UUID
	User    string
	Credits int
	At      time.Time
}

// Redrive is one entry of the registry of redriven jobs: Job was created
// by Operator to run the dead-lettered job Of again, and is paid for by
// the reservation that paid for Of.
type Redrive struct {
	Job      uuid.UUID
	Of       uuid.UUID
	Owner    string
	Operator string
	At       time.Time
}

// redriveMark is what App.Redrive tells the creation guard and effect of
// the job it creates, through the context.
type redriveMark struct {
	of       uuid.UUID
	operator string
}

// redriveKey is the context key of a redriveMark. It is unexported, so only
// App.Redrive sets it.
type redriveKey struct{}

// redriveOf returns the mark of App.Redrive, if ctx carries one.
func redriveOf(ctx context.Context) (redriveMark, bool) {
	m, ok := ctx.Value(redriveKey{}).(redriveMark)
	return m, ok
}

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	Action string
	JobID  uuid.UUID
	// User is the job's owner, whose prompt was blocked.
	User string
	// Actor is who rejected the job (the worker that saw the safety
	// filter, or a moderator), and Reason why.
	Actor  string
	Reason string
	At     time.Time
}

// Asset is an entry of the user's library.
type Asset struct {
	JobID  uuid.UUID
	Owner  string
	Path   string // the object's key in the private bucket (/originals/...)
	URL    string // the job's resultUrl
	Source string // where the API served the image
	At     time.Time
}

// AppDB is the application's own database, kept in memory: credit balances
// and reservations, the audit log, the private bucket and the asset
// library. The engine never reads it; the example's guard and effects do.
type AppDB struct {
	mu           sync.Mutex
	balances     map[string]int
	reservations []Reservation
	redrives     []Redrive
	audit        []AuditRecord
	bucket       map[string][]byte
	assets       []Asset
}

// NewAppDB returns a database with the given credit balances.
func NewAppDB(balances map[string]int) *AppDB {
	db := &AppDB{balances: make(map[string]int), bucket: make(map[string][]byte)}
	for u, c := range balances {
		db.balances[u] = c
	}
	return db
}

// CreationGuard is the guard of createJob: PromptGuard.validate() and
// Quota.check(). (The seed's third guard, Idempotency.check, is the
// engine's: the job's idempotency key.) The creation of a redrive
// (App.Redrive) is validated but not checked against the quota: it costs
// the user nothing (see ReserveCredits), so a user who has spent their
// credits since still gets the image they paid for.
func (db *AppDB) CreationGuard(ctx context.Context, in jobstate.GuardInput) error {
	r, err := decodeRequest(in.Job.Payload)
	if err != nil {
		return fmt.Errorf("%w: unreadable request: %v", ErrInvalidPrompt, err)
	}
	if err := ValidatePrompt(r); err != nil {
		return err
	}
	if _, ok := redriveOf(ctx); ok {
		return nil
	}
	return db.CheckQuota(in.Job.Owner)
}

// CheckQuota is Quota.check(): the user's balance covers one image.
func (db *AppDB) CheckQuota(user string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if have := db.balances[user]; have < CreditsPerImage {
		return fmt.Errorf("%w: %s has %d credits, %d needed", ErrQuotaExceeded, user, have, CreditsPerImage)
	}
	return nil
}

// ReserveCredits is the creation's action, "Deduct Credits (Reserved)".
// The engine runs it once per created job, atomically with the insert; it
// checks the balance again as it deducts (a SQL ledger would do
// UPDATE ... WHERE balance >= cost), so two different requests of one user
// racing past the guard cannot overdraw it.
//
// A redrive is not charged. The user paid for one image, with the
// reservation of the job that was dead-lettered; the image never came, and
// running the job again is the operator's decision after manual review,
// not a new request of the user's. Charging it would be the double
// deduction the seed's idempotency key exists to prevent, and the seed
// settles reservations nowhere (no refund of the dead letter to offset
// it). So the reservation carries over: instead of deducting, the effect
// records the new job in the database's registry of redrives, atomically
// with the insert, naming the dead letter whose reservation pays for it. A
// redrive of a redriven job is covered the same way, by the first
// reservation of the chain.
//
// The effect tells a redrive apart by the mark App.Redrive puts on the
// context. It cannot use the creation record: the record (actor "ops",
// reason "redrive of job <id>: ...") is written with the job after the
// effect has run and is not handed to it (jobstate.FiringOf serves rule
// effects only), and the job it receives carries the dead letter's payload
// and owner, exactly like a fresh request from that user. The record stays
// the audit trail; the tests check that it and the registry agree. A
// caller of Engine.Redrive that bypasses App.Redrive is charged like any
// creation.
func (db *AppDB) ReserveCredits(ctx context.Context, job jobstate.Job) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if m, ok := redriveOf(ctx); ok {
		db.redrives = append(db.redrives, Redrive{Job: job.ID, Of: m.of, Owner: job.Owner, Operator: m.operator, At: job.CreatedAt})
		return nil
	}
	if have := db.balances[job.Owner]; have < CreditsPerImage {
		return fmt.Errorf("%w: %s has %d credits, %d needed", ErrQuotaExceeded, job.Owner, have, CreditsPerImage)
	}
	db.balances[job.Owner] -= CreditsPerImage
	db.reservations = append(db.reservations, Reservation{JobID: job.ID, User: job.Owner, Credits: CreditsPerImage, At: job.CreatedAt})
	return nil
}

// ErrNoFiring: AuditSafeBlock ran outside the engine's firing of the
// reject rule, so it has no rejection to record.
var ErrNoFiring = errors.New("rule effect run outside a firing")

// AuditSafeBlock is the rejection's action: an audit record SAFE_BLOCK,
// saying who rejected the job and why, which it reads from the rejection
// being written (jobstate.FiringOf). It refunds nothing (the seed's policy
// violation penalty).
func (db *AppDB) AuditSafeBlock(ctx context.Context, job jobstate.Job) error {
	f, ok := jobstate.FiringOf(ctx)
	if !ok {
		return ErrNoFiring
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.audit = append(db.audit, AuditRecord{
		Action: AuditSafeBlock, JobID: job.ID, User: job.Owner,
		Actor: f.Transition.Actor, Reason: f.Transition.Reason, At: f.Transition.At,
	})
	return nil
}

// StoreAsset returns the success actions for a downloaded image, to run as
// the commit's effect: 1. the image into the private bucket under
// /originals, 2. an asset entry in the library, dated by the commit. (3.
// the job's resultUrl is the commit's Result.) The effect sees the job as
// the commit writes it, so it reads the resultUrl from job.Result and the
// time from job.UpdatedAt. The commit boundary runs it at most once per
// job.
func (db *AppDB) StoreAsset(img Image, data []byte) jobstate.EffectFunc {
	return func(_ context.Context, job jobstate.Job) error {
		db.mu.Lock()
		defer db.mu.Unlock()
		path := OriginalPath(job.ID)
		db.bucket[path] = append([]byte(nil), data...)
		db.assets = append(db.assets, Asset{JobID: job.ID, Owner: job.Owner, Path: path, URL: string(job.Result), Source: img.URL, At: job.UpdatedAt})
		return nil
	}
}

// Balance returns a user's credits.
func (db *AppDB) Balance(user string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.balances[user]
}

// Reservations returns a copy of the credit reservations, in order.
func (db *AppDB) Reservations() []Reservation {
	db.mu.Lock()
	defer db.mu.Unlock()
	return append([]Reservation(nil), db.reservations...)
}

// Redrives returns a copy of the registry of redriven jobs, in order.
func (db *AppDB) Redrives() []Redrive {
	db.mu.Lock()
	defer db.mu.Unlock()
	return append([]Redrive(nil), db.redrives...)
}

// Audit returns a copy of the audit log, in order.
func (db *AppDB) Audit() []AuditRecord {
	db.mu.Lock()
	defer db.mu.Unlock()
	return append([]AuditRecord(nil), db.audit...)
}

// Assets returns a copy of the asset library, in order.
func (db *AppDB) Assets() []Asset {
	db.mu.Lock()
	defer db.mu.Unlock()
	return append([]Asset(nil), db.assets...)
}

// Object returns an object of the private bucket.
func (db *AppDB) Object(path string) ([]byte, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	b, ok := db.bucket[path]
	return b, ok
}

// OriginalPath is where a job's image is kept in the private bucket.
func OriginalPath(id uuid.UUID) string { return "/originals/" + id.String() + ".png" }

// ResultURL is the job's resultUrl: the private bucket's object.
func ResultURL(id uuid.UUID) string { return "bucket://images-private" + OriginalPath(id) }

// Image is what the image API returns on success.
type Image struct {
	URL string
}

// FakeAPI stands in for the image generation API: each prompt answers with
// its scripted outcomes in turn (the last one repeating), or with an image.
// Each call takes Latency on the manual clock.
type FakeAPI struct {
	mu      sync.Mutex
	clock   *jobstate.ManualClock
	latency time.Duration
	script  map[string][]error
	calls   map[string]int
}

// NewFakeAPI returns an API whose calls take latency on clock.
func NewFakeAPI(clock *jobstate.ManualClock, latency time.Duration) *FakeAPI {
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

// App is the image generation service: the engine over the in-memory
// store, the application database and the image API.
type App struct {
	Def   *jobstate.Definition
	Eng   *jobstate.Engine
	Store *memstore.Store
	Clock *jobstate.ManualClock
	DB    *AppDB
	API   *FakeAPI
}

// NewApp builds the service at start, with the users' credit balances and
// the engine options given (such as jobstate.WithIDs).
func NewApp(start time.Time, balances map[string]int, opts ...jobstate.Option) (*App, error) {
	db := NewAppDB(balances)
	def, err := NewDefinition(db)
	if err != nil {
		return nil, err
	}
	clock := jobstate.NewManualClock(start)
	store := memstore.New()
	eng, err := jobstate.New(store, append([]jobstate.Option{jobstate.WithMachines(def), jobstate.WithClock(clock)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &App{Def: def, Eng: eng, Store: store, Clock: clock, DB: db, API: NewFakeAPI(clock, 3*time.Second)}, nil
}

// CreateJob is the API's createJob: one job per idempotency key, behind
// the creation guard, paid for by the creation effect.
func (a *App) CreateJob(ctx context.Context, r Request) (jobstate.Created, error) {
	return a.Eng.Create(ctx, jobstate.NewJob{
		Machine: Machine,
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

// Work is one pickup by a worker: claim the next due job and run it.
// jobstate.ErrNoJob when nothing is due.
func (a *App) Work(ctx context.Context, worker string) (jobstate.Job, error) {
	c, err := a.Eng.Claim(ctx, jobstate.ClaimRequest{Machine: Machine, Worker: worker})
	if err != nil {
		return jobstate.Job{}, err
	}
	return a.Run(ctx, c)
}

// Run executes a claimed job: seed 000's execution actions (startedAt and
// a heartbeat), the API call, and the report of its outcome.
func (a *App) Run(ctx context.Context, c jobstate.Claimed) (jobstate.Job, error) {
	if _, err := a.Eng.Start(ctx, c.Lease); err != nil {
		return jobstate.Job{}, err
	}
	lease, err := a.Eng.Heartbeat(ctx, c.Lease)
	if err != nil {
		return jobstate.Job{}, err
	}
	r, err := decodeRequest(c.Job.Payload)
	if err != nil {
		return a.Eng.Fail(ctx, lease, jobstate.Permanent(fmt.Errorf("unreadable request: %w", err)))
	}
	img, apiErr := a.API.Generate(ctx, r)
	return a.Report(ctx, lease, img, apiErr)
}

// Report tells the engine how the API call of the lease's execution ended,
// as the event the seed names for it: a safety block is the reject event
// (E), any other error a failure (D; the engine retries it or
// dead-letters it), an image a success (C) whose actions run as the
// commit's effect, exactly once.
func (a *App) Report(ctx context.Context, lease jobstate.Lease, img Image, apiErr error) (jobstate.Job, error) {
	if errors.Is(apiErr, ErrSafetyBlock) {
		return a.Eng.Advance(ctx, lease, EventReject, jobstate.Call{Reason: apiErr.Error()})
	}
	if apiErr != nil {
		return a.Eng.Fail(ctx, lease, apiErr)
	}
	data, err := a.API.Download(ctx, img)
	if err != nil {
		return a.Eng.Fail(ctx, lease, err)
	}
	return a.Eng.Succeed(ctx, lease, jobstate.CommitInput{
		Result: []byte(ResultURL(lease.JobID)),
		Effect: a.DB.StoreAsset(img, data),
	})
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

// main runs the demonstration on standard output.
func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "imagegen:", err)
		os.Exit(1)
	}
}

// demo holds the demonstration's state: the service and short names for
// its jobs.
type demo struct {
	ctx   context.Context
	out   io.Writer
	app   *App
	names map[uuid.UUID]string
	order []uuid.UUID
}

// run creates the requests of the demonstration, works the queue until
// every job has ended, and prints the lifecycle of each.
func run(ctx context.Context, out io.Writer) error {
	start := time.Date(2026, 3, 2, 9, 0, 5, 0, time.UTC)
	users := map[string]int{"alice": 20, "bob": 20, "carol": 20, "dave": 3, "erin": 20}
	app, err := NewApp(start, users, jobstate.WithIDs(SeqIDs()))
	if err != nil {
		return err
	}
	d := &demo{ctx: ctx, out: out, app: app, names: make(map[uuid.UUID]string)}

	lighthouse := Request{UserID: "alice", Prompt: "a lighthouse at dusk, oil on canvas", Params: Params{Size: "1024x1024", Style: "painting"}}
	skyline := Request{UserID: "bob", Prompt: "a city skyline in the rain", Params: Params{Size: "1024x1792"}}
	battle := Request{UserID: "carol", Prompt: "a gory battle scene", Params: Params{Size: "512x512"}}
	// bob's four attempts fail; the fifth call, after the operator's
	// review, gets its image.
	app.API.Script(skyline.Prompt, ErrAPI500, ErrAPITimeout, ErrAPI500, ErrAPI500, nil)
	app.API.Script(battle.Prompt, ErrSafetyBlock)

	fmt.Fprintf(out, "Image generation (seed 000) on the in-memory store. Clock starts %s; one image costs %d credits.\n", start.Format("2006-01-02 15:04:05 MST"), CreditsPerImage)
	fmt.Fprintf(out, "Credits: %s\n\nRequests\n", d.balances(users))

	if err := d.create("alice asks for an image", lighthouse); err != nil {
		return err
	}
	app.Clock.Advance(10 * time.Second)
	if err := d.create("alice's UI resends the same request (network retry)", lighthouse); err != nil {
		return err
	}
	for _, r := range []struct {
		what string
		req  Request
	}{
		{"bob asks for an image", skyline},
		{"carol asks for an image", battle},
		{"dave, with 3 credits, asks for an image", Request{UserID: "dave", Prompt: "a red bicycle", Params: Params{Size: "512x512"}}},
		{"erin sends a blank prompt", Request{UserID: "erin", Prompt: "   ", Params: Params{Size: "512x512"}}},
		{"erin asks for an unsupported size", Request{UserID: "erin", Prompt: "a red bicycle", Params: Params{Size: "640x480"}}},
	} {
		if err := d.create(r.what, r.req); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "\nWorker (each API call takes %s; the sweep runs before each pickup; an idle worker waits a second)\n", app.API.latency)
	if err := d.work(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nOperator (manual review of the dead letter: the API outage is over)")
	app.Clock.Advance(time.Minute)
	job1, job2 := d.order[0], d.order[1]
	for _, r := range []struct {
		what string
		id   uuid.UUID
	}{
		{"ops picks the wrong job", job1},
		{"ops redrives the dead letter", job2},
		{"ops clicks again", job2},
	} {
		if err := d.redrive(r.what, r.id, "ops", "reviewed: API outage over"); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "\nWorker")
	if err := d.work(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nCredits: %s (nothing refunded, the redrive not charged)\n", d.balances(users))
	fmt.Fprintln(out, "Reservations:")
	for _, r := range app.DB.Reservations() {
		fmt.Fprintf(out, "  %s  %-5s -%d credits for %s\n", r.At.Format("15:04:05"), r.User, r.Credits, d.names[r.JobID])
	}
	fmt.Fprintln(out, "Redrives:")
	for _, r := range app.DB.Redrives() {
		fmt.Fprintf(out, "  %s  %s runs %s's %s again as %s, paid by %s's reservation\n", r.At.Format("15:04:05"), r.Operator, r.Owner, d.names[r.Of], d.names[r.Job], d.names[r.Of])
	}
	fmt.Fprintln(out, "Audit log:")
	for _, a := range app.DB.Audit() {
		fmt.Fprintf(out, "  %s  %s %s of %s, rejected by %s: %s\n", a.At.Format("15:04:05"), a.Action, a.User, d.names[a.JobID], a.Actor, a.Reason)
	}
	fmt.Fprintln(out, "Asset library:")
	for _, a := range app.DB.Assets() {
		obj, _ := app.DB.Object(a.Path)
		fmt.Fprintf(out, "  %s  %s: %s (%d bytes), resultUrl %s\n", a.At.Format("15:04:05"), a.Owner, a.Path, len(obj), a.URL)
	}

	fmt.Fprintln(out, "\nHistories")
	for _, id := range d.order {
		if err := d.history(id); err != nil {
			return err
		}
	}
	return nil
}

// create sends a createJob request and prints what came of it.
func (d *demo) create(what string, r Request) error {
	before := d.app.DB.Balance(r.UserID)
	c, err := d.app.CreateJob(d.ctx, r)
	at := d.app.Clock.Now().Format("15:04:05")
	fmt.Fprintf(d.out, "  %s  %s: %q %s\n", at, what, r.Prompt, r.Params.Size)
	switch {
	case errors.Is(err, jobstate.ErrGuardRefused):
		fmt.Fprintf(d.out, "            refused, nothing created (%s): %s; credits %d\n", jobstate.Code(err), guardCause(err), d.app.DB.Balance(r.UserID))
		return nil
	case err != nil:
		return err
	case c.Existing:
		fmt.Fprintf(d.out, "            same key within the minute: the existing %s (%s) is returned; credits still %d\n", d.names[c.Job.ID], c.Job.State, d.app.DB.Balance(r.UserID))
		return nil
	}
	name := fmt.Sprintf("job %d", len(d.order)+1)
	d.names[c.Job.ID] = name
	d.order = append(d.order, c.Job.ID)
	fmt.Fprintf(d.out, "            %s created in %s; credits %d -> %d\n", name, c.Job.State, before, d.app.DB.Balance(r.UserID))
	return nil
}

// redrive has operator run a job again and prints what came of it.
func (d *demo) redrive(what string, id uuid.UUID, operator, reason string) error {
	old, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	before := d.app.DB.Balance(old.Owner)
	n, err := d.app.Redrive(d.ctx, id, operator, reason)
	fmt.Fprintf(d.out, "  %s  %s: %s (%s's, %s), reason %q\n", d.app.Clock.Now().Format("15:04:05"), what, d.names[id], old.Owner, old.State, reason)
	switch {
	case errors.Is(err, jobstate.ErrInvalidTransition):
		fmt.Fprintf(d.out, "            refused, nothing changed (%s): only dead_letter is redriven\n", jobstate.Code(err))
		return nil
	case errors.Is(err, jobstate.ErrEffectApplied):
		fmt.Fprintf(d.out, "            refused, nothing changed (%s): a dead letter is redriven once\n", jobstate.Code(err))
		return nil
	case err != nil:
		return err
	}
	after, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("job %d", len(d.order)+1)
	d.names[n.ID] = name
	d.order = append(d.order, n.ID)
	fmt.Fprintf(d.out, "            %s created in %s; %s stays %s; %s's credits %d -> %d (%s's reservation covers it)\n",
		name, n.State, d.names[id], after.State, n.Owner, before, d.app.DB.Balance(n.Owner), d.names[id])
	return nil
}

// guardCause returns the guard's own error from a refusal.
func guardCause(err error) string {
	var te *jobstate.TransitionError
	if errors.As(err, &te) && te.Cause != nil {
		return te.Cause.Error()
	}
	return err.Error()
}

// work runs one worker until every job has ended, printing each pickup.
func (d *demo) work() error {
	for {
		done, err := d.allEnded()
		if err != nil || done {
			return err
		}
		if _, err := d.app.Eng.Sweep(d.ctx); err != nil {
			return err
		}
		job, err := d.app.Work(d.ctx, "worker-1")
		if errors.Is(err, jobstate.ErrNoJob) {
			if err := d.app.Tick(d.ctx, time.Second); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		at := job.UpdatedAt.Format("15:04:05")
		fmt.Fprintf(d.out, "  %s  %s attempt %d: ", at, d.names[job.ID], job.Attempt)
		switch job.Kind {
		case jobstate.KindWaiting:
			fmt.Fprintf(d.out, "%s -> %s (retryCount %d); retry due at %s (backoff %s)\n", job.LastError, job.State, job.RetryCount, job.NotBefore.Format("15:04:05"), job.NotBefore.Sub(job.UpdatedAt))
		case jobstate.KindTerminal:
			h, err := d.app.Eng.History(d.ctx, job.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(d.out, "-> %s (", job.State)
			switch last := h[len(h)-1]; {
			case len(job.Result) > 0:
				fmt.Fprintf(d.out, "resultUrl %s", job.Result)
			case job.LastError != "":
				fmt.Fprintf(d.out, "%s; retryCount %d of %d", last.Reason, job.RetryCount, job.MaxRetries)
			default:
				fmt.Fprintf(d.out, "%s", last.Reason)
			}
			fmt.Fprintln(d.out, ")")
		default:
			fmt.Fprintf(d.out, "-> %s\n", job.State)
		}
	}
}

// allEnded reports whether every job of the demonstration is terminal.
func (d *demo) allEnded() (bool, error) {
	for _, id := range d.order {
		j, err := d.app.Eng.Get(d.ctx, id)
		if err != nil {
			return false, err
		}
		if !j.Terminal() {
			return false, nil
		}
	}
	return true, nil
}

// history prints a job's transition records.
func (d *demo) history(id uuid.UUID) error {
	job, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	h, err := d.app.Eng.History(d.ctx, id)
	if err != nil {
		return err
	}
	if _, err := d.app.Def.Replay(h); err != nil {
		return fmt.Errorf("%s: history does not replay: %w", d.names[id], err)
	}
	fmt.Fprintf(d.out, "  %s (%s): %s, outcome %s, attempts %d, retryCount %d\n", d.names[id], job.Owner, job.State, job.Outcome, job.Attempt, job.RetryCount)
	for _, t := range h {
		from := string(t.From)
		if from == "" {
			from = "null"
		}
		line := fmt.Sprintf("    v%-2d %s  %-8s --%-7s--> %-11s %-8s %s", t.Version, t.At.Format("15:04:05"), from, t.Event, t.To, t.Actor, t.Reason)
		fmt.Fprintln(d.out, strings.TrimRight(line, " "))
	}
	effects, err := d.app.Store.Effects(d.ctx, id)
	if err != nil {
		return err
	}
	for _, ef := range effects {
		what := ""
		for _, r := range d.app.DB.Redrives() {
			if ef.Name == jobstate.RedriveEffect && r.Of == id {
				what = ": run again as " + d.names[r.Job]
			}
		}
		fmt.Fprintf(d.out, "        %s  effect %q by %s%s (no transition record; the job stays %s, v%d)\n", ef.At.Format("15:04:05"), ef.Name, ef.Actor, what, job.State, job.Version)
	}
	return nil
}

// balances lists the users' credits, by name.
func (d *demo) balances(users map[string]int) string {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, u := range names {
		parts[i] = fmt.Sprintf("%s %d", u, d.app.DB.Balance(u))
	}
	return strings.Join(parts, ", ")
}
