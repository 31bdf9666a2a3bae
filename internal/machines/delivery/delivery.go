// Package delivery is the literal definition of the file delivery
// lifecycle: a job is QUEUED, atomically CLAIMED by a worker, DOWNLOADING
// then STREAMING under the same lease, kept alive by heartbeats, and
// DELIVERED on the messenger's acknowledgement. A retryable error sends it
// back to QUEUED with attempt+1, as does a heartbeat older than T; a
// non-retryable error, or attempt 3, fails it; a job may start downloading
// only while attempt < 3 and its user is ACTIVE. A queued job may be
// cancelled by its user or expire after its TTL.
//
// The example program examples/delivery, the library's tests, the store
// suite and the conformance vectors run this definition.
package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// Name is the machine's name.
const Name = "delivery"

// The job states, as in the lifecycle's diagram.
const (
	Queued      jobstate.State = "QUEUED"
	Claimed     jobstate.State = "CLAIMED"
	Downloading jobstate.State = "DOWNLOADING"
	Streaming   jobstate.State = "STREAMING"
	Delivered   jobstate.State = "DELIVERED"
	Failed      jobstate.State = "FAILED"
	Cancelled   jobstate.State = "CANCELLED"
	Expired     jobstate.State = "EXPIRED"
)

// The user events, fired by the worker through its lease (Engine.Advance).
// The diagram's other labels are the engine's lifecycle events:
// worker_claim(job_id) is claim, telegram_ack is succeed,
// non_retryable_error is fail, retryable_error is retry, heartbeat_timeout
// is abandon, user_cancel is cancel and ttl_expired is expire.
const (
	StartDownload    jobstate.Event = "start_download"
	StreamToLocalAPI jobstate.Event = "stream_to_local_api"
)

// Timing and limits.
const (
	// HeartbeatTimeout is the lifecycle's T: a job whose heartbeat_at is
	// older than T (strictly: heartbeat_at < now - T) is "stuck", and
	// recovery takes it back.
	HeartbeatTimeout = 30 * time.Second
	// LeaseTTL is the lease length, T plus one nanosecond: a lease lapses
	// at the first instant at which heartbeat_at < now - T holds, not when
	// the heartbeat is exactly T old.
	LeaseTTL = HeartbeatTimeout + time.Nanosecond
	// MaxAttempts is the lifecycle's attempt limit.
	MaxAttempts = 3
	// MaxFileSize is the largest file that can be sent (2 GB).
	MaxFileSize int64 = 2 << 30
)

// Backoff is the delay before a retried job is claimable again:
// exponential from 5 s, doubling, capped at one minute. A rate limit's
// Retry-After replaces it.
func Backoff() jobstate.Backoff {
	return jobstate.ExponentialBackoff(5*time.Second, 2, time.Minute)
}

// Attempt is the lifecycle's attempt counter of a job: 0 for a new job, +1
// for every retryable_error and every heartbeat_timeout. The engine keeps
// the same count as Job.RetryCount (each retry or abandon adds one), so
// that is what Attempt reads. Job.Attempt is another number: the count of
// executions started, the current one included (the lease's fencing
// token).
//
// The lifecycle's rules map onto the retry policy as MaxRetries =
// MaxAttempts = 3: a retryable error or a heartbeat timeout goes back to
// QUEUED with attempt+1 while attempt < 3 (the engine retries while
// RetryCount < MaxRetries), and to FAILED once attempt is 3. A job that
// comes back to QUEUED at attempt 3 is claimed like any other and then
// refused at CLAIMED → DOWNLOADING by the guard (attempt < 3), which the
// worker reports as a permanent failure: CLAIMED → FAILED. So a job
// downloads at most three times, and no job is left in QUEUED with
// nothing able to claim it.
func Attempt(j jobstate.Job) int { return j.RetryCount }

// UserStatus is a user's status in the bot's user table.
type UserStatus string

// The user statuses.
const (
	UserActive  UserStatus = "ACTIVE"
	UserBlocked UserStatus = "BLOCKED"
)

