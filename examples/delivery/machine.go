package main

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
)

// The job states of file delivery, as in its diagram.
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

// The user events of file delivery, fired by the worker through its lease
// (Engine.Advance). The diagram's other labels are the engine's lifecycle
// events: worker_claim(job_id) is claim, telegram_ack is succeed,
// non_retryable_error is fail, retryable_error is retry, heartbeat_timeout
// is abandon, user_cancel is cancel and ttl_expired is expire.
const (
	StartDownload    jobstate.Event = "start_download"
	StreamToLocalAPI jobstate.Event = "stream_to_local_api"
)

// MachineName is the name jobs of this example record.
const MachineName = "delivery"

// Timing and limits of the bot.
const (
	// HeartbeatTimeout is the lifecycle's T: a job whose heartbeat_at is older
	// than T (strictly: heartbeat_at < now - T) is "stuck", and the
	// recovery takes it back. The lease lives T plus one nanosecond past
	// the last heartbeat (LeaseTTL), so that it lapses exactly when the
	// heartbeat becomes older than T, not at T itself.
	HeartbeatTimeout = 30 * time.Second
	// LeaseTTL is the lease length: the first instant at which a lease has
	// lapsed is the first at which heartbeat_at < now - T holds.
	LeaseTTL = HeartbeatTimeout + time.Nanosecond
	// HeartbeatEvery is the lifecycle's N: how often a worker renews its lease
	// while it transfers.
	HeartbeatEvery = 10 * time.Second
	// MaxAttempts is the lifecycle's attempt limit.
	MaxAttempts = 3
	// QueueTTL is how long a job may wait in QUEUED before it expires.
	QueueTTL = time.Hour
	// MaxFileSize is the largest file the bot can send (2 GB).
	MaxFileSize int64 = 2 << 30
)

// Attempt is the lifecycle's attempt counter of a job: 0 for a new job, +1 for
// every retryable_error and every heartbeat_timeout. The engine keeps the
// same count as Job.RetryCount (each retry or abandon adds one), so that is
// what Attempt reads. Job.Attempt is another number: the count of
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
// attempt < 3 and the user is ACTIVE.
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

// Spec declares file delivery's job lifecycle, arrow for arrow as its diagram
// draws it, plus the arrows its written rules add:
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
func Spec() jobstate.Spec {
	return jobstate.Spec{
		Name: MachineName,
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
				Guard: CanStartDownload, GuardName: "attempt < 3 and user ACTIVE"},
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
				Backoff:    jobstate.ExponentialBackoff(5*time.Second, 2, time.Minute),
			},
			Classify:     Classify,
			ClassifyName: "Classify",
		},
	}
}

// IdempotencyKey is the lifecycle's idempotency key, exactly:
// the lowercase hex of sha256(user_id + ":" + file_id + ":" + request_nonce).
func IdempotencyKey(user, file, nonce string) string {
	sum := sha256.Sum256([]byte(user + ":" + file + ":" + nonce))
	return hex.EncodeToString(sum[:])
}

// Machine returns the validated Definition of Spec.
func Machine() (*jobstate.Definition, error) { return jobstate.NewDefinition(Spec()) }

// HTTPError is a failed call to Yandex Disk or to Telegram.
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

// ErrTokenInvalid: the Yandex Disk token is still refused after a refresh;
// an administrator must step in.
var ErrTokenInvalid = errors.New("yandex disk: invalid token after refresh")

// Classify is file delivery's error taxonomy, as the machine's classifier:
//
//   - non-retryable: access denied (403) or a user who is not ACTIVE, file
//     not found (404), file too big (> 2 GB), invalid token after refresh;
//     and the attempt limit reached;
//   - retryable: network timeouts, transient 5xx from Yandex Disk or
//     Telegram, and the temporary rate limit (429), retried after its
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

// retryAfter reads a Retry-After value in seconds (Telegram and Yandex Disk
// send seconds); an empty or malformed value gives 0, which keeps the
// backoff.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
