// Package bounty is the literal definition of the bounty marketplace
// lifecycle: a buyer posts a bounty (open) and funds it (funded); workers
// claim it, then submit work, each submission judged while the bounty stays
// funded, and the first submission to pass resolves it atomically, the
// others being discarded. A funded bounty past its deadline expires when it
// is read; the buyer may cancel an open bounty, or a funded one while no
// submission is being judged. The refund of an expired or cancelled bounty
// is an effect that runs once and is not a state.
//
// The example program examples/bounty runs this definition with its
// marketplace's guards and effects; the library's tests, the store suite
// and the conformance vectors run it with theirs.
package bounty

import (
	"context"
	"errors"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// Name is the machine's name.
const Name = "bounty"

// The bounty's states, named as the lifecycle names them.
const (
	Open      jobstate.State = "open"
	Funded    jobstate.State = "funded"
	Resolved  jobstate.State = "resolved"
	Expired   jobstate.State = "expired"
	Cancelled jobstate.State = "cancelled"
)

// The bounty's user events. Cancel (T2, T5) is jobstate.EventCancel; a
// submission (POST /jobs/<id>/submit) is the claim of a new execution
// (jobstate.EventClaim); resolve (T3) is jobstate.EventSucceed, fired when
// a submission commits; expiry (T4) is jobstate.EventExpire.
const (
	// Fund is T1's event (POST /jobs/<id>/fund).
	Fund jobstate.Event = "fund"
	// Join is a worker claiming a funded bounty (POST /jobs/<id>/claim):
	// the worker joins the bounty's participants. It is a step of its own,
	// before any submission; the bounty stays funded.
	Join jobstate.Event = "join"
)

// Refund is the name of the once-only effect of T6 and T7. It is not a
// state: the job stays expired or cancelled.
const Refund = "refund"

const (
	// JudgingLease is how long a submission may stay judging without a
	// verdict before it counts as stuck.
	JudgingLease = 2 * time.Minute
	// MaxSubmissionsCap is the most submissions a bounty may accept; all
	// of them may be judged at once (Policy.MaxExecutions).
	MaxSubmissionsCap = 100
)

// Hooks are the functions the definition leaves to the program that runs
// it. Every one is required.
type Hooks struct {
	// Create guards posting a bounty: the buyer, with valid terms.
	Create hook.Guard
	// ListBounty runs with the creation.
	ListBounty hook.Effect
	// Fund guards T1: the buyer, with a valid deposit.
	Fund hook.Guard
	// RecordDeposit runs with T1 (the deposit's transaction hash is
	// unique).
	RecordDeposit hook.Effect
	// CancelOpen guards T2: the buyer.
	CancelOpen hook.Guard
	// Join guards a worker's claim: registered, not the buyer, with the
	// reputation the bounty asks for, not yet a participant.
	Join hook.Guard
	// RecordJoin runs with a claim: the worker joins the participants.
	RecordJoin hook.Effect
	// Submit guards a submission: a participant, within the content and
	// submission limits.
	Submit hook.Guard
	// CancelFunded guards T5: the buyer, and no submission being judged.
	CancelFunded hook.Guard
	// RefundGuard guards the refund (T6, T7): the buyer.
	RefundGuard hook.Guard
	// Refund is the refund itself.
	Refund hook.Effect
}

// Spec returns the bounty machine with h bound: its states, its table with
// the guards and effects of T1-T5, the claim (join) and the submission,
// its lifecycle policy, and the refund of T6/T7 as a once-only effect.
func Spec(h Hooks) jobstate.Spec {
	return jobstate.Spec{
		Name: Name,
		States: []jobstate.StateSpec{
			{Name: Open, Kind: jobstate.KindInitial, Description: "created, awaiting funding"},
			{Name: Funded, Kind: jobstate.KindReady, Description: "deposit verified, accepting submissions"},
			{Name: Resolved, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded, Description: "a submission passed, winner paid"},
			{Name: Expired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired, Description: "past its deadline unresolved (refundable)"},
			{Name: Cancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled, Description: "cancelled by the buyer (refundable)"},
		},
		Initial: Open,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Open}, Event: Fund, To: Funded, Guard: h.Fund.Func, GuardName: h.Fund.Name,
				Effect: h.RecordDeposit.Func, EffectName: h.RecordDeposit.Name, Description: "T1"},
			{From: []jobstate.State{Open}, Event: jobstate.EventCancel, To: Cancelled, Guard: h.CancelOpen.Func, GuardName: h.CancelOpen.Name,
				Description: "T2"},
			{From: []jobstate.State{Funded}, Event: Join, To: Funded, Guard: h.Join.Func, GuardName: h.Join.Name,
				Effect: h.RecordJoin.Func, EffectName: h.RecordJoin.Name, Description: "a worker claims the bounty"},
			{From: []jobstate.State{Funded}, Event: jobstate.EventClaim, To: Funded, Guard: h.Submit.Func, GuardName: h.Submit.Name,
				Description: "a submission starts judging"},
			{From: []jobstate.State{Funded}, Event: jobstate.EventSucceed, To: Resolved, Description: "T3: the first passer wins"},
			{From: []jobstate.State{Funded}, Event: jobstate.EventExpire, To: Expired, Description: "T4: lazy expiry on read"},
			{From: []jobstate.State{Funded}, Event: jobstate.EventCancel, To: Cancelled, Guard: h.CancelFunded.Func, GuardName: h.CancelFunded.Name,
				Description: "T5"},
		},
		Policy: jobstate.Policy{
			LeaseTTL:        JudgingLease,
			MaxExecutions:   MaxSubmissionsCap,
			FailOnLeaseLoss: true,
			LazyExpiry:      true,
		},
		Create: jobstate.CreateSpec{Guard: h.Create.Func, GuardName: h.Create.Name, Effect: h.ListBounty.Func, EffectName: h.ListBounty.Name},
		Effects: []jobstate.EffectSpec{{Name: Refund, In: []jobstate.State{Expired, Cancelled},
			Guard: h.RefundGuard.Func, GuardName: h.RefundGuard.Name, Run: h.Refund.Func, RunName: h.Refund.Name}},
	}
}

