package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// The registry's refusals and failures. Their codes are "guard_refused"
// when a guard returns them (the engine wraps them) and "unknown" when an
// effect does (the engine returns an effect's error as it is).
var (
	// ErrNotOwner is returned by the "owner_only" guard, and by
	// "owner_and_no_live_executions" when the actor is not the owner.
	ErrNotOwner = errors.New("owner_only: the actor is not the job's owner")
	// ErrOwner is returned by the "not_owner" guard.
	ErrOwner = errors.New("not_owner: the actor is the job's owner")
	// ErrOddArg is returned by the "even_arg" guard.
	ErrOddArg = errors.New("even_arg: args is not an even integer")
	// ErrLiveExecutions is returned by the "no_live_executions" guard, and
	// by "owner_and_no_live_executions" when the owner asks while an
	// execution is live.
	ErrLiveExecutions = errors.New("no_live_executions: the job has a live execution")
	// ErrAttemptLimit is returned by the "attempt_below_3" and
	// "retries_below_3" guards.
	ErrAttemptLimit = errors.New("attempt_below_3: the job's attempt is 3 or more")
	// ErrFailEffect is returned by the "fail_effect" effect.
	ErrFailEffect = errors.New("fail_effect: the effect failed")
)

// RegistryErrors maps the names a vector's wraps expectation uses to the
// registry's errors: each guard's refusal by the guard's name, and the
// "fail_effect" effect's error. A new map on each call.
func RegistryErrors() map[string]error {
	return map[string]error{
		"owner_only":         ErrNotOwner,
		"not_owner":          ErrOwner,
		"even_arg":           ErrOddArg,
		"no_live_executions": ErrLiveExecutions,
		"attempt_below_3":    ErrAttemptLimit,
		"fail_effect":        ErrFailEffect,
	}
}

// NewRegistry returns the fixed conformance registry that every vector's
// definition is parsed with (docs/conformance.md §3 gives the exact
// semantics other implementations must reproduce):
//
// Guards:
//   - "owner_only": allows when the actor equals the job's owner.
//   - "not_owner": allows when the actor differs from the job's owner.
//   - "even_arg": allows when args is a number with an even integral value.
//   - "no_live_executions": allows when no execution of the job is live
//     (LEASED, IN_PROGRESS or COMMITTED).
//   - "owner_and_no_live_executions": allows when "owner_only" and then
//     "no_live_executions" both allow.
//   - "attempt_below_3": allows when the job's attempt counter is below 3.
//   - "retries_below_3": allows when the job's retry count is below 3.
//
// Effects:
//   - "count": succeeds and adds one to the job's counter of "count" runs,
//     which vectors assert with effect_count.
//   - "fail_effect": always fails with ErrFailEffect.
//
// Classifiers:
//   - "http": "403" and "404" permanent; "429" retryable after 7s; any
//     other message unclassified (so retryable, with the backoff).
//   - "prefix": a message beginning "permanent:" permanent, one beginning
//     "retryable:" retryable, any other unclassified.
//
// The functions are package-level and stateless: counts are kept by the
// runner, which passes its counter in the context the engine hands to
// effects. Outside a runner "count" succeeds and counts nothing. Each call
// returns new maps over the same functions.
func NewRegistry() jobstate.Registry {
	return jobstate.Registry{
		Guards: map[string]jobstate.Guard{
			"owner_only":                   ownerOnly,
			"not_owner":                    notOwner,
			"even_arg":                     evenArg,
			"no_live_executions":           noLiveExecutions,
			"owner_and_no_live_executions": ownerAndNoLiveExecutions,
			"attempt_below_3":              attemptBelow3,
			"retries_below_3":              retriesBelow3,
		},
		Effects: map[string]jobstate.EffectFunc{
			"count":       countEffect,
			"fail_effect": failEffect,
		},
		Classifiers: map[string]jobstate.Classifier{
			"http":   httpClassifier,
			"prefix": prefixClassifier,
		},
	}
}

func ownerOnly(_ context.Context, in jobstate.GuardInput) error {
	if in.Actor != in.Job.Owner {
		return ErrNotOwner
	}
	return nil
}

func notOwner(_ context.Context, in jobstate.GuardInput) error {
	if in.Actor == in.Job.Owner {
		return ErrOwner
	}
	return nil
}

func ownerAndNoLiveExecutions(ctx context.Context, in jobstate.GuardInput) error {
	if err := ownerOnly(ctx, in); err != nil {
		return err
	}
	return noLiveExecutions(ctx, in)
}

