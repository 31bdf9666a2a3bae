package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jobstate/jobstate"
)

// The job states of seed 004, as in its diagram.
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

// The user events of seed 004, fired by the worker through its lease
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
	// HeartbeatTimeout is the seed's T: a job whose heartbeat_at is older
	// than T is "stuck", and its lease has lapsed (the lease lives T past
	// the last heartbeat), so the recovery sweep takes it back.
	HeartbeatTimeout = 30 * time.Second
	// HeartbeatEvery is the seed's N: how often a worker renews its lease
	// while it transfers.
	HeartbeatEvery = 10 * time.Second
	// MaxAttempts is the seed's attempt limit.
	MaxAttempts = 3
	// QueueTTL is how long a job may wait in QUEUED before it expires.
	QueueTTL = time.Hour
	// MaxFileSize is the largest file the bot can send (2 GB).
	MaxFileSize int64 = 2 << 30
)

// Attempt is the seed's attempt counter of a job: 0 for a new job, +1 for
// every retryable_error and every heartbeat_timeout. The engine keeps the
// same count as Job.RetryCount (each retry or abandon adds one), so that is
// what Attempt reads. Job.Attempt is another number: the count of
// executions started, the current one included (the lease's fencing
// token), which is Attempt+1 while a job is held.
//
// The seed's limit of three attempts maps onto the retry policy as
// MaxRetries = MaxAttempts-1 = 2: a job whose attempts keep failing
// retryably is retried after its first and second failure (attempt 1,
// then 2) and fails after its third, so it runs at most 3 times and
// "attempt < 3" holds at every start_download. The guard still checks it:
// it is a rule of the table, which a per-job retry override
// (NewJob.Retry) cannot pass.
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

// Spec declares seed 004's job lifecycle, arrow for arrow as its diagram
// draws it, plus CLAIMED → FAILED: the diagram omits it, but the seed's
// rules reach FAILED from any active state ("... -> FAILED: if attempt >= 3
// or a non-retryable error", and recovery fails a CLAIMED job whose
// attempts are spent), and the engine needs it to end a job whose
// start_download was refused.
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
			{From: []jobstate.State{Claimed}, Event: jobstate.EventAbandon, To: Queued,
				Description: "heartbeat_timeout (attempt+1)"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventCancel, To: Cancelled,
				Description: "user_cancel"},
			{From: []jobstate.State{Queued}, Event: jobstate.EventExpire, To: Expired,
				Description: "ttl_expired"},
			{From: []jobstate.State{Claimed}, Event: jobstate.EventFail, To: Failed,
				Description: "start_download refused, or heartbeat_timeout with attempts spent"},
		},
		Policy: jobstate.Policy{
			LeaseTTL: HeartbeatTimeout,
			Retry: jobstate.RetryPolicy{
				MaxRetries: MaxAttempts - 1, // see Attempt
				Backoff:    jobstate.ExponentialBackoff(5*time.Second, 2, time.Minute),
			},
			Classify:     Classify,
			ClassifyName: "Classify",
		},
	}
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

// Classify is seed 004's error taxonomy, as the machine's classifier:
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
