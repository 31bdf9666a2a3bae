package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

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
// Quota.check(). (The lifecycle's third guard, Idempotency.check, is the
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
// deduction the lifecycle's idempotency key exists to prevent, and the lifecycle
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
// being written (jobstate.FiringOf). It refunds nothing (the lifecycle's policy
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
