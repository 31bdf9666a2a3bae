package main

import (
	"context"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/delivery"
)

// The job states of file delivery, as in its diagram (the literal
// definition, internal/machines/delivery).
const (
	Queued      = delivery.Queued
	Claimed     = delivery.Claimed
	Downloading = delivery.Downloading
	Streaming   = delivery.Streaming
	Delivered   = delivery.Delivered
	Failed      = delivery.Failed
	Cancelled   = delivery.Cancelled
	Expired     = delivery.Expired
)

// The user events of file delivery, fired by the worker through its lease
// (Engine.Advance). The diagram's other labels are the engine's lifecycle
// events: worker_claim(job_id) is claim, telegram_ack is succeed,
// non_retryable_error is fail, retryable_error is retry, heartbeat_timeout
// is abandon, user_cancel is cancel and ttl_expired is expire.
const (
	StartDownload    = delivery.StartDownload
	StreamToLocalAPI = delivery.StreamToLocalAPI
)

// MachineName is the name jobs of this example record.
const MachineName = delivery.Name

// Timing and limits of the bot.
const (
	// HeartbeatTimeout is the lifecycle's T: a job whose heartbeat_at is older
	// than T (strictly: heartbeat_at < now - T) is "stuck", and the
	// recovery takes it back. The lease lives T plus one nanosecond past
	// the last heartbeat (LeaseTTL), so that it lapses exactly when the
	// heartbeat becomes older than T, not at T itself.
	HeartbeatTimeout = delivery.HeartbeatTimeout
	// LeaseTTL is the lease length: the first instant at which a lease has
	// lapsed is the first at which heartbeat_at < now - T holds.
	LeaseTTL = delivery.LeaseTTL
	// HeartbeatEvery is the lifecycle's N: how often a worker renews its lease
	// while it transfers.
	HeartbeatEvery = 10 * time.Second
	// MaxAttempts is the lifecycle's attempt limit.
	MaxAttempts = delivery.MaxAttempts
	// QueueTTL is how long a job may wait in QUEUED before it expires.
	QueueTTL = time.Hour
	// MaxFileSize is the largest file the bot can send (2 GB).
	MaxFileSize = delivery.MaxFileSize
)

// Attempt is the lifecycle's attempt counter of a job, Job.RetryCount (see
// delivery.Attempt): 0 for a new job, +1 for every retryable_error and
// every heartbeat_timeout. A job goes back to QUEUED with attempt+1 while
// attempt < 3 and to FAILED once attempt is 3; one that comes back to
// QUEUED at attempt 3 is claimed and then refused at CLAIMED → DOWNLOADING
// by the guard, which the worker reports as a permanent failure, so no job
// is left in QUEUED with nothing able to claim it.
func Attempt(j jobstate.Job) int { return delivery.Attempt(j) }

// UserStatus is a user's status in the bot's user table.
type UserStatus = delivery.UserStatus

// The user statuses.
const (
	UserActive  = delivery.UserActive
	UserBlocked = delivery.UserBlocked
)

// DownloadArgs are the arguments of start_download: the user's status as
// the worker read it from the user table just before the move.
type DownloadArgs = delivery.DownloadArgs

// The refusals of the start_download guard.
var (
	ErrAttemptsSpent = delivery.ErrAttemptsSpent
	ErrUserBlocked   = delivery.ErrUserBlocked
)

// CanStartDownload is the guard of CLAIMED → DOWNLOADING: only if
// attempt < 3 and the user is ACTIVE.
func CanStartDownload(ctx context.Context, in jobstate.GuardInput) error {
	return delivery.CanStartDownload(ctx, in)
}

// Spec returns file delivery's job lifecycle, the literal definition of
// internal/machines/delivery, arrow for arrow as its diagram draws it, plus
// the arrows its written rules add (CLAIMED → FAILED; DOWNLOADING and
// STREAMING → QUEUED on a heartbeat timeout). The commit (telegram_ack)
// happens only in STREAMING, the one state with a succeed rule.
func Spec() jobstate.Spec { return delivery.Spec(delivery.Plain()) }

// IdempotencyKey is the lifecycle's idempotency key, exactly:
// the lowercase hex of sha256(user_id + ":" + file_id + ":" + request_nonce).
func IdempotencyKey(user, file, nonce string) string {
	return delivery.IdempotencyKey(user, file, nonce)
}

// Machine returns the validated Definition of Spec.
func Machine() (*jobstate.Definition, error) { return jobstate.NewDefinition(Spec()) }

// HTTPError is a failed call to Yandex Disk or to Telegram.
type HTTPError = delivery.HTTPError

// TimeoutError is a network timeout.
type TimeoutError = delivery.TimeoutError

// TooBigError is a file larger than MaxFileSize.
type TooBigError = delivery.TooBigError

// ErrTokenInvalid: the Yandex Disk token is still refused after a refresh;
// an administrator must step in.
var ErrTokenInvalid = delivery.ErrTokenInvalid

// Classify is file delivery's error taxonomy, as the machine's classifier
// (delivery.Classify):
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
func Classify(err error) (jobstate.ErrorClass, time.Duration) { return delivery.Classify(err) }
