package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// Payout is a job's payload: credit Amount cents to Account. Crediting is
// the job's side effect, which must happen exactly once.
type Payout struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// Receipt is what the prepare phase computes and the commit phase stores as
// the job's result.
type Receipt struct {
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
	Reference string `json:"reference"`
}

// ErrInvalidPayout is a prepare-phase refusal that retrying cannot fix.
var ErrInvalidPayout = errors.New("invalid payout")

// Prepare is the prepare phase of the crash consistency rule (INV_002): it
// validates the preconditions and computes the result, touching nothing
// outside, so it is safe to repeat any number of times.
func Prepare(job jobstate.Job) (Receipt, error) {
	var p Payout
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return Receipt{}, jobstate.Permanent(fmt.Errorf("%w: %v", ErrInvalidPayout, err))
	}
	if p.Account == "" || p.Amount <= 0 {
		return Receipt{}, jobstate.Permanent(fmt.Errorf("%w: %d cents to %q", ErrInvalidPayout, p.Amount, p.Account))
	}
	return Receipt{Account: p.Account, Amount: p.Amount, Reference: "payout-" + ShortID(job.ID)}, nil
}

// Entry is one credit written to the ledger, with the execution that wrote
// it.
type Entry struct {
	JobID  uuid.UUID
	ExecID uuid.UUID
	Worker string
	Receipt
	At time.Time
}

// Ledger is the example's own store of account balances: the system the
// jobs' side effect lands in. It deliberately does not deduplicate: exactly
// once is the commit boundary's guarantee, and the ledger's counts show it.
type Ledger struct {
	mu      sync.Mutex
	entries []Entry
}

// Credit records one credit.
func (l *Ledger) Credit(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

// Applied returns how many times a credit was written for the job.
func (l *Ledger) Applied(job uuid.UUID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.JobID == job {
			n++
		}
	}
	return n
}

// Entries returns a copy of every credit, in the order written.
func (l *Ledger) Entries() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Entry(nil), l.entries...)
}

// Balance returns the sum credited to account.
func (l *Ledger) Balance(account string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	for _, e := range l.entries {
		if e.Account == account {
			sum += e.Amount
		}
	}
	return sum
}

// World is one running system: the machine, an engine over a store (the
// in-memory store unless built with NewWorldOn) driven by a manual clock,
// which also drives the worker runtime's timers, and the ledger.
type World struct {
	Def    *jobstate.Definition
	Engine *jobstate.Engine
	Clock  *jobstatetest.Clock
	Ledger *Ledger
}

// Start is the manual clock's first reading.
var Start = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

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
	clock := jobstatetest.NewClock(Start)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock), jobstate.WithIDs(SequentialIDs()))
	if err != nil {
		return nil, fmt.Errorf("exactlyonce: engine: %w", err)
	}
	return &World{Def: def, Engine: eng, Clock: clock, Ledger: &Ledger{}}, nil
}

// Submit creates a payout job, in PENDING.
func (w *World) Submit(ctx context.Context, p Payout) (jobstate.Job, error) {
	payload, err := json.Marshal(p)
	if err != nil {
		return jobstate.Job{}, err
	}
	c, err := w.Engine.Create(ctx, jobstate.NewJob{Machine: MachineName, Payload: payload, Actor: "api"})
	return c.Job, err
}

// Worker returns a worker of this world with the given name.
func (w *World) Worker(name string) *Worker { return &Worker{Name: name, world: w} }

// Worker is one process running payout jobs. It decides no lifecycle rule:
// it asks the engine for a lease, marks its execution started, prepares,
// commits its effect through the engine and finishes; the engine says
// whether each step is allowed. Run does all that through the worker
// runtime (Handler is its handler); the other methods are the single
// steps, which the scenarios and tests that stage a crash or a duplicate
// delivery call one at a time.
type Worker struct {
	Name  string
	world *World
}

// Lease claims the next due PENDING job: a new execution, LEASED.
func (wk *Worker) Lease(ctx context.Context) (jobstate.Claimed, error) {
	return wk.world.Engine.Claim(ctx, jobstate.ClaimRequest{Machine: MachineName, Worker: wk.Name})
}

// LeaseJob claims one named job, as a worker does when a message naming
// the job is delivered to it (at least once).
func (wk *Worker) LeaseJob(ctx context.Context, id uuid.UUID) (jobstate.Claimed, error) {
	return wk.world.Engine.ClaimJob(ctx, id, jobstate.ClaimRequest{Worker: wk.Name})
}

// Start moves the worker's execution from LEASED to IN_PROGRESS.
func (wk *Worker) Start(ctx context.Context, lease jobstate.Lease) error {
	_, err := wk.world.Engine.Start(ctx, lease)
	return err
}