func evenArg(_ context.Context, in jobstate.GuardInput) error {
	if even(in.Args) {
		return nil
	}
	return ErrOddArg
}

// even reports whether v is a number with an even integral value. The
// runner passes JSON numbers as json.Number, whose decimal text is judged
// exactly, however large or long: 1e400 and 18446744073709551616 are even,
// 9223372036854775809 is odd, 1e-400 is no integer.
func even(v any) bool {
	switch n := v.(type) {
	case json.Number:
		return evenDecimal(string(n))
	case int:
		return n%2 == 0
	case int64:
		return n%2 == 0
	case float64:
		return evenFloat(n)
	}
	return false
}

func evenFloat(f float64) bool {
	return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) && math.Mod(f, 2) == 0
}

// evenDecimal reports whether the JSON number s (sign, digits, optional
// fraction, optional exponent) is an even integer, reading its digits
// exactly: the value is an integer when no non-zero digit lies right of
// the decimal point once the exponent has moved it, and even when its
// units digit is.
func evenDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	// point is where the decimal point falls in digits: the value is
	// digits[:point] . digits[point:] (zeros beyond either end).
	shift := 0
	if exp != "" {
		neg := strings.HasPrefix(exp, "-")
		e := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(exp, "-"), "+"), "0")
		if strings.Trim(e, "0123456789") != "" {
			return false
		}
		// An exponent beyond the digits' count only adds zeros on one
		// side: clamp it to keep the arithmetic small.
		limit := len(digits) + 2
		if len(e) > 9 {
			shift = limit
		} else {
			n, _ := strconv.Atoi("0" + e)
			shift = min(n, limit)
		}
		if neg {
			shift = -shift
		}
	}
	point := len(intPart) + shift
	for i := max(point, 0); i < len(digits); i++ {
		if digits[i] != '0' {
			return false // a fraction
		}
	}
	if point <= 0 || point > len(digits) {
		return true // zero, or the units digit is a zero the exponent added
	}
	return (digits[point-1]-'0')%2 == 0
}

func noLiveExecutions(_ context.Context, in jobstate.GuardInput) error {
	for _, x := range in.Executions {
		if x.Status.Live() {
			return ErrLiveExecutions
		}
	}
	return nil
}

// retriesBelow3 allows while the job's RetryCount is below 3: file
// delivery's "attempt < 3", whose attempt counts the retries.
func retriesBelow3(_ context.Context, in jobstate.GuardInput) error {
	if in.Job.RetryCount >= 3 {
		return ErrAttemptLimit
	}
	return nil
}

func attemptBelow3(_ context.Context, in jobstate.GuardInput) error {
	if in.Job.Attempt >= 3 {
		return ErrAttemptLimit
	}
	return nil
}

func countEffect(ctx context.Context, job jobstate.Job) error {
	if c, ok := ctx.Value(countsKey{}).(*counts); ok {
		c.add(job.ID, "count")
	}
	return nil
}

func failEffect(context.Context, jobstate.Job) error { return ErrFailEffect }

func httpClassifier(err error) (jobstate.ErrorClass, time.Duration) {
	switch err.Error() {
	case "403", "404":
		return jobstate.ClassPermanent, 0
	case "429":
		return jobstate.ClassRetryable, 7 * time.Second
	}
	return jobstate.ClassNone, 0
}

func prefixClassifier(err error) (jobstate.ErrorClass, time.Duration) {
	switch msg := err.Error(); {
	case strings.HasPrefix(msg, "permanent:"):
		return jobstate.ClassPermanent, 0
	case strings.HasPrefix(msg, "retryable:"):
		return jobstate.ClassRetryable, 0
	}
	return jobstate.ClassNone, 0
}

// countsKey carries a *counts in the context of a vector's engine calls.
type countsKey struct{}

// counts records how often each registry effect succeeded, per job.
type counts struct {
	mu sync.Mutex
	n  map[uuid.UUID]map[string]int
}

func (c *counts) add(job uuid.UUID, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[uuid.UUID]map[string]int)
	}
	if c.n[job] == nil {
		c.n[job] = make(map[string]int)
	}
	c.n[job][name]++
}

func (c *counts) get(job uuid.UUID, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[job][name]
}

// snapshot copies every count, for the unchanged-on-error check.
func (c *counts) snapshot() map[uuid.UUID]map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uuid.UUID]map[string]int, len(c.n))
	for id, m := range c.n {
		cp := make(map[string]int, len(m))
		for k, v := range m {
			cp[k] = v
		}
		out[id] = cp
	}
	return out
}
