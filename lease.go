package jobstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Lease errors.
var (
	// ErrLeaseLost: the lease is expired, was taken over, or its execution
	// ended (aborted by a sweep, a cancel, a rival's win). The operation
	// changed nothing. The error is a *LeaseError.
	ErrLeaseLost = errors.New("jobstate: lease lost")
	// ErrCancelled accompanies ErrLeaseLost when the job was cancelled while
	// the lease was held.
	ErrCancelled = errors.New("jobstate: job cancelled")
	// ErrNotClaimable: the job cannot be claimed now: it is not in a ready
	// state, its not-before has not passed, or it already has as many live
	// executions as its machine allows.
	ErrNotClaimable = errors.New("jobstate: job not claimable")
)

// LeaseError says why an operation through a lease was refused.
type LeaseError struct {
	JobID  uuid.UUID
	ExecID uuid.UUID
	Reason string
	// Cancelled is set when the job was cancelled under the lease.
	Cancelled bool
}

// Error names the execution and the reason.
func (e *LeaseError) Error() string {
	return fmt.Sprintf("jobstate: job %s execution %s: lease lost: %s", e.JobID, e.ExecID, e.Reason)
}

// Unwrap returns ErrLeaseLost, and ErrCancelled when the job was cancelled.
func (e *LeaseError) Unwrap() []error {
	if e.Cancelled {
		return []error{ErrLeaseLost, ErrCancelled}
	}
	return []error{ErrLeaseLost}
}

// Lease is a worker's hold on one execution of a job. Every operation made
// through it checks, inside the job's atomic update, that the execution is
// still live, that the fencing token matches and that the lease has not
// expired.
type Lease struct {
	JobID  uuid.UUID
	ExecID uuid.UUID
	// Token is the fencing token: the execution's attempt number, strictly
	// increasing per job. Pass it to external systems to fence out stale
	// holders.
	Token int
	Owner string
	// ExpiresAt is when the lease lapses unless renewed by Heartbeat.
	ExpiresAt time.Time
	// TTL is the renewal length Heartbeat uses.
	TTL time.Duration
}

// ClaimRequest asks for a job to run.
type ClaimRequest struct {
	// Machine to claim from (Claim only; ClaimJob reads it from the job).
	Machine string
	// Worker names the claimant; it is the actor of the claim, for guards.
	Worker string
	// TTL is the lease length; zero means the machine's Policy.LeaseTTL.
	TTL time.Duration
	// Args are passed to claim guards (the worker's capabilities, say).
	Args any
}

// Claimed is a granted claim: the lease and the job as written.
type Claimed struct {
	Lease Lease
	Job   Job
}

// Claim atomically takes the next due ready job of req.Machine, in claim
// order (priority, higher first; then due time, earlier first: a job is
// due from the later of its not-before and its creation; then age), moves
// it by its claim rule and starts an execution with a lease. Jobs whose
// claim guard refuses this worker, jobs past a deadline their state can
// expire at (left for the sweep), and jobs whose claim rule's effect fails
// are passed over, and the next one is claimed. ErrNoJob when nothing can
// be claimed now; when some job was passed over because its effect
// failed, the error wraps the first such failure too. Other errors:
// ErrUnknownMachine, ErrInvalidArgument (empty worker, TTL negative or
// above MaxDuration).
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) (Claimed, error) {
	if err := e.ready(); err != nil {
		return Claimed{}, err
	}
	def, err := e.machine(req.Machine)
	if err != nil {
		return Claimed{}, err
	}
	ttl, err := leaseTTL(def, req)
	if err != nil {
		return Claimed{}, err
	}
	now, err := e.now()
	if err != nil {
		return Claimed{}, err
	}
	c := &claiming{e: e, def: def, req: req, ttl: ttl, now: now}
	job, err := e.store.ClaimNext(ctx, ClaimQuery{Machine: def.name, Now: now, MaxPerKey: def.policy.MaxPerKey}, c.decide)
	if err != nil {
		if errors.Is(err, ErrNoJob) && c.failed != nil {
			return Claimed{}, fmt.Errorf("%w; a claim's effect failed: %w", err, c.failed)
		}
		return Claimed{}, err
	}
	e.notify(ctx, job, c.last.recs)
	return Claimed{Lease: c.last.lease, Job: job}, nil
}

