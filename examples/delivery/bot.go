package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// Request is a job's payload: user UserID asked for file FileID by the
// click that carried Nonce.
type Request struct {
	UserID string `json:"user_id"`
	FileID string `json:"file_id"`
	Nonce  string `json:"nonce"`
}

// Users is the bot's user table.
type Users struct {
	mu     sync.Mutex
	status map[string]UserStatus
}

// Set records a user's status.
func (u *Users) Set(user string, s UserStatus) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.status == nil {
		u.status = make(map[string]UserStatus)
	}
	u.status[user] = s
}

// Status returns a user's status ("" for an unknown user).
func (u *Users) Status(user string) UserStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status[user]
}

// File is a file on the fake Yandex Disk.
type File struct {
	Name string
	Size int64
	// Transfer is how long downloading it (and streaming it) takes.
	Transfer time.Duration
}

// Script hands out scripted failures, one per call, per file: the n-th
// call for a file fails with the n-th error of its list (nil for success);
// calls past the end of the list succeed.
type Script struct {
	mu     sync.Mutex
	faults map[string][]error
	calls  map[string]int
}

// Fail scripts the failures of the next calls for file.
func (s *Script) Fail(file string, errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults == nil {
		s.faults = make(map[string][]error)
	}
	s.faults[file] = append(s.faults[file], errs...)
}

// next returns the outcome of the next call for file.
func (s *Script) next(file string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = make(map[string]int)
	}
	n := s.calls[file]
	s.calls[file]++
	if n < len(s.faults[file]) {
		return s.faults[file][n]
	}
	return nil
}

// Disk is a fake Yandex Disk: its files, and scripted download failures.
type Disk struct {
	Script
	mu    sync.Mutex
	files map[string]File
}

// Put adds a file.
func (d *Disk) Put(id string, f File) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files == nil {
		d.files = make(map[string]File)
	}
	d.files[id] = f
}

// Stat returns a file's metadata, or a 404.
func (d *Disk) Stat(id string) (File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[id]
	if !ok {
		return File{}, &HTTPError{Service: "yandex disk", Status: http.StatusNotFound}
	}
	return f, nil
}

// Download ends a download of the file: nil, or its scripted failure.
func (d *Disk) Download(id string) error { return d.next(id) }

// Telegram is a fake local Telegram Bot API server: scripted upload
// failures and the messages it accepted.
type Telegram struct {
	Script
	sent atomic.Int64
}

// Upload ends the upload of the file to the user's chat and returns the
// message id Telegram acknowledged it with.
func (t *Telegram) Upload(id string) (int64, error) {
	if err := t.next(id); err != nil {
		return 0, err
	}
	return t.sent.Add(1), nil
}

// Delivery is the bot's record of a delivered file.
type Delivery struct {
	JobID   uuid.UUID
	UserID  string
	FileID  string
	Message int64
	At      time.Time
}

// Deliveries is the bot's table of delivered files: written by the
// telegram_ack commit, exactly once per job.
type Deliveries struct {
	mu   sync.Mutex
	rows []Delivery
}

// add records a delivery.
func (d *Deliveries) add(r Delivery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rows = append(d.rows, r)
}

// Count returns how many deliveries were recorded for the job.
func (d *Deliveries) Count(job uuid.UUID) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, r := range d.rows {
		if r.JobID == job {
			n++
		}
	}
	return n
}

// World is the bot with everything around it: the machine, an engine over
// a store (the in-memory store unless built with NewWorldOn) on a manual
// clock, the user table, the fake Yandex Disk and Telegram, and the
// deliveries table.
type World struct {
	Def        *jobstate.Definition
	Engine     *jobstate.Engine
	Clock      *jobstate.ManualClock
	Users      *Users
	Disk       *Disk
	Telegram   *Telegram
	Deliveries *Deliveries
	// Timers is the clock of the worker runtime's own timers. Nothing
	// advances it: the handler heartbeats itself every HeartbeatEvery of
	// transfer time, on Clock, as the lifecycle asks, so the runtime's
	// heartbeats never fire and every run writes the same records.
	Timers *jobstatetest.Clock
}

// Start is the manual clock's first reading.
var Start = time.Date(2026, 2, 3, 9, 0, 0, 0, time.UTC)

// NewWorld builds a World on the in-memory store. Ids are sequential (see
// SequentialIDs) so that the printed output is the same on every run.
func NewWorld() (*World, error) {
	return NewWorldOn(memstore.New())
}

