package jobstate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// ClaimPlan is a claim written as data: what the engine's claim function
// decides for every candidate the plan covers, so that a store able to
// apply it (a SQL store, in the statement that takes the jobs) need not
// read a candidate and call the function first. ClaimQuery.Plan carries
// it; the function the store is given decides the same for a covered
// candidate.
//
// A candidate is covered when its State is the From of one of Moves, its
// Leases is 0, its Committed is the nil id, and its Deadline does not act
// on it at Now: it is zero, or after Now, or its State is not one of
// Expiring.
//
// A store may apply the plan to a covered candidate instead of calling
// the function, and calls the function for every other candidate it
// offers. Applying the plan to a job writes, as Update applies a Write:
//   - the job with State, Kind and Outcome those of the move's To,
//     Version and Attempt one more, UpdatedAt Now, StartedAt Now if it
//     was zero, Leases 1, LeaseExpiresAt the plan's, HeartbeatAt Now,
//     CancelRequested false, SweepFailures 0, SweepRetryAt zero, WakeAt
//     the earlier of LeaseExpiresAt and, when the Deadline is set and To
//     is one of Expiring, the Deadline; every other field as it was;
//   - a new execution after the job's others: ID the next of ExecIDs
//     (the i-th job the plan claims in a call, in claim order, gets
//     ExecIDs[i]), the job's new Attempt, Owner Worker, Status LEASED,
//     LeaseExpiresAt the plan's, HeartbeatAt and ClaimedAt Now;
//   - the transition of the job's new Version from From to To by
//     EventClaim, Actor Worker, ExecID the new execution's, At Now.
//
// Every job taken, by the plan or by the function, is returned in claim
// order, as without a plan.
type ClaimPlan struct {
	// Moves are the claims the plan covers, one per ready state, each to
	// a different active state.
	Moves []ClaimMove
	// Expiring are the machine's states with an expire rule.
	Expiring []State
	// Worker is the claimant, the owner of the new executions.
	Worker string
	// Now is the claim's time.
	Now time.Time
	// LeaseExpiresAt is when the new executions' leases lapse.
	LeaseExpiresAt time.Time
	// ExecIDs are the new executions' ids, as many as the call may claim.
	ExecIDs []uuid.UUID
}

// ClaimMove is a claim rule a plan covers: a job in From moves to To, an
// active state with the outcome Outcome.
type ClaimMove struct {
	From, To State
	Outcome  Outcome
}

// Covers reports whether the plan covers job (see ClaimPlan), and the
// move it makes.
func (p *ClaimPlan) Covers(job *Job) (ClaimMove, bool) {
	i := slices.IndexFunc(p.Moves, func(m ClaimMove) bool { return m.From == job.State })
	if i < 0 || job.Leases != 0 || job.Committed != uuid.Nil {
		return ClaimMove{}, false
	}
	if !job.Deadline.IsZero() && !p.Now.Before(job.Deadline) && slices.Contains(p.Expiring, job.State) {
		return ClaimMove{}, false
	}
	return p.Moves[i], true
}

// Apply returns the write the plan makes of a covered job, cur with its
// executions, the claim's execution getting id.
func (p *ClaimPlan) Apply(cur Snapshot, m ClaimMove, id uuid.UUID) Write {
	j := cur.Job
	from := j.State
	j.State, j.Kind, j.Outcome = m.To, KindActive, m.Outcome
	j.Version++
	j.Attempt++
	j.UpdatedAt = p.Now
	if j.StartedAt.IsZero() {
		j.StartedAt = p.Now
	}
	j.Leases, j.LeaseExpiresAt, j.HeartbeatAt = 1, p.LeaseExpiresAt, p.Now
	j.CancelRequested = false
	j.SweepFailures, j.SweepRetryAt = 0, time.Time{}
	j.WakeAt = p.LeaseExpiresAt
	if !j.Deadline.IsZero() && j.Deadline.Before(j.WakeAt) && slices.Contains(p.Expiring, m.To) {
		j.WakeAt = j.Deadline
	}
	x := Execution{
		ID: id, JobID: j.ID, Attempt: j.Attempt, Owner: p.Worker, Status: ExecLeased,
		LeaseExpiresAt: p.LeaseExpiresAt, HeartbeatAt: p.Now, ClaimedAt: p.Now,
	}
	rec := Transition{
		JobID: j.ID, Version: j.Version, From: from, Event: EventClaim, To: m.To,
		Actor: p.Worker, ExecID: id, At: p.Now,
	}
	return Write{Job: j, Transitions: []Transition{rec}, Executions: []Execution{x}}
}

