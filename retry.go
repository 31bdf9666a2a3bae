package jobstate

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Unlimited as RetryPolicy.MaxRetries allows retries without bound. It must
// be chosen explicitly: the zero MaxRetries means no retries at all.
const Unlimited = -1

// RetryPolicy bounds and spaces the retries of a job.
type RetryPolicy struct {
	// MaxRetries is how many failures may be retried: a job failing
	// retryably every time runs MaxRetries+1 attempts. 0 means none;
	// Unlimited (-1) means without bound.
	MaxRetries int
	// Backoff spaces the retries. The zero Backoff retries at once.
	Backoff Backoff
}

// RetryOverride changes one job's retry settings field by field
// (NewJob.Retry): a nil field keeps the machine's setting, so that
// overriding the backoff alone keeps the machine's MaxRetries.
type RetryOverride struct {
	// MaxRetries, when set, replaces the machine's RetryPolicy.MaxRetries.
	MaxRetries *int
	// Backoff, when set, replaces the machine's backoff.
	Backoff *Backoff
}

// Retries returns a pointer to n, for RetryOverride.MaxRetries.
func Retries(n int) *int { return &n }

func (r RetryPolicy) validate() error {
	if r.MaxRetries < Unlimited {
		return fmt.Errorf("MaxRetries %d is below Unlimited (-1)", r.MaxRetries)
	}
	return r.Backoff.validate()
}

// BackoffKind names a backoff schedule.
type BackoffKind string

// The backoff schedules.
const (
	// BackoffNone retries at once.
	BackoffNone BackoffKind = ""
	// BackoffFixed waits Initial before every retry.
	BackoffFixed BackoffKind = "fixed"
	// BackoffExponential waits Initial × Factor^(n-1) before retry n, capped
	// at Max.
	BackoffExponential BackoffKind = "exponential"
)

// Jitter names how a delay is randomised.
type Jitter string

// The jitter modes. With a random draw r in [0, 1) and computed delay d:
const (
	// JitterNone waits exactly d.
	JitterNone Jitter = ""
	// JitterFull waits r × d.
	JitterFull Jitter = "full"
	// JitterEqual waits d/2 + r × d/2.
	JitterEqual Jitter = "equal"
)

// Backoff is a delay schedule. It is plain data, so it has the same form in
// Go and in the JSON form of a definition.
type Backoff struct {
	Kind    BackoffKind
	Initial time.Duration
	// Factor multiplies the delay after each retry (exponential only; 0
	// means 2).
	Factor float64
	// Max caps the delay (exponential only; 0 means DefaultMaxBackoff).
	Max    time.Duration
	Jitter Jitter
}

// FixedBackoff waits d before every retry.
func FixedBackoff(d time.Duration) Backoff { return Backoff{Kind: BackoffFixed, Initial: d} }

// ExponentialBackoff waits initial, then initial×factor, ... capped at max.
func ExponentialBackoff(initial time.Duration, factor float64, max time.Duration) Backoff {
	return Backoff{Kind: BackoffExponential, Initial: initial, Factor: factor, Max: max}
}

// WithJitter returns b randomised by j.
func (b Backoff) WithJitter(j Jitter) Backoff { b.Jitter = j; return b }

func (b Backoff) validate() error {
	switch b.Kind {
	case BackoffNone, BackoffFixed, BackoffExponential:
	default:
		return fmt.Errorf("unknown backoff kind %q", b.Kind)
	}
	switch b.Jitter {
	case JitterNone, JitterFull, JitterEqual:
	default:
		return fmt.Errorf("unknown jitter %q", b.Jitter)
	}
	switch {
	case b.Initial < 0:
		return fmt.Errorf("backoff Initial is negative (%s)", b.Initial)
	case b.Max < 0:
		return fmt.Errorf("backoff Max is negative (%s)", b.Max)
	case b.Initial > MaxDuration:
		return fmt.Errorf("backoff Initial %s is above the maximum %s", b.Initial, MaxDuration)
	case b.Max > MaxDuration:
		return fmt.Errorf("backoff Max %s is above the maximum %s", b.Max, MaxDuration)
	case b.Factor < 0 || math.IsNaN(b.Factor) || math.IsInf(b.Factor, 0):
		return fmt.Errorf("backoff Factor %v is not a finite non-negative number", b.Factor)
	case b.Factor != 0 && b.Factor < 1:
		return fmt.Errorf("backoff Factor %v is below 1: delays would shrink", b.Factor)
	case b.Kind != BackoffNone && b.Initial == 0:
		return fmt.Errorf("backoff %q needs an Initial delay", b.Kind)
	}
	return nil
}

// Delay returns the wait before retry n (n >= 1), randomised by the draw r
// in [0, 1) when the backoff has jitter. It never overflows and is never
// negative: exponential delays saturate at Max, or at DefaultMaxBackoff
// when Max is zero; a draw outside [0, 1), NaN included, counts as the
// nearest value inside (NaN as 0).
func (b Backoff) Delay(n int, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	var d time.Duration
	switch b.Kind {
	case BackoffFixed:
		d = b.Initial
	case BackoffExponential:
		f := b.Factor
		if f == 0 {
			f = 2
		}
		x := float64(b.Initial) * math.Pow(f, float64(n-1))
		if x >= float64(math.MaxInt64) || math.IsInf(x, 0) || math.IsNaN(x) {
			d = time.Duration(math.MaxInt64)
		} else {
			d = time.Duration(x)
		}
		max := b.Max
		if max == 0 {
			max = DefaultMaxBackoff
		}
		if d > max {
			d = max
		}
	default:
		return 0
	}
	switch {
	case !(r >= 0): // negative or NaN
		r = 0
	case r >= 1:
		r = math.Nextafter(1, 0)
	}
	d = clampDelay(d)
	switch b.Jitter {
	case JitterFull:
		d = time.Duration(float64(d) * r)
	case JitterEqual:
		d = d/2 + time.Duration(float64(d/2)*r)
	}
	return d
}

// Classifier gives a class to an error that carries none, and for
// ClassRetryable an optional delay overriding the backoff (0 to keep it).
// Return ClassNone to fall back to the default (retryable).
type Classifier func(err error) (ErrorClass, time.Duration)

// classifiedError is an error that carries its class.
type classifiedError struct {
	err   error
	class ErrorClass
	after time.Duration
}

func (e *classifiedError) Error() string { return e.err.Error() }
func (e *classifiedError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the job fails without retrying.
// errors.Is and errors.As still see err. A nil err gives nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: ClassPermanent}
}

// Retryable marks err as retryable: the job retries while retries remain.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: ClassRetryable}
}

// RetryAfter marks err as retryable after d (an HTTP 429 with
// Retry-After), instead of the backoff's delay; a d of zero keeps the
// backoff.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: ClassRetryable, after: clampDelay(d)}
}

// ClassOf returns the class of err and any retry delay it asks for: the
// class given by Permanent, Retryable or RetryAfter if err wraps one (the
// outermost wins); else the classifier's answer; else ClassRetryable, the
// documented default for unclassified errors (context.DeadlineExceeded
// among them).
func ClassOf(err error, classify Classifier) (ErrorClass, time.Duration) {
	var ce *classifiedError
	if errors.As(err, &ce) {
		return ce.class, ce.after
	}
	if classify != nil {
		if c, after := classify(err); c == ClassRetryable || c == ClassPermanent {
			return c, clampDelay(after)
		}
	}
	return ClassRetryable, 0
}

// clampDelay brings a requested retry delay into [0, MaxDuration].
func clampDelay(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > MaxDuration:
		return MaxDuration
	}
	return d
}
