package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// errOdd is the refusal of generated guards.
var errOdd = errors.New("guard wants an even argument")

// evenArg is the guard of generated guarded rules: it allows the move when
// the call's argument is an even int. It is a pure function of its input.
func evenArg(_ context.Context, in jobstate.GuardInput) error {
	if n, ok := in.Args.(int); ok && n%2 == 0 {
		return nil
	}
	return errOdd
}

// genMachine draws a random valid single-execution machine: an optional
// initial state, 1-3 ready, 1-3 active and 0-2 waiting states, terminal
// states for each outcome it uses, every lifecycle rule the kinds need, and
// random extra user rules, some guarded.
func genMachine(t *rapid.T) (jobstate.Spec, []jobstate.Event) {
	st := func(prefix string, i int) jobstate.State { return jobstate.State(fmt.Sprintf("%s%d", prefix, i)) }
	nReady := rapid.IntRange(1, 3).Draw(t, "ready")
	nActive := rapid.IntRange(1, 3).Draw(t, "active")
	nWait := rapid.IntRange(0, nActive).Draw(t, "waiting")
	if nWait > 2 {
		nWait = 2
	}
	withInitial := rapid.Bool().Draw(t, "withInitial")
	failToWait := nWait > 0 && rapid.Bool().Draw(t, "failToWait")
	withExpire := rapid.Bool().Draw(t, "withExpire")
	maxRetries := rapid.SampledFrom([]int{0, 1, 2, 3, jobstate.Unlimited}).Draw(t, "maxRetries")

	spec := jobstate.Spec{Name: "gen", Policy: jobstate.Policy{
		LeaseTTL:        10 * time.Second,
		Retry:           jobstate.RetryPolicy{MaxRetries: maxRetries, Backoff: jobstate.FixedBackoff(time.Duration(rapid.IntRange(1, 5).Draw(t, "backoff")) * time.Second)},
		FailOnLeaseLoss: rapid.Bool().Draw(t, "failOnLeaseLoss"),
		LazyExpiry:      rapid.Bool().Draw(t, "lazyExpiry"),
	}}
	add := func(s jobstate.State, k jobstate.Kind, o jobstate.Outcome) {
		spec.States = append(spec.States, jobstate.StateSpec{Name: s, Kind: k, Outcome: o})
	}
	rule := func(from []jobstate.State, ev jobstate.Event, to jobstate.State) {
		spec.Rules = append(spec.Rules, jobstate.Rule{From: from, Event: ev, To: to})
	}
	one := func(s jobstate.State) []jobstate.State { return []jobstate.State{s} }
	pick := func(label, prefix string, n int) jobstate.State {
		return st(prefix, rapid.IntRange(0, n-1).Draw(t, label))
	}

	if withInitial {
		add("I", jobstate.KindInitial, "")
	}
	for i := 0; i < nReady; i++ {
		add(st("R", i), jobstate.KindReady, "")
	}
	for i := 0; i < nActive; i++ {
		add(st("A", i), jobstate.KindActive, "")
	}
	for i := 0; i < nWait; i++ {
		add(st("W", i), jobstate.KindWaiting, "")
	}
	add("S", jobstate.KindTerminal, jobstate.OutcomeSucceeded)
	needF := !(failToWait && nActive == 1)
	if needF {
		add("F", jobstate.KindTerminal, jobstate.OutcomeFailed)
	}
	add("C", jobstate.KindTerminal, jobstate.OutcomeCancelled)
	if withExpire {
		add("X", jobstate.KindTerminal, jobstate.OutcomeExpired)
	}
	if failToWait {
		add("D", jobstate.KindTerminal, jobstate.OutcomeDeadLettered)
	}
	if withInitial {
		rule(one("I"), "submit", "R0")
		rule(one("I"), jobstate.EventCancel, "C")
	} else {
		spec.Initial = "R0"
	}
	for i := 0; i < nReady; i++ {
		r := st("R", i)
		if i == 0 {
			rule(one(r), jobstate.EventClaim, "A0")
		} else {
			rule(one(st("R", i-1)), "shift", r)
			rule(one(r), jobstate.EventClaim, pick(fmt.Sprintf("claim%d", i), "A", nActive))
		}
		if i == 0 || rapid.Bool().Draw(t, fmt.Sprintf("cancelReady%d", i)) {
			rule(one(r), jobstate.EventCancel, "C")
		}
		if withExpire {
			rule(one(r), jobstate.EventExpire, "X")
		}
	}
	for i := 0; i < nActive; i++ {
		a := st("A", i)
		if i > 0 {
			rule(one(st("A", i-1)), "step", a)
		}
		if i == 0 || rapid.Bool().Draw(t, fmt.Sprintf("succeed%d", i)) {
			// Active states after the first may have no succeed rule (file
			// delivery's CLAIMED): a commit there is refused.
			rule(one(a), jobstate.EventSucceed, "S")
		}
		if i < nWait {
			rule(one(a), jobstate.EventRetry, st("W", i))
		} else {
			rule(one(a), jobstate.EventRetry, pick(fmt.Sprintf("retry%d", i), "R", nReady))
		}
		if rapid.Bool().Draw(t, fmt.Sprintf("abandon%d", i)) {
			rule(one(a), jobstate.EventAbandon, pick(fmt.Sprintf("abandonTo%d", i), "R", nReady))
		}
		if failToWait && i == 0 {
			rule(one(a), jobstate.EventFail, "W0")
		} else {
			rule(one(a), jobstate.EventFail, "F")
		}
		if rapid.Bool().Draw(t, fmt.Sprintf("cancelActive%d", i)) {
			rule(one(a), jobstate.EventCancel, "C")
		}
	}
	for i := 0; i < nWait; i++ {
		w := st("W", i)
		rule(one(w), jobstate.EventRequeue, pick(fmt.Sprintf("requeue%d", i), "R", nReady))
		if failToWait && i == 0 {
			rule(one(w), jobstate.EventExhaust, "D")
		}
	}
	// Extra user rules between non-active states, some guarded; a guarded
	// rule may share from+event with a later one.
	var nonActive []jobstate.State
	for _, s := range spec.States {
		if s.Kind == jobstate.KindReady || s.Kind == jobstate.KindInitial || s.Kind == jobstate.KindWaiting {
			nonActive = append(nonActive, s.Name)
		}
	}
	extra := rapid.IntRange(0, 3).Draw(t, "extra")
	for i := 0; i < extra; i++ {
		from := rapid.SampledFrom(nonActive).Draw(t, fmt.Sprintf("extraFrom%d", i))
		to := rapid.SampledFrom(append(nonActive, "C")).Draw(t, fmt.Sprintf("extraTo%d", i))
		if to == "I" {
			to = "C"
		}
		r := jobstate.Rule{From: one(from), Event: "poke", To: to, Guard: evenArg, GuardName: "even"}
		spec.Rules = append([]jobstate.Rule{r}, spec.Rules...)
	}
	if extra > 0 {
		// An unguarded fallback for poke from R0, after the guarded ones.
		rule(one("R0"), "poke", "C")
	}
	return spec, []jobstate.Event{"submit", "shift", "step", "poke", jobstate.EventCancel, "bogus"}
}
