// Package crashmachine names the machine of sqlitestore's crash test and
// the program's own table, shared by the test and its worker processes;
// the machine is the work machine of internal/machines.
package crashmachine

import (
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
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
	return machines.WorkSpec(Name, machines.WorkLease(time.Second), machines.WorkRetries(jobstate.Unlimited), machines.WorkAbandoning())
}
