package jobstatetest

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Ledger counts the applications of a commit effect per job, so that a
// test can check that each job's effect ran exactly once whatever
// happened on the way (retries, lost leases, duplicate workers). Use its
// Effect method as the effect (or call it from yours). It is safe for
// concurrent use; the zero value is ready.
type Ledger struct {
	mu      sync.Mutex
	applied map[uuid.UUID]int
}

// Effect records one application for the job. Its signature is
// jobstate.EffectFunc's.
func (l *Ledger) Effect(_ context.Context, job jobstate.Job) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applied == nil {
		l.applied = make(map[uuid.UUID]int)
	}
	l.applied[job.ID]++
	return nil
}

// Applied returns how many times the effect ran for the job.
func (l *Ledger) Applied(id uuid.UUID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied[id]
}

// Total returns how many times the effect ran, for all jobs.
func (l *Ledger) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.applied {
		n += c
	}
	return n
}

// AssertAppliedOnce checks that the ledger's effect ran exactly once for
// each job, and that each job committed exactly once (AssertCommittedOnce).
func (e *Env) AssertAppliedOnce(l *Ledger, ids ...uuid.UUID) bool {
	e.T.Helper()
	ok := true
	for _, id := range ids {
		if n := l.Applied(id); n != 1 {
			e.T.Errorf("job %s: effect applied %d times, want exactly once\n%s", id, n, e.Describe(id))
			ok = false
			continue
		}
		ok = e.AssertCommittedOnce(id) && ok
	}
	return ok
}
