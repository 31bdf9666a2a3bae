package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Oracle scores a submission against a bounty's terms, from 0 to 100. An
// error means the submission could not be judged (the guard blocked it, or
// the oracle failed); the submission then fails.
type Oracle func(terms Terms, content string) (int, error)

// ErrBlocked is the demo oracle's guard refusing a submission.
var ErrBlocked = errors.New("guard blocked the submission")

// DemoOracle is a stand-in for the lifecycle's guard and LLM oracle: it blocks
// content that tries to instruct the judge, then scores the share of the
// rubric's terms the content contains (case-insensitive).
func DemoOracle(terms Terms, content string) (int, error) {
	lower := strings.ToLower(content)
	if strings.Contains(lower, "ignore previous instructions") {
		return 0, ErrBlocked
	}
	if len(terms.Rubric) == 0 {
		return 100, nil
	}
	hits := 0
	for _, w := range terms.Rubric {
		if strings.Contains(lower, strings.ToLower(w)) {
			hits++
		}
	}
	return 100 * hits / len(terms.Rubric), nil
}

// Market is the marketplace server: its endpoints call the engine, which
// applies the bounty machine; the market itself decides no lifecycle rule.
type Market struct {
	eng    *jobstate.Engine
	def    *jobstate.Definition
	db     *DB
	oracle Oracle
}

// Start starts a server over store and db: it declares the machine, builds
// the engine and recovers from a previous run (rule 12): every
// submission left judging by the server that died is failed at once,
// whatever time its judging lease has left (Policy.FailOnLeaseLoss; the
// bounty stays funded). The report says what the recovery did. Nothing
// else runs at start-up: expiry stays lazy (rule 10).
func Start(ctx context.Context, store jobstate.Store, db *DB, clock jobstate.Clock, oracle Oracle) (*Market, jobstate.SweepReport, error) {
	def, err := NewMachine(db)
	if err != nil {
		return nil, jobstate.SweepReport{}, err
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock))
	if err != nil {
		return nil, jobstate.SweepReport{}, err
	}
	rep, err := recoverJudging(ctx, eng)
	if err != nil {
		return nil, rep, err
	}
	return &Market{eng: eng, def: def, db: db, oracle: oracle}, rep, nil
}

// endOfTime is later than any heartbeat: every bounty holding a judging
// lease has its heartbeat before it.
var endOfTime = time.Unix(1<<62, 0)