// Commit is the commit phase: the engine marks the execution COMMITTED and
// runs the effect (the ledger credit) in the same atomic update, only if
// the lease is live, the execution was started, and no execution of the
// job has committed. A refusal applies nothing. The effect sees the job as
// the commit writes it, and dates the credit with it.
func (wk *Worker) Commit(ctx context.Context, lease jobstate.Lease, r Receipt) error {
	in, err := wk.commitInput(lease, r)
	if err != nil {
		return err
	}
	_, err = wk.world.Engine.Commit(ctx, lease, in)
	return err
}

// commitInput is the commit of receipt r by the lease's execution: the
// result, and the ledger credit as its effect.
func (wk *Worker) commitInput(lease jobstate.Lease, r Receipt) (jobstate.CommitInput, error) {
	result, err := json.Marshal(r)
	if err != nil {
		return jobstate.CommitInput{}, fmt.Errorf("exactlyonce: receipt: %w", err)
	}
	return jobstate.CommitInput{
		Result: result,
		Effect: func(_ context.Context, job jobstate.Job) error {
			wk.world.Ledger.Credit(Entry{JobID: job.ID, ExecID: lease.ExecID, Worker: wk.Name, Receipt: r, At: job.UpdatedAt})
			return nil
		},
	}, nil
}

// Finish moves the committed execution to DONE; the job follows to
// SUCCEEDED.
func (wk *Worker) Finish(ctx context.Context, lease jobstate.Lease) (jobstate.Job, error) {
	return wk.world.Engine.Finish(ctx, lease)
}

// Fail aborts the worker's execution with err before any commit; the
// engine retries or fails the job as the table and the retry policy say.
func (wk *Worker) Fail(ctx context.Context, lease jobstate.Lease, err error) (jobstate.Job, error) {
	return wk.world.Engine.Fail(ctx, lease, err)
}

// Handler is the worker's handler for the runtime, which leases the job
// and starts its execution before calling it: it prepares, and returns the
// commit (the runtime commits and finishes in one write, Engine.Succeed),
// or the prepare error, which the runtime reports through Engine.Fail.
func (wk *Worker) Handler() worker.Handler {
	return worker.HandlerFunc(func(_ context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		r, err := Prepare(t.Job())
		if err != nil {
			return jobstate.CommitInput{}, err
		}
		return wk.commitInput(t.Lease(), r)
	})
}

// Runtime returns the worker runtime running Handler under the worker's
// name, one job at a time, on the world's clock.
func (wk *Worker) Runtime() (*worker.Worker, error) { return wk.runtime(wk.Handler()) }

// runtime returns the worker runtime running h.
func (wk *Worker) runtime(h worker.Handler) (*worker.Worker, error) {
	rt, err := worker.New(wk.world.Engine,
		worker.WithName(wk.Name),
		worker.WithClock(wk.world.Clock),
		worker.WithCommitsAhead(0),
		worker.Handle(MachineName, h, 1),
	)
	if err != nil {
		return nil, fmt.Errorf("exactlyonce: worker: %w", err)
	}
	return rt, nil
}

// Run does one whole execution through the worker runtime (Drain with a
// limit of one job, which sweeps first when no job is due): lease, start,
// prepare, then commit and finish in one write, or Fail with a prepare
// error. It returns the job as the execution left it, or jobstate.ErrNoJob
// when no job was due. A commit the engine refuses (another execution
// committed meanwhile) applies nothing; the job is then returned as that
// execution left it.
func (wk *Worker) Run(ctx context.Context) (jobstate.Job, error) {
	ran := make(chan uuid.UUID, 1)
	h := wk.Handler()
	rt, err := wk.runtime(worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		ran <- t.Job().ID
		return h.Work(ctx, t)
	}))
	if err != nil {
		return jobstate.Job{}, err
	}
	n, err := rt.Drain(ctx, 1)
	if err != nil && !errors.Is(err, worker.ErrDrainLimit) {
		return jobstate.Job{}, fmt.Errorf("exactlyonce: drain: %w", err)
	}
	if n == 0 {
		return jobstate.Job{}, jobstate.ErrNoJob
	}
	return wk.world.Engine.Get(ctx, <-ran)
}

// Snapshot is everything stored about one job.
type Snapshot struct {
	Job        jobstate.Job
	Executions []jobstate.Execution
	History    []jobstate.Transition
}

// Snapshot loads the job, its executions and its history, and checks that
// the job's state is the projection of its executions.
func (w *World) Snapshot(ctx context.Context, id uuid.UUID) (Snapshot, error) {
	var s Snapshot
	var err error
	if s.Job, err = w.Engine.Store().Get(ctx, id); err != nil {
		return s, err
	}
	if s.Executions, err = w.Engine.Executions(ctx, id); err != nil {
		return s, err
	}
	if s.History, err = w.Engine.History(ctx, id); err != nil {
		return s, err
	}
	return s, jobstate.CheckProjection(s.Job, s.Executions)
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