// claimMoves returns the claims of d a plan can cover: from each ready
// state whose claim rule (the first in table order) has no guard and no
// effect and leads to an active state that no other covered state leads
// to, so that a claimed job's state names its move.
func (d *Definition) claimMoves() []ClaimMove {
	var out []ClaimMove
	for i := range d.states {
		st := &d.states[i]
		if st.spec.Kind != KindReady {
			continue
		}
		k := slices.IndexFunc(st.out, func(e edge) bool { return e.event == EventClaim })
		if k < 0 || st.out[k].guard != nil || d.rules[st.out[k].rule].Effect != nil {
			continue
		}
		to := &d.states[st.out[k].to].spec
		if to.Kind != KindActive || slices.ContainsFunc(out, func(m ClaimMove) bool { return m.To == to.Name }) {
			continue
		}
		out = append(out, ClaimMove{From: st.spec.Name, To: to.Name, Outcome: to.Outcome})
	}
	return out
}

// expiring returns d's states with an expire rule.
func (d *Definition) expiring() []State {
	var out []State
	for i := range d.states {
		if d.Can(d.states[i].spec.Name, EventExpire) {
			out = append(out, d.states[i].spec.Name)
		}
	}
	return out
}

// claimPlan returns the plan of a ClaimBatch of up to n jobs of def by
// worker at now, with leases of ttl, or nil when the store does not apply
// plans or def has no claim a plan covers.
func (e *Engine) claimPlan(def *Definition, worker string, now time.Time, ttl time.Duration, n int) (*ClaimPlan, error) {
	cp, ok := e.store.(ClaimPlanner)
	if !ok || len(def.moves) == 0 || !cp.AppliesClaimPlans() {
		return nil, nil
	}
	p := &ClaimPlan{Moves: def.moves, Expiring: def.expiringStates, Worker: worker, Now: now, LeaseExpiresAt: after(now, ttl), ExecIDs: make([]uuid.UUID, n)}
	for i := range p.ExecIDs {
		id, err := e.newID()
		if err != nil {
			return nil, fmt.Errorf("jobstate: new execution id: %w", err)
		}
		p.ExecIDs[i] = id
	}
	return p, nil
}

// planned records, for each of jobs the store took by the plan p (those
// the function did not take), the lease and transition the plan gave it:
// the i-th such job in claim order has the plan's i-th execution id.
func (c *claiming) planned(p *ClaimPlan, jobs []Job) {
	if p == nil {
		return
	}
	k := 0
	for _, j := range jobs {
		if _, ok := c.taken[j.ID]; ok || k >= len(p.ExecIDs) {
			continue
		}
		i := slices.IndexFunc(p.Moves, func(m ClaimMove) bool { return m.To == j.State })
		if i < 0 {
			continue
		}
		id := p.ExecIDs[k]
		k++
		c.taken[j.ID] = taken{
			lease: Lease{JobID: j.ID, ExecID: id, Token: j.Attempt, Owner: p.Worker, ExpiresAt: p.LeaseExpiresAt, TTL: c.ttl},
			recs: []Transition{{JobID: j.ID, Version: j.Version, From: p.Moves[i].From, Event: EventClaim, To: j.State,
				Actor: p.Worker, ExecID: id, At: p.Now}},
		}
	}
}

// CommitPlan is a commit and finish of one execution in one write
// (Engine.Succeed) written as data, for a store able to apply it without
// reading the job and calling the function first.
//
// A job is covered when its Machine and State are those of one of Moves,
// its Committed is the nil id, its Leases is 1, and its execution ExecID
// has Attempt Token, a live status (IN_PROGRESS only, when the move's
// RequireStart is set; LEASED or IN_PROGRESS otherwise) and a
// LeaseExpiresAt after Now.
//
// Applying the plan to a covered job writes, as Update applies a Write:
//   - the job with State, Kind and Outcome those of the move's To (a
//     terminal state), Version one more, UpdatedAt and CompletedAt Now,
//     Committed ExecID, Result the plan's, LastError empty, ErrorClass
//     ClassNone, Leases 0, LeaseExpiresAt, HeartbeatAt, SweepRetryAt and
//     WakeAt zero, SweepFailures 0; every other field as it was;
//   - the execution ExecID DONE, FinishedAt Now, StartedAt Now if it
//     was zero;
//   - the transition of the job's new Version from From to To by
//     EventSucceed, Actor Actor, ExecID the execution's, At Now.
type CommitPlan struct {
	// ExecID and Token are the lease's execution and fencing token.
	ExecID uuid.UUID
	Token  int
	// Actor is the lease's owner, the transition's actor.
	Actor string
	// Now is the commit's time.
	Now time.Time
	// Result is the job's result as committed.
	Result []byte
	// Moves are the succeed rules the plan covers, of every machine.
	Moves []FinishMove
}