// NewWorldOn builds a World on store, which must be empty.
func NewWorldOn(store jobstate.Store) (*World, error) {
	def, err := Machine()
	if err != nil {
		return nil, err
	}
	clock := jobstate.NewManualClock(Start)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock),
		jobstate.WithIDs(SequentialIDs()))
	if err != nil {
		return nil, fmt.Errorf("delivery: engine: %w", err)
	}
	return &World{Def: def, Engine: eng, Clock: clock, Users: &Users{}, Disk: &Disk{}, Telegram: &Telegram{},
		Deliveries: &Deliveries{}, Timers: jobstatetest.NewClock(Start)}, nil
}

// Download is the bot's handler of the "Download" button's callback. The
// idempotency key is the lifecycle's sha256(user_id + ":" + file_id + ":" +
// request_nonce) (IdempotencyKey): a callback repeated with the same nonce
// returns the existing job (Created.Existing) and enqueues nothing.
func (w *World) Download(ctx context.Context, user, file, nonce string) (jobstate.Created, error) {
	payload, err := json.Marshal(Request{UserID: user, FileID: file, Nonce: nonce})
	if err != nil {
		return jobstate.Created{}, err
	}
	return w.Engine.Create(ctx, jobstate.NewJob{
		Machine: MachineName,
		Payload: payload,
		Owner:   user,
		Key:     IdempotencyKey(user, file, nonce),
		TTL:     QueueTTL,
		Actor:   user,
	})
}

// Cancel is the bot's handler of the user's "Cancel" button.
func (w *World) Cancel(ctx context.Context, user string, job uuid.UUID) (jobstate.Job, error) {
	return w.Engine.Cancel(ctx, job, jobstate.Call{Actor: user, Reason: "user_cancel"})
}

// Stuck is the /status view: jobs held by a worker whose heartbeat_at is
// older than T, oldest first.
func (w *World) Stuck(ctx context.Context) ([]jobstate.Job, error) {
	return w.Engine.Stuck(ctx, MachineName, HeartbeatTimeout, 0)
}

// Worker returns a worker of this world. Its transfers take time on the
// manual clock.
func (w *World) Worker(name string) *Worker {
	return &Worker{Name: name, World: w, Sleep: func(d time.Duration) { w.Clock.Advance(d) }}
}

// Worker is one delivery worker. It decides no lifecycle rule: it fires
// the lifecycle's events through its lease, heartbeats while it
// transfers, and hands every error to the engine, whose table, guard and
// classifier decide what follows. It runs through the worker runtime
// (Runtime, which claims and reports the outcome), or by hand on a job
// claimed by the caller (Process).
type Worker struct {
	Name string
	*World
	// Sleep lets time pass during a transfer.
	Sleep func(time.Duration)
}

// Recover is the recovery at worker start: one sweep before the loop.
// Jobs in CLAIMED, DOWNLOADING or STREAMING whose heartbeat is older than
// T (their lease lapsed) go back to QUEUED with attempt+1, or to FAILED
// when their attempts are spent; due and expired jobs are handled too.
func (wk *Worker) Recover(ctx context.Context) (jobstate.SweepReport, error) {
	return wk.Engine.Sweep(ctx)
}

// Runtime returns the worker runtime running this worker's handler, one
// job at a time, each job's commit ending before the next claim (so that
// the output is the same on every run). A QUEUED job past its TTL is not
// due: the claims pass it over, and leave it to the sweep to expire.
func (wk *Worker) Runtime() (*worker.Worker, error) {
	rt, err := worker.New(wk.Engine,
		worker.WithName(wk.Name),
		worker.WithClock(wk.Timers),
		worker.WithCommitsAhead(0),
		worker.Handle(MachineName, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
			return wk.deliver(ctx, t)
		}), 1),
	)
	if err != nil {
		return nil, fmt.Errorf("delivery: worker: %w", err)
	}
	return rt, nil
}

// hold is a worker's hold on a claimed job: a *worker.Task, or a lease
// held by hand (leaseHold).
type hold interface {
	Job() jobstate.Job
	Advance(ctx context.Context, ev jobstate.Event, c jobstate.Call) (jobstate.Job, error)
	Heartbeat(ctx context.Context) error
}

// leaseHold is a hold on a job claimed by hand.
type leaseHold struct {
	eng   *jobstate.Engine
	job   jobstate.Job
	lease jobstate.Lease
}

func (h *leaseHold) Job() jobstate.Job { return h.job }

func (h *leaseHold) Advance(ctx context.Context, ev jobstate.Event, c jobstate.Call) (jobstate.Job, error) {
	j, err := h.eng.Advance(ctx, h.lease, ev, c)
	if err == nil {
		h.job = j
	}
	return j, err
}

func (h *leaseHold) Heartbeat(ctx context.Context) error {
	l, err := h.eng.Heartbeat(ctx, h.lease)
	if err == nil {
		h.lease = l
	}
	return err
}

