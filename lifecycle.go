package jobstate

import "fmt"

// The lifecycle events. The engine fires them from its own operations; a
// machine gives each a meaning by ordinary rules of its table, from and to
// its own states. NewDefinition checks that every lifecycle rule joins
// states of the right kinds, and that every state a lifecycle operation can
// reach has the rules that operation needs.
const (
	// EventClaim moves a ready job to an active state when a worker claims it
	// (Engine.Claim, Engine.ClaimJob). On a machine that allows several
	// concurrent executions it may instead stay in its ready state.
	EventClaim Event = "claim"
	// EventSucceed finishes a job whose execution committed: to a terminal
	// state with outcome succeeded.
	EventSucceed Event = "succeed"
	// EventRetry follows a retryable failure while retries remain: from an
	// active state to a waiting or ready state, with not-before set to the
	// backoff.
	EventRetry Event = "retry"
	// EventFail follows a permanent failure, or a retryable one when retries
	// are spent: to a terminal state, or to a waiting state from which
	// EventExhaust then leads on (running → failed → dead_letter).
	EventFail Event = "fail"
	// EventExhaust leaves a waiting state for a terminal one when the job
	// reached it through EventFail; it is fired in the same atomic write.
	EventExhaust Event = "exhaust"
	// EventRequeue moves a waiting job back to a ready state once its
	// not-before has passed (fired by Engine.Sweep).
	EventRequeue Event = "requeue"
	// EventAbandon returns a job whose lease expired without a commit to a
	// ready or waiting state (a heartbeat timeout). Where a state has
	// no abandon rule, the sweep treats the lost lease as a retryable failure
	// and uses EventRetry.
	EventAbandon Event = "abandon"
	// EventExpire ends a job past its deadline: to a terminal state with
	// outcome expired.
	EventExpire Event = "expire"
	// EventCancel ends a job on request (Engine.Cancel): to a terminal state.
	EventCancel Event = "cancel"
)

// lifecycleEvents lists the events that only the engine's operations fire.
var lifecycleEvents = [...]Event{EventClaim, EventSucceed, EventRetry, EventFail, EventExhaust, EventRequeue, EventAbandon, EventExpire}

// IsLifecycle reports whether ev is fired only by the engine's own
// operations (claim, succeed, retry, fail, exhaust, requeue, abandon,
// expire). Engine.Fire refuses those; EventCancel may be fired by users.
func IsLifecycle(ev Event) bool {
	for _, e := range lifecycleEvents {
		if e == ev {
			return true
		}
	}
	return false
}

func validateLifecycle(spec *Spec, kinds map[State]StateSpec, p *problems) {
	concurrent := spec.Policy.MaxExecutions > 1
	has := make(map[State]map[Event]bool)
	for i := range spec.Rules {
		r := &spec.Rules[i]
		to, ok := kinds[r.To]
		if !ok {
			continue
		}
		for _, f := range r.From {
			from, ok := kinds[f]
			if !ok {
				continue
			}
			if has[f] == nil {
				has[f] = make(map[Event]bool)
			}
			has[f][r.Event] = true
			if msg := lifecycleProblem(r.Event, from, to, concurrent); msg != "" {
				p.add("%s: %s", ruleName(i, r), msg)
			}
		}
		if r.Event == EventSucceed && (r.Guard != nil || r.GuardName != "") {
			p.add("%s: a %q rule cannot be guarded: a committed job must always be able to finish", ruleName(i, r), EventSucceed)
		}
	}

	failTargets := make(map[State]bool)
	for _, r := range spec.Rules {
		if r.Event == EventFail {
			if to, ok := kinds[r.To]; ok && to.Kind == KindWaiting {
				failTargets[r.To] = true
			}
		}
	}
	for _, s := range spec.States {
		ev := has[s.Name]
		switch s.Kind {
		case KindReady:
			if !ev[EventClaim] {
				p.add("ready state %q has no %q rule: nothing could ever claim it", s.Name, EventClaim)
			}
		case KindWaiting:
			if !ev[EventRequeue] {
				p.add("waiting state %q has no %q rule: a parked job could never become ready", s.Name, EventRequeue)
			}
			if failTargets[s.Name] && !ev[EventExhaust] {
				p.add("waiting state %q is reached by %q but has no %q rule for when retries are spent", s.Name, EventFail, EventExhaust)
			}
		case KindActive:
			if !ev[EventFail] {
				p.add("active state %q has no %q rule: a permanent failure, or a lost lease with retries spent, could not be recorded", s.Name, EventFail)
			}
			if spec.Policy.Retry.MaxRetries != 0 && !ev[EventRetry] && !ev[EventAbandon] {
				p.add("active state %q has no %q or %q rule, but the retry policy allows retries", s.Name, EventRetry, EventAbandon)
			}
		}
	}
}