// DownloadArgs are the arguments of start_download: the user's status as
// the worker read it from the user table just before the move.
type DownloadArgs struct {
	User UserStatus
}

// The refusals of the start_download guard.
var (
	ErrAttemptsSpent = errors.New("attempt limit reached")
	ErrUserBlocked   = errors.New("user is not ACTIVE")
)

// CanStartDownload is the guard of CLAIMED → DOWNLOADING: only if
// attempt < 3 and the user is ACTIVE (DownloadArgs).
func CanStartDownload(_ context.Context, in jobstate.GuardInput) error {
	if a := Attempt(in.Job); a >= MaxAttempts {
		return fmt.Errorf("%w: attempt %d, limit %d", ErrAttemptsSpent, a, MaxAttempts)
	}
	args, ok := in.Args.(DownloadArgs)
	if !ok {
		return fmt.Errorf("%w: no user status given", ErrUserBlocked)
	}
	if args.User != UserActive {
		return fmt.Errorf("%w: user is %q", ErrUserBlocked, args.User)
	}
	return nil
}

// IdempotencyKey is the lifecycle's idempotency key, exactly: the lowercase
// hex of sha256(user_id + ":" + file_id + ":" + request_nonce).
func IdempotencyKey(user, file, nonce string) string {
	sum := sha256.Sum256([]byte(user + ":" + file + ":" + nonce))
	return hex.EncodeToString(sum[:])
}

// HTTPError is a failed call to the file host or to the messenger.
type HTTPError struct {
	Service string
	Status  int
	// RetryAfter is the Retry-After header of a 429, in seconds.
	RetryAfter string
}

// Error names the service and the status.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d %s", e.Service, e.Status, http.StatusText(e.Status))
	if e.RetryAfter != "" {
		msg += " (Retry-After: " + e.RetryAfter + ")"
	}
	return msg
}

// TimeoutError is a network timeout.
type TimeoutError struct{ Op string }

// Error names the operation that timed out.
func (e *TimeoutError) Error() string { return e.Op + ": i/o timeout" }

// Timeout reports true, as net.Error's Timeout does for a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// TooBigError is a file larger than MaxFileSize.
type TooBigError struct {
	Name string
	Size int64
}

// Error names the file and its size.
func (e *TooBigError) Error() string {
	return fmt.Sprintf("file %s is too big: %d bytes > %d", e.Name, e.Size, MaxFileSize)
}

// ErrTokenInvalid: the file host's token is still refused after a refresh;
// an administrator must step in.
var ErrTokenInvalid = errors.New("yandex disk: invalid token after refresh")

// Classify is the lifecycle's error taxonomy, as the machine's classifier:
//
//   - non-retryable: access denied (403) or a user who is not ACTIVE, file
//     not found (404), file too big (> 2 GB), invalid token after refresh;
//     and the attempt limit reached;
//   - retryable: network timeouts, transient 5xx from the file host or the
//     messenger, and the temporary rate limit (429), retried after its
//     Retry-After delay when it gives one, else after the backoff.
//
// Any other error is left unclassified, which the engine treats as
// retryable.
func Classify(err error) (jobstate.ErrorClass, time.Duration) {
	var (
		he      *HTTPError
		big     *TooBigError
		timeout interface{ Timeout() bool }
	)
	switch {
	case errors.Is(err, ErrUserBlocked), errors.Is(err, ErrAttemptsSpent),
		errors.Is(err, ErrTokenInvalid), errors.As(err, &big):
		return jobstate.ClassPermanent, 0
	case errors.As(err, &he):
		switch {
		case he.Status == http.StatusForbidden, he.Status == http.StatusNotFound:
			return jobstate.ClassPermanent, 0
		case he.Status == http.StatusTooManyRequests:
			return jobstate.ClassRetryable, retryAfter(he.RetryAfter)
		case he.Status >= 500:
			return jobstate.ClassRetryable, 0
		}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return jobstate.ClassRetryable, 0
	}
	return jobstate.ClassNone, 0
}