// Process runs one job claimed by hand (the scripted steps of tests and
// of the crash demonstration) and reports its outcome: Succeed, or Fail
// with the error. It returns the job as it left it.
func (wk *Worker) Process(ctx context.Context, c jobstate.Claimed) (jobstate.Job, error) {
	h := &leaseHold{eng: wk.Engine, job: c.Job, lease: c.Lease}
	res, err := wk.deliver(ctx, h)
	if err != nil {
		return wk.fail(ctx, h.lease, err)
	}
	return wk.Engine.Succeed(ctx, h.lease, res)
}

// deliver runs one claimed job: CLAIMED → DOWNLOADING → STREAMING under
// the one lease, heartbeating every N seconds while it transfers, and
// returns the commit that moves it to DELIVERED, or the error to report.
func (wk *Worker) deliver(ctx context.Context, h hold) (jobstate.CommitInput, error) {
	var req Request
	if err := json.Unmarshal(h.Job().Payload, &req); err != nil {
		return jobstate.CommitInput{}, jobstate.Permanent(err)
	}
	args := DownloadArgs{User: wk.Users.Status(req.UserID)}
	if _, err := h.Advance(ctx, StartDownload, jobstate.Call{Args: args}); err != nil {
		// A refusal by the guard (attempt 3, a user who is not ACTIVE) is
		// reported as the guard's own error, which the classifier calls
		// non-retryable: CLAIMED → FAILED.
		var te *jobstate.TransitionError
		if errors.As(err, &te) && errors.Is(err, jobstate.ErrGuardRefused) && te.Cause != nil {
			err = te.Cause
		}
		return jobstate.CommitInput{}, err
	}
	f, err := wk.Disk.Stat(req.FileID)
	if err == nil && f.Size > MaxFileSize {
		err = &TooBigError{Name: f.Name, Size: f.Size}
	}
	if err == nil {
		err = wk.transfer(ctx, h, f.Transfer, func() error { return wk.Disk.Download(req.FileID) })
	}
	if err != nil {
		return jobstate.CommitInput{}, err
	}
	if _, err := h.Advance(ctx, StreamToLocalAPI, jobstate.Call{}); err != nil {
		return jobstate.CommitInput{}, err
	}
	var msg int64
	err = wk.transfer(ctx, h, f.Transfer, func() (err error) { msg, err = wk.Telegram.Upload(req.FileID); return err })
	if err != nil {
		return jobstate.CommitInput{}, err
	}
	// telegram_ack: the delivery is recorded exactly once, atomically with
	// STREAMING → DELIVERED, dated by that write (the effect sees the job
	// as the commit writes it).
	return jobstate.CommitInput{
		Result: []byte(fmt.Sprintf(`{"message_id":%d}`, msg)),
		Effect: func(_ context.Context, j jobstate.Job) error {
			wk.Deliveries.add(Delivery{JobID: j.ID, UserID: req.UserID, FileID: req.FileID, Message: msg, At: j.UpdatedAt})
			return nil
		},
	}, nil
}

// transfer spends d on a transfer, renewing the lease every
// HeartbeatEvery, then ends it with done.
func (wk *Worker) transfer(ctx context.Context, h hold, d time.Duration, done func() error) error {
	for d > 0 {
		step := min(d, HeartbeatEvery)
		wk.Sleep(step)
		d -= step
		if err := h.Heartbeat(ctx); err != nil {
			return err
		}
	}
	return done()
}

// fail reports err to the engine, which classifies it and retries or fails
// the job. If the lease is already lost there is nothing to report: the
// engine's refusal is returned with err.
func (wk *Worker) fail(ctx context.Context, lease jobstate.Lease, err error) (jobstate.Job, error) {
	j, ferr := wk.Engine.Fail(ctx, lease, err)
	if ferr != nil {
		return jobstate.Job{}, errors.Join(err, ferr)
	}
	return j, nil
}

// SequentialIDs returns an id source giving UUIDs numbered 1, 2, 3, ... in
// their last six bytes (with the version 7 and variant bits set), so that
// runs are reproducible and ids print short (see ShortID).
func SequentialIDs() func() (uuid.UUID, error) {
	var n atomic.Uint64
	return func() (uuid.UUID, error) {
		var id uuid.UUID
		id[6] = 0x70
		id[8] = 0x80
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], n.Add(1))
		copy(id[10:], b[2:])
		return id, nil
	}
}

// ShortID prints an id from SequentialIDs as "#n".
func ShortID(id uuid.UUID) string {
	var b [8]byte
	copy(b[2:], id[10:])
	return fmt.Sprintf("#%d", binary.BigEndian.Uint64(b[:]))
}