// The refusals of the guards below. The engine returns them wrapped in a
// *jobstate.TransitionError with jobstate.ErrGuardRefused.
var (
	ErrNotBuyer    = errors.New("only the buyer may do that")
	ErrSelfDealing = errors.New("the buyer cannot work on their own bounty")
	ErrJudging     = errors.New("a submission is being judged (409)")
)

// BuyerOnly allows the move only to the bounty's buyer, its owner
// (invariant 1).
func BuyerOnly(_ context.Context, in jobstate.GuardInput) error {
	if in.Actor != in.Job.Owner {
		return ErrNotBuyer
	}
	return nil
}

// NotBuyer allows the move only to someone other than the buyer: a worker
// cannot deal with their own bounty (invariant 3).
func NotBuyer(_ context.Context, in jobstate.GuardInput) error {
	if in.Actor == in.Job.Owner {
		return ErrSelfDealing
	}
	return nil
}

// BuyerAndNothingJudging is T5's guard: the buyer, and no submission being
// judged (invariant 9), which it reads from the job's live executions.
func BuyerAndNothingJudging(ctx context.Context, in jobstate.GuardInput) error {
	if err := BuyerOnly(ctx, in); err != nil {
		return err
	}
	for _, x := range in.Executions {
		if x.Status.Live() {
			return ErrJudging
		}
	}
	return nil
}

// Plain returns hooks for running the machine without a marketplace: the
// buyer checks the job itself shows (BuyerOnly, NotBuyer,
// BuyerAndNothingJudging), and effects that do nothing. Terms, deposits,
// registrations and participants are the marketplace's; Plain checks none
// of them, so a worker may submit without joining first.
func Plain() Hooks {
	buyer := hook.Guard{Name: "buyer", Func: BuyerOnly}
	notBuyer := hook.Guard{Name: "not the buyer", Func: NotBuyer}
	none := func(context.Context, jobstate.Job) error { return nil }
	return Hooks{
		Create:        buyer,
		ListBounty:    hook.Effect{Name: "no listing", Func: none},
		Fund:          buyer,
		RecordDeposit: hook.Effect{Name: "no deposit record", Func: none},
		CancelOpen:    buyer,
		Join:          notBuyer,
		RecordJoin:    hook.Effect{Name: "no participant list", Func: none},
		Submit:        notBuyer,
		CancelFunded:  hook.Guard{Name: "buyer, nothing judging", Func: BuyerAndNothingJudging},
		RefundGuard:   buyer,
		Refund:        hook.Effect{Name: "no refund", Func: none},
	}
}
