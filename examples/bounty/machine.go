package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// The bounty's states, named as the lifecycle names them (the literal
// definition, internal/machines/bounty).
const (
	Open      = bounty.Open
	Funded    = bounty.Funded
	Resolved  = bounty.Resolved
	Expired   = bounty.Expired
	Cancelled = bounty.Cancelled
)

// Machine is the name of the bounty machine.
const Machine = bounty.Name

// The bounty's user events. Cancel (T2, T5) is the library's
// jobstate.EventCancel; a submission (POST /jobs/<id>/submit) is a claim of
// a new execution (jobstate.EventClaim); resolve (T3) is
// jobstate.EventSucceed, fired when a submission commits; expiry (T4) is
// jobstate.EventExpire.
const (
	// Fund is T1's event (POST /jobs/<id>/fund).
	Fund = bounty.Fund
	// Join is a worker claiming a funded bounty (POST /jobs/<id>/claim):
	// the worker joins the bounty's participants. It is a step of its own,
	// before any submission; the bounty stays funded.
	Join = bounty.Join
)

// Refund is the name of the once-only effect of T6 and T7. It is not a
// state: the job stays expired or cancelled.
const Refund = bounty.Refund

// The marketplace's limits.
const (
	// DefaultMaxSubmissions bounds the submissions to one bounty
	// (invariant 6), unless its terms say otherwise.
	DefaultMaxSubmissions = 20
	// DefaultMaxRetries bounds one worker's retries on one bounty
	// (invariant 7), unless its terms say otherwise. A retry is a
	// submission after the worker's first one, so a worker may submit
	// 1 + max_retries times.
	DefaultMaxRetries = 3
	// MaxSubmissionsCap is the most submissions terms may allow; all of
	// them may be judged at once (Policy.MaxExecutions).
	MaxSubmissionsCap = bounty.MaxSubmissionsCap
	// MaxContentBytes is the size limit of one submission (invariant 8).
	MaxContentBytes = 50 * 1024
	// PassThreshold is ORACLE_PASS_THRESHOLD: the least score that passes.
	PassThreshold = 80
	// JudgingLease is how long a submission may stay judging without a
	// verdict before it counts as stuck.
	JudgingLease = bounty.JudgingLease
)

// The guards' refusals. The engine returns them wrapped in a
// *jobstate.TransitionError with jobstate.ErrGuardRefused.
var (
	ErrNotBuyer       = bounty.ErrNotBuyer
	ErrBadDeposit     = errors.New("a deposit needs a 0x transaction hash and a depositor address")
	ErrJudging        = bounty.ErrJudging
	ErrNotRegistered  = errors.New("worker is not registered")
	ErrSelfDealing    = bounty.ErrSelfDealing
	ErrReputation     = errors.New("completion rate below the bounty's minimum")
	ErrTooLarge       = errors.New("submission larger than 50KB")
	ErrMaxSubmissions = errors.New("the bounty has all the submissions it accepts")
	ErrMaxRetries     = errors.New("the worker has used all their retries on this bounty")
	ErrNotParticipant = errors.New("the worker has not claimed this bounty")
	ErrAlreadyJoined  = errors.New("the worker has already claimed this bounty")
	ErrBadTerms       = errors.New("invalid bounty terms")
)

// Terms are what a buyer posts (POST /jobs), stored as the job's payload.
type Terms struct {
	Title string `json:"title"`
	// Reward is the amount escrowed by funding, in cents.
	Reward int64 `json:"reward"`
	// Rubric lists what a submission must contain to pass the demo oracle.
	Rubric []string `json:"rubric,omitempty"`
	// MinReputation is the least completion_rate a worker needs to claim
	// the bounty (invariant 14); zero means anyone.
	MinReputation float64 `json:"min_reputation,omitempty"`
	// MaxSubmissions and MaxRetries are the bounty's limits (invariants 6
	// and 7); Post fills in the defaults.
	MaxSubmissions int `json:"max_submissions"`
	MaxRetries     int `json:"max_retries"`
}

// TermsOf decodes the terms of a bounty.
func TermsOf(job jobstate.Job) (Terms, error) {
	var t Terms
	if err := json.Unmarshal(job.Payload, &t); err != nil {
		return Terms{}, fmt.Errorf("%w: %v", ErrBadTerms, err)
	}
	return t, nil
}

// Resolution is what the winning submission stores as the job's result:
// winner_id and result_data (T3), with the oracle's score.
type Resolution struct {
	Winner     string `json:"winner_id"`
	ResultData string `json:"result_data"`
	Score      int    `json:"score"`
}

// ResolutionOf decodes a resolved bounty's result.
func ResolutionOf(job jobstate.Job) (Resolution, error) {
	var r Resolution
	if err := json.Unmarshal(job.Result, &r); err != nil {
		return Resolution{}, fmt.Errorf("bounty %s has no resolution: %v", job.ID, err)
	}
	return r, nil
}

// JoinArgs are a claim's arguments to the join guard: the worker's record
// as the database holds it (nil when the worker is not registered), and
// whether the worker is already a participant.
type JoinArgs struct {
	Agent  *Agent
	Joined bool
}

// SubmitArgs are a submission's arguments to the submission guard: the
// content, and whether the worker is a participant (claimed the bounty).
type SubmitArgs struct {
	Content string
	Joined  bool
}