// claiming is one claim request deciding on each job a store offers it:
// what it decides with, what it took (the last job's lease and records,
// and, when taken is not nil, every job's), and the first claim effect
// that failed.
type claiming struct {
	e      *Engine
	def    *Definition
	req    ClaimRequest
	ttl    time.Duration
	now    time.Time
	last   taken
	taken  map[uuid.UUID]taken
	failed error
}

// taken is what a claim of one job leaves for after the write.
type taken struct {
	lease Lease
	recs  []Transition
}

// decide is the request's UpdateFunc: a job it cannot claim, or whose
// claim effect fails, is passed over (ErrSkip).
func (c *claiming) decide(ctx context.Context, cur Snapshot) (Write, error) {
	var p plan
	w, l, err := c.e.claim(ctx, c.def, &cur, c.req, c.ttl, c.now, &p)
	if err != nil {
		return Write{}, errors.Join(ErrSkip, err)
	}
	done, err := p.run(ctx, w, c.req.Args)
	if err != nil {
		if c.failed == nil {
			c.failed = fmt.Errorf("job %s: %w", cur.Job.ID, err)
		}
		return Write{}, errors.Join(ErrSkip, err)
	}
	c.last = taken{lease: l, recs: done.w.Transitions}
	if c.taken != nil {
		c.taken[cur.Job.ID] = c.last
	}
	return done.w, nil
}

// ClaimJob claims one named job (a worker taking the job a user chose). Errors: ErrNotFound; ErrNotClaimable when the job is not ready
// (wrapping ErrTerminal or ErrInvalidTransition too when the job is
// terminal or its state has no claim rule), not yet due, past a deadline
// it can expire at, or at its limit of live executions, or its
// concurrency key at its machine's Policy.MaxPerKey (wrapping ErrKeyLimit
// too); a
// *TransitionError when the claim rule's guard refuses;
// ErrInvalidArgument.
func (e *Engine) ClaimJob(ctx context.Context, id uuid.UUID, req ClaimRequest) (Claimed, error) {
	var lease Lease
	job, err := e.update(ctx, id, req.Args, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		ttl, err := leaseTTL(def, req)
		if err != nil {
			return Write{}, err
		}
		w, l, err := e.claim(ctx, def, &cur, req, ttl, now, p)
		lease = l
		return w, err
	})
	if errors.Is(err, ErrKeyLimit) {
		return Claimed{}, fmt.Errorf("%w: %w", ErrNotClaimable, err)
	}
	if err != nil {
		return Claimed{}, err
	}
	return Claimed{Lease: lease, Job: job}, nil
}

func leaseTTL(def *Definition, req ClaimRequest) (time.Duration, error) {
	if req.Worker == "" {
		return 0, fmt.Errorf("%w: empty worker name", ErrInvalidArgument)
	}
	if err := checkText("worker name", req.Worker, MaxKeyBytes); err != nil {
		return 0, err
	}
	if err := checkDuration("lease TTL", req.TTL); err != nil {
		return 0, err
	}
	if req.TTL == 0 {
		return def.policy.LeaseTTL, nil
	}
	return req.TTL, nil
}

// claim decides one claim of cur.
func (e *Engine) claim(ctx context.Context, def *Definition, cur *Snapshot, req ClaimRequest, ttl time.Duration, now time.Time, p *plan) (Write, Lease, error) {
	job := &cur.Job
	switch {
	case job.Kind == KindTerminal:
		return Write{}, Lease{}, fmt.Errorf("%w: %w", ErrNotClaimable, def.refuse(job, EventClaim, ErrTerminal, nil))
	case !def.Can(job.State, EventClaim):
		return Write{}, Lease{}, fmt.Errorf("%w: %w", ErrNotClaimable, def.refuse(job, EventClaim, ErrInvalidTransition, nil))
	case job.Kind != KindReady:
		return Write{}, Lease{}, fmt.Errorf("%w: job %s is in %s state %q", ErrNotClaimable, job.ID, job.Kind, job.State)
	case def.overdue(job, now):
		return Write{}, Lease{}, fmt.Errorf("%w: job %s passed its deadline %s", ErrNotClaimable, job.ID, job.Deadline.Format(time.RFC3339Nano))
	case job.NotBefore.After(now):
		return Write{}, Lease{}, fmt.Errorf("%w: job %s is not due before %s", ErrNotClaimable, job.ID, job.NotBefore.Format(time.RFC3339Nano))
	case job.Leases >= def.policy.MaxExecutions:
		return Write{}, Lease{}, fmt.Errorf("%w: job %s has %d live execution(s), the most its machine allows", ErrNotClaimable, job.ID, job.Leases)
	case job.Committed != uuid.Nil:
		return Write{}, Lease{}, &CommitError{JobID: job.ID, Winner: job.Committed}
	}
	id, err := e.newID()
	if err != nil {
		return Write{}, Lease{}, fmt.Errorf("jobstate: new execution id: %w", err)
	}
	x := Execution{
		ID: id, JobID: job.ID, Attempt: job.Attempt + 1, Owner: req.Worker, Status: ExecLeased,
		LeaseExpiresAt: after(now, ttl), HeartbeatAt: now, ClaimedAt: now,
	}
	next, rec, err := p.next(ctx, def, *job, Input{
		Event: EventClaim, Actor: req.Worker, Args: req.Args, Now: now,
		Executions: cur.Executions, ExecID: x.ID,
	})
	if err != nil {
		return Write{}, Lease{}, err
	}
	next.Attempt = x.Attempt
	next.CancelRequested = false
	w := Write{Job: next, Transitions: []Transition{rec}, Executions: []Execution{x}, MaxPerKey: def.policy.MaxPerKey}
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w, Lease{JobID: job.ID, ExecID: x.ID, Token: x.Attempt, Owner: req.Worker, ExpiresAt: x.LeaseExpiresAt, TTL: ttl}, nil
}