// FinishMove is a succeed rule a commit plan covers: a job of Machine in
// From, an active state, moves to To, a terminal state with the outcome
// Outcome. RequireStart is the machine's Policy.RequireStart.
type FinishMove struct {
	Machine      string
	From, To     State
	Outcome      Outcome
	RequireStart bool
}

// Covers reports whether the plan covers cur (see CommitPlan), the move
// it makes and the execution it commits.
func (p *CommitPlan) Covers(cur *Snapshot) (FinishMove, *Execution, bool) {
	j := &cur.Job
	i := slices.IndexFunc(p.Moves, func(m FinishMove) bool { return m.Machine == j.Machine && m.From == j.State })
	if i < 0 || j.Committed != uuid.Nil || j.Leases != 1 {
		return FinishMove{}, nil, false
	}
	x := findExec(cur.Executions, p.ExecID)
	if x == nil || x.Attempt != p.Token || !p.Now.Before(x.LeaseExpiresAt) {
		return FinishMove{}, nil, false
	}
	if x.Status != ExecInProgress && (p.Moves[i].RequireStart || x.Status != ExecLeased) {
		return FinishMove{}, nil, false
	}
	return p.Moves[i], x, true
}

// Apply returns the write the plan makes of cur, which it covers with
// the move m and the execution x.
func (p *CommitPlan) Apply(cur Snapshot, m FinishMove, x Execution) Write {
	j := cur.Job
	j.State, j.Kind, j.Outcome = m.To, KindTerminal, m.Outcome
	j.Version++
	j.UpdatedAt, j.CompletedAt = p.Now, p.Now
	j.Committed, j.Result = x.ID, p.Result
	j.LastError, j.ErrorClass = "", ClassNone
	j.Leases, j.LeaseExpiresAt, j.HeartbeatAt = 0, time.Time{}, time.Time{}
	j.SweepFailures, j.SweepRetryAt, j.WakeAt = 0, time.Time{}, time.Time{}
	x.Status, x.FinishedAt = ExecDone, p.Now
	if x.StartedAt.IsZero() {
		x.StartedAt = p.Now
	}
	rec := Transition{
		JobID: j.ID, Version: j.Version, From: m.From, Event: EventSucceed, To: m.To,
		Actor: p.Actor, ExecID: x.ID, At: p.Now,
	}
	return Write{Job: j, Transitions: []Transition{rec}, Executions: []Execution{x}}
}

// finishMoves returns the succeed rules of d a commit plan can cover:
// from each active state whose succeed rule (the first in table order)
// has no guard and no effect and leads to a terminal state.
func (d *Definition) finishMoves() []FinishMove {
	var out []FinishMove
	for i := range d.states {
		st := &d.states[i]
		if st.spec.Kind != KindActive {
			continue
		}
		k := slices.IndexFunc(st.out, func(e edge) bool { return e.event == EventSucceed })
		if k < 0 || st.out[k].guard != nil || d.rules[st.out[k].rule].Effect != nil {
			continue
		}
		if to := &d.states[st.out[k].to].spec; to.Kind == KindTerminal {
			out = append(out, FinishMove{Machine: d.name, From: st.spec.Name, To: to.Name, Outcome: to.Outcome, RequireStart: d.policy.RequireStart})
		}
	}
	return out
}

// succeedPlanned is Succeed through a CommitPlanner store that applies
// plans: the plan, and the function Succeed would run otherwise, go to
// UpdatePlanned. ok is false when the store does not take plans, or the
// engine expires jobs lazily (a plan would not expire an overdue job
// first), or no machine has a succeed rule a plan covers.
func (e *Engine) succeedPlanned(ctx context.Context, lease Lease, in CommitInput, fn opFunc) (job Job, ok bool, err error) {
	if err := e.ready(); err != nil {
		return Job{}, true, err
	}
	cp, isPlanner := e.store.(CommitPlanner)
	if !isPlanner || e.lazy || len(e.finishMoves) == 0 || !cp.AppliesCommitPlans() {
		return Job{}, false, nil
	}
	now, err := e.now()
	if err != nil {
		return Job{}, true, err
	}
	p := &CommitPlan{ExecID: lease.ExecID, Token: lease.Token, Actor: lease.Owner, Now: now, Result: in.Result, Moves: e.finishMoves}
	u := &updating{e: e, fn: fn}
	job, recs, err := cp.UpdatePlanned(ctx, lease.JobID, p, in.Effect, u.decide)
	if err != nil {
		return Job{}, true, err
	}
	if recs == nil {
		recs = u.recs
	}
	e.notify(ctx, job, recs)
	if u.incomplete != nil {
		return job, true, u.incomplete
	}
	return job, true, nil
}