// NewMachine returns the bounty machine, the literal definition of
// internal/machines/bounty, with the guards and effects of T1-T5, the claim
// (join) and the submission, and the refund of T6/T7 bound to the
// marketplace. Effects write to db.
func NewMachine(db *DB) (*jobstate.Definition, error) {
	buyer := hook.Guard{Name: "buyer", Func: buyerOnly}
	return jobstate.NewDefinition(bounty.Spec(bounty.Hooks{
		Create:        hook.Guard{Name: "buyer, valid terms", Func: validTerms},
		ListBounty:    hook.Effect{Name: "list the bounty", Func: db.indexBounty},
		Fund:          hook.Guard{Name: "buyer, valid deposit", Func: buyerWithDeposit},
		RecordDeposit: hook.Effect{Name: "record deposit (tx hash unique)", Func: db.recordDeposit},
		CancelOpen:    buyer,
		Join:          hook.Guard{Name: "registered, not the buyer, reputation, not yet claimed", Func: joinAllowed},
		RecordJoin:    hook.Effect{Name: "add to participants, count the claim", Func: db.recordJoin},
		Submit:        hook.Guard{Name: "participant, 50KB, max submissions, max retries per worker", Func: submissionAllowed},
		CancelFunded:  hook.Guard{Name: "buyer, nothing judging", Func: buyerAndNothingJudging},
		RefundGuard:   buyer,
		Refund:        hook.Effect{Name: "refund", Func: db.refund},
	}))
}

// validTerms is the creation guard: a bounty is posted by its buyer, with a
// reward and limits the marketplace accepts.
func validTerms(_ context.Context, in jobstate.GuardInput) error {
	if in.Job.Owner == "" || in.Actor != in.Job.Owner {
		return ErrNotBuyer
	}
	t, err := TermsOf(in.Job)
	if err != nil {
		return err
	}
	switch {
	case t.Reward <= 0:
		return fmt.Errorf("%w: reward must be positive", ErrBadTerms)
	case t.MaxSubmissions < 1 || t.MaxSubmissions > MaxSubmissionsCap:
		return fmt.Errorf("%w: max submissions must be between 1 and %d", ErrBadTerms, MaxSubmissionsCap)
	case t.MaxRetries < 0:
		return fmt.Errorf("%w: max retries per worker cannot be negative", ErrBadTerms)
	case t.MinReputation < 0 || t.MinReputation > 1:
		return fmt.Errorf("%w: minimum reputation must be between 0 and 1", ErrBadTerms)
	}
	return nil
}

// buyerOnly allows the move only to the bounty's buyer (invariant 1).
func buyerOnly(ctx context.Context, in jobstate.GuardInput) error { return bounty.BuyerOnly(ctx, in) }

// buyerWithDeposit is T1's guard: the buyer, with a well-formed deposit
// (on-chain verification is assumed, as in the lifecycle's DEV_MODE).
func buyerWithDeposit(ctx context.Context, in jobstate.GuardInput) error {
	if err := buyerOnly(ctx, in); err != nil {
		return err
	}
	d, ok := in.Args.(Deposit)
	if !ok || d.From == "" || !isTxHash(d.TxHash) {
		return ErrBadDeposit
	}
	return nil
}

// isTxHash reports whether s looks like a transaction hash: 0x and hex
// digits.
func isTxHash(s string) bool {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok || hex == "" {
		return false
	}
	return strings.Trim(strings.ToLower(hex), "0123456789abcdef") == ""
}

// buyerAndNothingJudging is T5's guard: the buyer, and no submission being
// judged (invariant 9), which it reads from the job's live executions.
func buyerAndNothingJudging(ctx context.Context, in jobstate.GuardInput) error {
	return bounty.BuyerAndNothingJudging(ctx, in)
}

// joinAllowed is the guard of a claim (join): a registered worker (2) who
// is not the buyer (3), with the reputation the bounty asks for (14), and
// not a participant yet.
func joinAllowed(_ context.Context, in jobstate.GuardInput) error {
	args, ok := in.Args.(JoinArgs)
	if !ok {
		return fmt.Errorf("join arguments are %T, not JoinArgs", in.Args)
	}
	terms, err := TermsOf(in.Job)
	if err != nil {
		return err
	}
	switch {
	case args.Agent == nil || args.Agent.Name != in.Actor:
		return ErrNotRegistered
	case in.Actor == in.Job.Owner:
		return ErrSelfDealing
	case terms.MinReputation > 0 && args.Agent.CompletionRate() < terms.MinReputation:
		return fmt.Errorf("%w: %.2f < %.2f", ErrReputation, args.Agent.CompletionRate(), terms.MinReputation)
	case args.Joined:
		return ErrAlreadyJoined
	}
	return nil
}

// submissionAllowed is the guard of a submission (the claim of an
// execution): a worker who claimed the bounty, content within 50KB (8),
// while the bounty accepts more submissions (6) and the worker has retries
// left (7). The limits count the job's executions, failed ones included:
// every submission counts towards max_submissions, and every submission
// of the worker's after their first is a retry.
func submissionAllowed(_ context.Context, in jobstate.GuardInput) error {
	args, ok := in.Args.(SubmitArgs)
	if !ok {
		return fmt.Errorf("claim arguments are %T, not SubmitArgs", in.Args)
	}
	terms, err := TermsOf(in.Job)
	if err != nil {
		return err
	}
	switch {
	case !args.Joined:
		return ErrNotParticipant
	case len(args.Content) > MaxContentBytes:
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, len(args.Content))
	}
	total, mine := len(in.Executions), 0
	for _, x := range in.Executions {
		if x.Owner == in.Actor {
			mine++
		}
	}
	switch {
	case total >= terms.MaxSubmissions:
		return fmt.Errorf("%w: %d of %d", ErrMaxSubmissions, total, terms.MaxSubmissions)
	case mine > 0 && mine-1 >= terms.MaxRetries:
		return fmt.Errorf("%w: %d of %d", ErrMaxRetries, mine-1, terms.MaxRetries)
	}
	return nil
}