// leased checks that lease still holds its execution at now and returns
// it. A commit by another execution is reported first, as a *CommitError.
func leased(cur *Snapshot, lease Lease, now time.Time) (*Execution, error) {
	lost := func(reason string) error {
		return &LeaseError{JobID: lease.JobID, ExecID: lease.ExecID, Reason: reason, Cancelled: cur.Job.CancelRequested}
	}
	x := findExec(cur.Executions, lease.ExecID)
	switch {
	case x == nil:
		return nil, lost("no such execution")
	case cur.Job.Committed != uuid.Nil && cur.Job.Committed != x.ID:
		return nil, &CommitError{JobID: cur.Job.ID, ExecID: x.ID, Winner: cur.Job.Committed}
	case x.Attempt != lease.Token:
		return nil, lost(fmt.Sprintf("fencing token %d does not match execution's %d", lease.Token, x.Attempt))
	case x.Status == ExecAborted:
		return nil, lost("execution aborted: " + x.Error)
	case x.Status == ExecDone:
		return nil, lost("execution already finished")
	case !now.Before(x.LeaseExpiresAt):
		return nil, lost("lease expired at " + x.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	return x, nil
}

// Heartbeat renews the lease for another lease.TTL from now and returns
// the renewed lease. Errors: a *LeaseError (ErrLeaseLost, with
// ErrCancelled if the job was cancelled), a *CommitError if another
// execution committed, ErrNotFound.
func (e *Engine) Heartbeat(ctx context.Context, lease Lease) (Lease, error) {
	_, err := e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, _ *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if lease.TTL > MaxDuration {
			return Write{}, fmt.Errorf("%w: lease TTL %s is above the maximum %s", ErrInvalidArgument, lease.TTL, MaxDuration)
		}
		ttl := lease.TTL
		if ttl <= 0 {
			ttl = def.policy.LeaseTTL
		}
		y := *x
		y.HeartbeatAt, y.LeaseExpiresAt = now, after(now, ttl)
		lease.ExpiresAt, lease.TTL = y.LeaseExpiresAt, ttl
		return bump(def, &cur, now, y), nil
	})
	if err != nil {
		return Lease{}, err
	}
	return lease, nil
}

// Start marks the execution IN_PROGRESS: the worker has begun the work.
// Commit accepts a LEASED execution unless the machine sets
// Policy.RequireStart. Starting an execution already started changes
// nothing. Errors as for Heartbeat.
func (e *Engine) Start(ctx context.Context, lease Lease) (Job, error) {
	return e.update(ctx, lease.JobID, nil, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, _ *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if x.Status != ExecLeased {
			return Write{Job: cur.Job}, nil
		}
		y := *x
		y.Status, y.StartedAt = ExecInProgress, now
		return bump(def, &cur, now, y), nil
	})
}

// bump is a write that changes only executions: the job's version rises
// and its derived fields follow.
func bump(def *Definition, cur *Snapshot, now time.Time, execs ...Execution) Write {
	job := cur.Job
	job.Version++
	job.UpdatedAt = now
	w := Write{Job: job, Executions: execs}
	def.settle(&w.Job, cur.Executions, w.Executions)
	return w
}

