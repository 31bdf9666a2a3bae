// Package crashmachine is the machine of sqlitestore's crash test, shared
// by the test and its worker processes.
package crashmachine

import (
	"time"

	"github.com/jobstate/jobstate"
)

// Name is the machine's name.
const Name = "crash"

// Table is the program's own table the commit effect inserts into, in
// the store's transaction: one row per commit, with no unique key, so
// that a job's effect applied twice would show as two rows.
const Table = "receipts"

// CreateTable is the statement that makes Table.
const CreateTable = `CREATE TABLE IF NOT EXISTS ` + Table + ` (job BLOB NOT NULL, worker TEXT NOT NULL)`

// Spec is queued → running → done, retried without limit, with a short
// lease so that the jobs of killed workers come back soon.
func Spec() jobstate.Spec {
	return jobstate.Spec{
		Name:    Name,
		Initial: "queued",
		States: []jobstate.StateSpec{
			{Name: "queued", Kind: jobstate.KindReady},
			{Name: "running", Kind: jobstate.KindActive},
			{Name: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "failed", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"queued"}, Event: jobstate.EventClaim, To: "running"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventSucceed, To: "done"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventRetry, To: "queued"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventAbandon, To: "queued"},
			{From: []jobstate.State{"running"}, Event: jobstate.EventFail, To: "failed"},
		},
		Policy: jobstate.Policy{LeaseTTL: time.Second, Retry: jobstate.RetryPolicy{MaxRetries: jobstate.Unlimited}},
	}
}
