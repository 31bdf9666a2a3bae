package jobstate

import "time"

// DefaultLeaseTTL is the lease duration used when a machine's policy and
// the claim request leave it unset.
const DefaultLeaseTTL = 30 * time.Second

// Policy holds the lifecycle settings of a machine. The zero Policy is
// valid: leases of DefaultLeaseTTL, one execution at a time, no retries,
// unclassified errors retryable, keys held forever.
type Policy struct {
	// LeaseTTL is how long a claim or heartbeat keeps a lease alive when the
	// request does not say. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MaxExecutions is how many executions of one job may hold live leases
	// at once. Zero means one. Above one, many workers may work on one job
	// at once; the job then stays in its ready state while claimed, and a
	// failed execution does not move the job.
	MaxExecutions int
	// MaxPerKey, when above zero, is how many executions of the machine's
	// jobs that share a concurrency key (NewJob.ConcurrencyKey) may hold
	// live leases at once, counted over every job of the machine with
	// that key: 1 makes a key's jobs run one at a time, in claim order. A
	// claim that would exceed it is never made: the store skips the job
	// (Claim, ClaimMany) or refuses the claim (ClaimJob: ErrKeyLimit),
	// atomically with the claim, so that no two processes can race past
	// it. An execution counts until its lease ends (the job finishes,
	// fails or is retried, or the sweep reclaims the expired lease). A job
	// without a key is not limited. Zero means no limit. The engine
	// refuses such a machine on a store that is not a KeyLimiter.
	MaxPerKey int
	// Retry bounds and spaces retries; a job may override it at creation.
	Retry RetryPolicy
	// Classify gives a class to errors that carry none (see ClassOf). Nil
	// means every unclassified error is retryable.
	Classify Classifier
	// ClassifyName names the classifier in the JSON form. Optional.
	ClassifyName string
	// RequireStart refuses a commit from an execution that was never
	// started (Engine.Start): the execution must go LEASED → IN_PROGRESS →
	// COMMITTED, never LEASED → COMMITTED.
	RequireStart bool
	// FailOnLeaseLoss makes an expired lease a permanent failure of the job
	// instead of a retryable one.
	FailOnLeaseLoss bool
	// LazyExpiry expires a job past its deadline as soon as anything
	// touches it (Engine.Get or any operation, in a write of its own before
	// the operation), not only when swept.
	LazyExpiry bool
	// DerivedState declares that the job's state is a projection of its
	// executions: the table may hold lifecycle rules only, the
	// job moves only when an execution does, and Engine.Fire is refused.
	DerivedState bool
	// Idempotency says when a job stops holding its idempotency key.
	Idempotency IdempotencyPolicy
	// RedriveFrom lists the terminal states (a dead-letter state) whose
	// jobs an operator may run again with Engine.Redrive.
	RedriveFrom []State
}

func (p Policy) withDefaults() Policy {
	if p.LeaseTTL == 0 {
		p.LeaseTTL = DefaultLeaseTTL
	}
	if p.MaxExecutions == 0 {
		p.MaxExecutions = 1
	}
	return p
}

func validatePolicy(spec *Spec, kinds map[State]StateSpec, p *problems) {
	pol := spec.Policy
	if pol.LeaseTTL < 0 {
		p.add("policy LeaseTTL is negative (%s)", pol.LeaseTTL)
	}
	if pol.LeaseTTL > MaxDuration {
		p.add("policy LeaseTTL %s is above the maximum %s", pol.LeaseTTL, MaxDuration)
	}
	if pol.MaxExecutions < 0 {
		p.add("policy MaxExecutions is negative (%d)", pol.MaxExecutions)
	}
	if pol.MaxPerKey < 0 {
		p.add("policy MaxPerKey is negative (%d)", pol.MaxPerKey)
	}
	if err := pol.Retry.validate(); err != nil {
		p.add("policy Retry: %v", err)
	}
	if pol.Retry == (RetryPolicy{}) {
		for i := range spec.Rules {
			if r := &spec.Rules[i]; r.Event == EventRetry {
				p.add("policy Retry is unset, so %s can never retry a failure: set Retry.MaxRetries (for example 3, or Unlimited) with a Backoff (for example ExponentialBackoff(time.Second, 2, time.Hour)); to retry no failure and keep the rule for snoozes, set a Backoff with MaxRetries 0", ruleName(i, r))
				break
			}
		}
	}
	if pol.Idempotency.Retention < 0 {
		p.add("policy Idempotency.Retention is negative (%s)", pol.Idempotency.Retention)
	}
	if pol.Idempotency.Retention > MaxDuration {
		p.add("policy Idempotency.Retention %s is above the maximum %s", pol.Idempotency.Retention, MaxDuration)
	}
	for _, s := range pol.Idempotency.ReleaseIn {
		if _, ok := kinds[s]; !ok {
			p.add("policy Idempotency.ReleaseIn names unknown state %q", s)
		}
	}
	for _, st := range pol.RedriveFrom {
		if s, ok := kinds[st]; !ok {
			p.add("policy RedriveFrom names unknown state %q", st)
		} else if s.Kind != KindTerminal {
			p.add("policy RedriveFrom names %s state %q; only terminal jobs are redriven", s.Kind, st)
		}
	}
	if pol.DerivedState {
		for i := range spec.Rules {
			r := &spec.Rules[i]
			if !IsLifecycle(r.Event) {
				p.add("%s: a machine with derived state moves only with its executions; user event %q is not allowed", ruleName(i, r), r.Event)
			}
		}
		if pol.MaxExecutions > 1 {
			p.add("policy DerivedState needs MaxExecutions of 1")
		}
	}
	names := make(map[string]bool)
	for i, ef := range spec.Effects {
		switch {
		case ef.Name == "":
			p.add("effect #%d has an empty name", i+1)
		case nameProblem(ef.Name) != "":
			p.add("effect #%d: its name %s", i+1, nameProblem(ef.Name))
		case names[ef.Name]:
			p.add("effect %q is declared twice", ef.Name)
		case ef.Run == nil:
			p.add("effect %q has no Run function", ef.Name)
		case ef.Name == RedriveEffect:
			p.add("effect %q: the name is reserved for Engine.Redrive's record", ef.Name)
		}
		names[ef.Name] = true
		for _, s := range ef.In {
			if _, ok := kinds[s]; !ok {
				p.add("effect %q allows unknown state %q", ef.Name, s)
			}
		}
	}
}