// recoverJudging fails every submission still judging, with
// Engine.RecoverWorker: the server judges every submission, so at its
// start none of them has anyone judging it. A submission's lease is held
// under its worker's name (the claim guard counts a worker's submissions
// by it), not under one name of the server's, so the recovery runs for
// each worker name that holds a judging submission, found among the
// bounties holding leases. The report sums what it did; Jobs counts those
// bounties.
func recoverJudging(ctx context.Context, eng *jobstate.Engine) (jobstate.SweepReport, error) {
	var rep jobstate.SweepReport
	held, err := eng.Store().Stale(ctx, Machine, endOfTime, 0)
	if err != nil {
		return rep, err
	}
	judging := make(map[string]bool)
	for _, job := range held {
		execs, err := eng.Executions(ctx, job.ID)
		if err != nil {
			return rep, err
		}
		for _, x := range execs {
			if x.Status.Live() {
				judging[x.Owner] = true
			}
		}
	}
	rep.Jobs = len(held)
	for _, worker := range slices.Sorted(maps.Keys(judging)) {
		r, err := eng.RecoverWorker(ctx, worker)
		rep.Finalized += r.Finalized
		rep.Aborted += r.Aborted
		rep.Retried += r.Retried
		rep.Failed += r.Failed
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Engine returns the market's engine.
func (m *Market) Engine() *jobstate.Engine { return m.eng }

// Definition returns the bounty machine.
func (m *Market) Definition() *jobstate.Definition { return m.def }

// Register registers a worker (POST /agents).
func (m *Market) Register(name string) { m.db.Register(name) }

// Post creates a bounty for buyer (POST /jobs), open until funded, with
// the default limits where terms leave them unset and an optional
// deadline.
func (m *Market) Post(ctx context.Context, buyer string, terms Terms, deadline time.Time) (jobstate.Job, error) {
	if terms.MaxSubmissions == 0 {
		terms.MaxSubmissions = DefaultMaxSubmissions
	}
	if terms.MaxRetries == 0 {
		terms.MaxRetries = DefaultMaxRetries
	}
	payload, err := json.Marshal(terms)
	if err != nil {
		return jobstate.Job{}, err
	}
	c, err := m.eng.Create(ctx, jobstate.NewJob{Machine: Machine, Payload: payload, Owner: buyer, Actor: buyer, Deadline: deadline})
	return c.Job, err
}

// Get reads a bounty (GET /jobs/<id>). The engine expires a funded bounty
// found past its deadline first (T4), failing its judging submissions. So
// does every other operation of the engine on a bounty (Policy.LazyExpiry),
// as every endpoint of the lifecycle reads through check_expiry.
func (m *Market) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	return m.eng.Get(ctx, id)
}

// List lists every bounty (GET /jobs), in the order posted, each expired
// first if it is funded and past its deadline (T4: the lazy check runs on
// the list as on a single read). With a store that offers listing
// (jobstate.Lister), it pages through Engine.List, which applies lazy
// expiry to every job it lists; otherwise it walks the example's own
// listing and reads each bounty through Engine.Get, which does.
func (m *Market) List(ctx context.Context) ([]jobstate.Job, error) {
	var out []jobstate.Job
	q := jobstate.ListQuery{Machine: Machine, Limit: 100}
	cursor := ""
	for {
		page, err := m.eng.List(ctx, q, cursor)
		if errors.Is(err, jobstate.ErrUnsupported) {
			return m.listOwn(ctx)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
	}
}

// listOwn is List for a store without the Lister capability.
func (m *Market) listOwn(ctx context.Context) ([]jobstate.Job, error) {
	ids := m.db.Bounties()
	out := make([]jobstate.Job, 0, len(ids))
	for _, id := range ids {
		job, err := m.eng.Get(ctx, id)
		if errors.Is(err, jobstate.ErrNotFound) {
			continue // pruned
		}
		if err != nil {
			return nil, err
		}
		out = append(out, job)
	}
	return out, nil
}

// Sweep is the server's periodic recovery: it fails every submission whose
// judging lease (JudgingLease) has lapsed without a verdict (a stuck
// judging submission, as at start-up; Policy.FailOnLeaseLoss), leaving
// the bounty funded. The engine's sweep also expires the funded bounties
// past their deadline that it meets, which a read would have expired
// anyway (see docs/examples/bounty.md).
func (m *Market) Sweep(ctx context.Context) (jobstate.SweepReport, error) {
	return m.eng.Sweep(ctx)
}

// Fund funds a bounty with the buyer's deposit (T1, POST
// /jobs/<id>/fund). The deposit is the call's argument, which the guard
// checks and the fund rule's effect records.
func (m *Market) Fund(ctx context.Context, id uuid.UUID, actor string, d Deposit) (jobstate.Job, error) {
	return m.eng.Fire(ctx, id, Fund, jobstate.Call{Actor: actor, Args: d})
}

// Cancel cancels a bounty (T2, T5, POST /jobs/<id>/cancel).
func (m *Market) Cancel(ctx context.Context, id uuid.UUID, actor string) (jobstate.Job, error) {
	return m.eng.Cancel(ctx, id, jobstate.Call{Actor: actor})
}

// Refund returns a dead bounty's deposit to its depositor (T6, T7, POST
// /jobs/<id>/refund): once, whoever asks how often.
func (m *Market) Refund(ctx context.Context, id uuid.UUID, actor string) (jobstate.Job, error) {
	return m.eng.Apply(ctx, id, Refund, jobstate.Call{Actor: actor})
}

// Submission is a submission being judged: the worker's hold on one
// execution of the bounty.
type Submission struct {
	Lease   jobstate.Lease
	Worker  string
	Content string
	Terms   Terms
}

// Join is a worker claiming a funded bounty (POST /jobs/<id>/claim): the
// worker joins its participants, and the claim counts towards the
// worker's total_claims. The join guard decides whether it is accepted
// (registered, not the buyer, the reputation gate, not yet claimed).
func (m *Market) Join(ctx context.Context, id uuid.UUID, worker string) (jobstate.Job, error) {
	args := JoinArgs{Joined: m.db.Joined(id, worker)}
	if a, ok := m.db.Agent(worker); ok {
		args.Agent = &a
	}
	return m.eng.Fire(ctx, id, Join, jobstate.Call{Actor: worker, Args: args})
}

// Submit submits a worker's content to a bounty (POST /jobs/<id>/submit):
// a new execution of the job, claimed under the worker's name and judging
// until its verdict. The worker must have claimed the bounty first (Join);
// the submission guard decides whether it is accepted.
func (m *Market) Submit(ctx context.Context, id uuid.UUID, worker, content string) (Submission, error) {
	args := SubmitArgs{Content: content, Joined: m.db.Joined(id, worker)}
	c, err := m.eng.ClaimJob(ctx, id, jobstate.ClaimRequest{Worker: worker, Args: args})
	if err != nil {
		return Submission{}, err
	}
	terms, err := TermsOf(c.Job)
	if err != nil {
		return Submission{}, err
	}
	return Submission{Lease: c.Lease, Worker: worker, Content: content, Terms: terms}, nil
}

// Verdict is the oracle's judgement of a submission.
type Verdict struct {
	Score int
	// Passed is the oracle's acceptance; whether the submission won is
	// told by Judge's error (nil for the winner).
	Passed bool
	// Reason says why a submission failed.
	Reason string
}

// Judge runs the oracle on a submission and records the verdict (the
// lifecycle's oracle thread). A passing submission commits: the first to do so
// resolves the bounty with its result and its payout (T3); a later one is
// discarded (jobstate.ErrAlreadyCommitted). A failing one fails alone,
// permanently; the bounty stays funded. A submission ended meanwhile (the
// bounty expired, even unread, or a restart failed it) gets
// jobstate.ErrLeaseLost.
func (m *Market) Judge(ctx context.Context, s Submission) (Verdict, error) {
	score, err := m.oracle(s.Terms, s.Content)
	var v Verdict
	switch {
	case err != nil:
		v = Verdict{Reason: err.Error()}
	case score < PassThreshold:
		v = Verdict{Score: score, Reason: fmt.Sprintf("score %d below %d", score, PassThreshold)}
	default:
		v = Verdict{Score: score, Passed: true}
		res, err := json.Marshal(Resolution{Winner: s.Worker, ResultData: s.Content, Score: score})
		if err != nil {
			return v, err
		}
		_, err = m.eng.Succeed(ctx, s.Lease, jobstate.CommitInput{Result: res, Effect: m.db.payout})
		return v, err
	}
	_, err = m.eng.Fail(ctx, s.Lease, jobstate.Permanent(errors.New(v.Reason)))
	return v, err
}

// SubmissionStatus is a submission's status in the lifecycle's words.
type SubmissionStatus string

// The submission statuses.
const (
	Judging SubmissionStatus = "judging"
	Passed  SubmissionStatus = "passed"
	Failed  SubmissionStatus = "failed"
)

// SubmissionView is one submission as the lifecycle's Submission table shows
// it.
type SubmissionView struct {
	Worker string
	Status SubmissionStatus
	// Reason says why a failed submission failed.
	Reason string
}

// Submissions lists a bounty's submissions in the order they were made,
// each execution's status named in the lifecycle's words: live is judging,
// done is passed, aborted is failed.
func (m *Market) Submissions(ctx context.Context, id uuid.UUID) ([]SubmissionView, error) {
	execs, err := m.eng.Executions(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]SubmissionView, len(execs))
	for i, x := range execs {
		out[i] = SubmissionView{Worker: x.Owner, Status: statusOf(x.Status), Reason: x.Error}
	}
	return out, nil
}

// statusOf names an execution status as a submission status.
func statusOf(s jobstate.ExecStatus) SubmissionStatus {
	switch {
	case s == jobstate.ExecDone:
		return Passed
	case s == jobstate.ExecAborted:
		return Failed
	default:
		return Judging
	}
}