// retryAfter reads a Retry-After value in seconds; an empty or malformed
// value gives 0, which keeps the backoff.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// Hooks are the functions the definition leaves to the program that runs
// it. Every one is required.
type Hooks struct {
	// StartDownload guards CLAIMED → DOWNLOADING: attempt < 3 and the
	// user ACTIVE.
	StartDownload hook.Guard
	// Classify is the error taxonomy.
	Classify hook.Classifier
}

// Plain returns the lifecycle's own hooks, which need no application:
// CanStartDownload and Classify.
func Plain() Hooks {
	return Hooks{
		StartDownload: hook.Guard{Name: "attempt < 3 and user ACTIVE", Func: CanStartDownload},
		Classify:      hook.Classifier{Name: "Classify", Func: Classify},
	}
}

// Spec returns the file delivery machine with h bound, arrow for arrow as
// the lifecycle's diagram draws it, plus the arrows its written rules add:
//
//   - CLAIMED → FAILED: "... -> FAILED if attempt >= 3 or a non-retryable
//     error" reaches FAILED from every held state, and recovery fails a
//     stale CLAIMED job whose attempts are spent; it also ends a job whose
//     start_download was refused (attempt 3, or a user who is not ACTIVE);
//   - DOWNLOADING, STREAMING → QUEUED on a heartbeat timeout: recovery
//     sends a stale DOWNLOADING or STREAMING job back to QUEUED with
//     attempt+1, recorded as the heartbeat timeout it is (the engine's
//     abandon, which it takes for a lost lease), not as a retryable error.
//
// The commit (telegram_ack) happens only in STREAMING, the one state with
// a succeed rule.
func Spec(h Hooks) jobstate.Spec {
	return jobstate.Spec{
		Name: Name,
		States: []jobstate.StateSpec{
			{Name: Queued, Kind: jobstate.KindReady, Description: "waiting for a worker"},
			{Name: Claimed, Kind: jobstate.KindActive, Description: "held by a worker"},
			{Name: Downloading, Kind: jobstate.KindActive, Description: "downloading from Yandex Disk"},
			{Name: Streaming, Kind: jobstate.KindActive, Description: "streaming to the local Bot API"},
			{Name: Delivered, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: Cancelled, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: Expired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired},
		},
		Initial: Queued,
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Claimed,
				Description: "worker_claim(job_id): atomically, writing heartbeat_at"},
			{From: []jobstate.State{Claimed}, Event: StartDownload, To: Downloading,
				Guard: h.StartDownload.Func, GuardName: h.StartDownload.Name},
			{From: []jobstate.State{Downloading}, Event: StreamToLocalAPI, To: Streaming},
			{From: []jobstate.State{Streaming}, Event: jobstate.EventSucceed, To: Delivered,
				Description: "telegram_ack"},
			{From: []jobstate.State{Downloading, Streaming}, Event: jobstate.EventFail, To: Failed,
				Description: "non_retryable_error, or a retryable one at attempt 3"},
			{From: []jobstate.State{Downloading, Streaming}, Event: jobstate.EventRetry, To: Queued,
				Description: "retryable_error (attempt+1), writing last_error"},
			{From: []jobstate.State{Claimed, Downloading, Streaming}, Event: jobstate.EventAbandon, To: Queued,
				Description: "heartbeat_timeout (attempt+1)"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventCancel, To: Cancelled,
				Description: "user_cancel"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventExpire, To: Expired,
				Description: "ttl_expired"},
			{From: []jobstate.State{Claimed}, Event: jobstate.EventFail, To: Failed,
				Description: "start_download refused (attempt 3, user not ACTIVE), or heartbeat_timeout at attempt 3"},
		},
		Policy: jobstate.Policy{
			LeaseTTL: LeaseTTL,
			Retry: jobstate.RetryPolicy{
				MaxRetries: MaxAttempts, // see Attempt
				Backoff:    Backoff(),
			},
			Classify:     h.Classify.Func,
			ClassifyName: h.Classify.Name,
		},
	}
}
