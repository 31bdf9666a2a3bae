package pgstore

import (
	"fmt"
	"slices"

	"github.com/jobstate/jobstate"
)

// Hot writes: a claim, a heartbeat or a commit changes a job's state and
// lease, its executions and a few instants, and leaves the rest of its
// row (its payload, policy, keys, creation and schedule) as it was. A
// batch of writes that all leave those columns alone is sent as
// update_many_hot, which sets only hotColumns: fewer arrays for the
// client to encode and send and for the server to unnest. Any other
// batch is sent as update_many.

// hotColumns are the parameters of update_many_hot, in its order: id
// (the job written), the columns it sets, and the guards of update_many
// it keeps. Every other column of jobWriteColumns is compared by
// coldSame, but the payload.
var hotColumns = []string{
	"id", "state", "kind", "outcome", "result", "version", "attempt",
	"updated_at", "updated_ns", "started_at", "started_ns", "completed_at", "completed_ns", "leases",
	"lease_expires_at", "lease_expires_ns", "heartbeat_at", "heartbeat_ns", "committed",
	"wake_at", "wake_ns", "due_at", "due_ns", "execs", "old_version", "result_changed",
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
