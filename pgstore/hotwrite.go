package pgstore

import (
	"fmt"
	"slices"

	"github.com/jobstate/jobstate"
)

// Hot writes: a claim, a heartbeat or a commit changes a job's state and
// lease, its last execution and a few instants, and leaves the rest of
// its row (its payload, policy, keys, creation and schedule, and the
// executions before its last) as it was. A batch of writes that all
// leave those columns alone is sent as update_many_hot, which sets only
// hotColumns: fewer arrays for the client to encode and send and for the
// server to unnest. Any other batch is sent as update_many.

// hotColumns are the parameters of update_many_hot, in its order: id
// (the job written), the columns it sets, and the guards of update_many
// it keeps. Every other column of jobWriteColumns is compared by
// coldSame, but the payload (unchangedBlobs) and the executions before
// the last (sameEarlier).
var hotColumns = []string{
	"id", "state", "kind", "outcome", "result", "version", "attempt",
	"updated_at", "updated_ns", "started_at", "started_ns", "completed_at", "completed_ns", "leases",
	"lease_expires_at", "lease_expires_ns", "heartbeat_at", "heartbeat_ns", "committed",
	"wake_at", "wake_ns", "due_at", "due_ns",
	"exec_id", "exec_attempt", "exec_owner", "exec_status", "exec_lease_expires_at", "exec_lease_expires_ns",
	"exec_heartbeat_at", "exec_heartbeat_ns", "exec_claimed_at", "exec_claimed_ns",
	"exec_started_at", "exec_started_ns", "exec_finished_at", "exec_finished_ns", "exec_error",
	"old_version", "result_changed",
}

// hotIndex is, for each of hotColumns, its place among the values of a
// job's update (jobParams, then writeParams).
var hotIndex = func() []int {
	all := slices.Concat(jobParams, writeParams)
	out := make([]int, len(hotColumns))
	for i, name := range hotColumns {
		out[i] = slices.Index(all, name)
		if out[i] < 0 {
			panic(fmt.Sprintf("pgstore: hot column %s is not a value of a job's update", name))
		}
	}
	return out
}()

// coldSame reports whether next leaves every column update_many_hot does
// not set as cur has it, but the payload, which the caller compares
// (unchangedBlobs).
func coldSame(cur, next *jobstate.Job) bool {
	return cur.Machine == next.Machine && cur.RetryCount == next.RetryCount && cur.MaxRetries == next.MaxRetries &&
		cur.Backoff == next.Backoff && cur.OwnBackoff == next.OwnBackoff && cur.LastError == next.LastError &&
		cur.ErrorClass == next.ErrorClass && cur.IdempotencyKey == next.IdempotencyKey &&
		cur.Fingerprint == next.Fingerprint && cur.Owner == next.Owner && cur.ConcurrencyKey == next.ConcurrencyKey &&
		cur.Priority == next.Priority && cur.CreatedAt.Equal(next.CreatedAt) && cur.NotBefore.Equal(next.NotBefore) &&
		cur.Deadline.Equal(next.Deadline) && cur.CancelRequested == next.CancelRequested &&
		cur.SweepFailures == next.SweepFailures && cur.SweepRetryAt.Equal(next.SweepRetryAt)
}

// sameEarlier reports whether a write whose executions after it are
// merged (mergeExecs of known and the write's) leaves the executions
// before the last as known has them, so that earlier_execs need not be
// written.
func sameEarlier(known, merged []jobstate.Execution) bool {
	if len(known) == 0 || len(merged) != len(known) {
		return len(known) <= 1 && len(merged) <= 1
	}
	for i := range len(known) - 1 {
		if !sameExec(&known[i], &merged[i]) {
			return false
		}
	}
	return true
}

// sameExec reports whether a and b are stored alike.
func sameExec(a, b *jobstate.Execution) bool {
	return a.ID == b.ID && a.Attempt == b.Attempt && a.Owner == b.Owner && a.Status == b.Status &&
		a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) && a.HeartbeatAt.Equal(b.HeartbeatAt) &&
		a.ClaimedAt.Equal(b.ClaimedAt) && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		a.Error == b.Error
}