// lifecycleProblem says what is wrong with a rule for ev from one state to
// another, or "" when the kinds fit.
func lifecycleProblem(ev Event, from, to StateSpec, concurrent bool) string {
	// Only a claim or a move under a lease may enter an active state.
	if to.Kind == KindActive && ev != EventClaim && from.Kind != KindActive {
		return fmt.Sprintf("enters active state %q from %s state %q; only %q (or a move from another active state) can, since an active job holds a lease", to.Name, from.Kind, from.Name, EventClaim)
	}
	switch ev {
	case EventClaim:
		if from.Kind != KindReady {
			return fmt.Sprintf("%q must leave a ready state, not %s state %q", ev, from.Kind, from.Name)
		}
		if to.Kind == KindActive || (concurrent && to.Name == from.Name) {
			return ""
		}
		if to.Name == from.Name {
			return fmt.Sprintf("%q stays in %q, which only a machine allowing several concurrent executions (Policy.MaxExecutions > 1) may do", ev, to.Name)
		}
		return fmt.Sprintf("%q must enter an active state, not %s state %q", ev, to.Kind, to.Name)
	case EventSucceed:
		if to.Kind != KindTerminal || to.Outcome != OutcomeSucceeded {
			return fmt.Sprintf("%q must enter a terminal state with outcome %q", ev, OutcomeSucceeded)
		}
		if from.Kind != KindActive && !(concurrent && from.Kind == KindReady) {
			return fmt.Sprintf("%q must leave an active state, not %s state %q", ev, from.Kind, from.Name)
		}
	case EventRetry, EventAbandon:
		if from.Kind != KindActive {
			return fmt.Sprintf("%q must leave an active state, not %s state %q", ev, from.Kind, from.Name)
		}
		if to.Kind != KindWaiting && to.Kind != KindReady {
			return fmt.Sprintf("%q must enter a waiting or ready state, not %s state %q", ev, to.Kind, to.Name)
		}
	case EventFail:
		if from.Kind != KindActive {
			return fmt.Sprintf("%q must leave an active state, not %s state %q", ev, from.Kind, from.Name)
		}
		if to.Kind == KindWaiting {
			return ""
		}
		if to.Kind != KindTerminal || to.Outcome == OutcomeSucceeded {
			return fmt.Sprintf("%q must enter a terminal state whose outcome is not %q, or a waiting state", ev, OutcomeSucceeded)
		}
	case EventExhaust:
		if from.Kind != KindWaiting {
			return fmt.Sprintf("%q must leave a waiting state, not %s state %q", ev, from.Kind, from.Name)
		}
		if to.Kind != KindTerminal || to.Outcome == OutcomeSucceeded {
			return fmt.Sprintf("%q must enter a terminal state whose outcome is not %q", ev, OutcomeSucceeded)
		}
	case EventRequeue:
		if from.Kind != KindWaiting || to.Kind != KindReady {
			return fmt.Sprintf("%q must lead from a waiting state to a ready state", ev)
		}
	case EventExpire:
		if to.Kind != KindTerminal || to.Outcome != OutcomeExpired {
			return fmt.Sprintf("%q must enter a terminal state with outcome %q", ev, OutcomeExpired)
		}
	case EventCancel:
		if to.Kind != KindTerminal || to.Outcome == OutcomeSucceeded {
			return fmt.Sprintf("%q must enter a terminal state whose outcome is not %q", ev, OutcomeSucceeded)
		}
	}
	return ""
}