// Advance fires a user event through a lease (a download moving from
// DOWNLOADING to STREAMING under one lease; a handler rejecting its input).
// Several active states may share the lease; a move out of the active
// states ends the execution (ABORTED, not committed). A committed
// execution can only finish: Advance refuses it with a *CommitError.
// Errors: those of Heartbeat, then those of Fire.
func (e *Engine) Advance(ctx context.Context, lease Lease, ev Event, c Call) (Job, error) {
	if IsLifecycle(ev) || ev == "" {
		return Job{}, fmt.Errorf("%w: event %q cannot be fired through Advance", ErrInvalidArgument, ev)
	}
	if err := c.check(); err != nil {
		return Job{}, err
	}
	return e.update(ctx, lease.JobID, c.Args, func(ctx context.Context, def *Definition, cur Snapshot, now time.Time, p *plan) (Write, error) {
		x, err := leased(&cur, lease, now)
		if err != nil {
			return Write{}, err
		}
		if x.Status == ExecCommitted {
			// A committed job can only be finished: a move could take it
			// where its succeed rule does not reach.
			return Write{}, &CommitError{JobID: cur.Job.ID, ExecID: x.ID, Winner: x.ID}
		}
		if err := checkVersion(&cur.Job, c.IfVersion); err != nil {
			return Write{}, err
		}
		if c.Actor == "" {
			c.Actor = lease.Owner
		}
		return e.move(ctx, def, &cur, ev, c, now, lease.ExecID, p)
	})
}

// Stuck lists up to limit jobs of machine (any machine when empty) holding
// live leases whose oldest heartbeat is older than olderThan (a "stuck"
// view for operators), oldest first.
func (e *Engine) Stuck(ctx context.Context, machine string, olderThan time.Duration, limit int) ([]Job, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if err := checkDuration("threshold", olderThan); err != nil {
		return nil, err
	}
	now, err := e.now()
	if err != nil {
		return nil, err
	}
	return e.store.Stale(ctx, machine, now.Add(-olderThan), limit)
}

// ClaimMany takes up to n due ready jobs of req.Machine at once, as n
// calls of Claim would, in claim order, each with its own execution and
// lease. On a store with the BatchClaimer capability it is one store call
// (one round trip and one transaction in a SQL store); otherwise it claims
// one job at a time. ErrNoJob when nothing can be claimed; other errors as
// for Claim, and ErrInvalidArgument for n < 1. The jobs claimed before
// an error are returned with it; with a BatchClaimer that works in one
// transaction (pgstore), an error leaves nothing claimed.
func (e *Engine) ClaimMany(ctx context.Context, req ClaimRequest, n int) ([]Claimed, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: claim of %d jobs", ErrInvalidArgument, n)
	}
	bc, ok := e.store.(BatchClaimer)
	if !ok || n == 1 {
		var out []Claimed
		for len(out) < n {
			c, err := e.Claim(ctx, req)
			if err != nil {
				if errors.Is(err, ErrNoJob) && len(out) > 0 {
					return out, nil
				}
				return out, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	def, err := e.machine(req.Machine)
	if err != nil {
		return nil, err
	}
	ttl, err := leaseTTL(def, req)
	if err != nil {
		return nil, err
	}
	now, err := e.now()
	if err != nil {
		return nil, err
	}
	c := &claiming{e: e, def: def, req: req, ttl: ttl, now: now, taken: make(map[uuid.UUID]taken, n)}
	q := ClaimQuery{Machine: def.name, Now: now, MaxPerKey: def.policy.MaxPerKey}
	if q.Plan, err = e.claimPlan(def, req.Worker, now, ttl, n); err != nil {
		return nil, err
	}
	jobs, err := bc.ClaimBatch(ctx, q, n, c.decide)
	if err != nil && len(jobs) == 0 {
		return nil, err
	}
	c.planned(q.Plan, jobs)
	if len(jobs) == 0 {
		if c.failed != nil {
			return nil, fmt.Errorf("%w: machine %q; a claim's effect failed: %w", ErrNoJob, def.name, c.failed)
		}
		return nil, fmt.Errorf("%w: machine %q", ErrNoJob, def.name)
	}
	out := make([]Claimed, 0, len(jobs))
	for _, j := range jobs {
		t := c.taken[j.ID]
		e.notify(ctx, j, t.recs)
		out = append(out, Claimed{Lease: t.lease, Job: j})
	}
	return out, err
}
