package jobstate

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// CheckWrite returns the error a Store must return, writing nothing, when
// asked to apply w over cur (Update, ClaimNext), or nil when the write is
// one the contract lets it apply:
//
//   - ErrInvalidArgument: w.Job, a transition or an execution is about
//     another job, an execution has no id, or w changes the job's
//     ConcurrencyKey;
//   - ErrVersionConflict: w.Job.Version is not above cur.Job.Version, or
//     the transitions' versions do not strictly increase within
//     (cur.Job.Version, w.Job.Version];
//   - a *CommitError (ErrAlreadyCommitted): the executions after the write
//     (cur's, replaced by w's of the same id) would hold two that are
//     COMMITTED or DONE;
//   - ErrEffectApplied: w records an effect name that cur holds, or twice.
//
// Every store calls it (memstore, pgstore and any other), so that all of
// them refuse the same writes with the same errors; a SQL store may keep
// its database constraints as a second line.
func CheckWrite(cur Snapshot, w Write) error {
	id := cur.Job.ID
	if w.Job.ID != id {
		return fmt.Errorf("%w: a write for job %s applied to job %s", ErrInvalidArgument, w.Job.ID, id)
	}
	if err := checkVersions(&cur.Job, &w); err != nil {
		return err
	}
	if w.Job.ConcurrencyKey != cur.Job.ConcurrencyKey {
		return fmt.Errorf("%w: job %s: concurrency key changed from %q to %q", ErrInvalidArgument, id, cur.Job.ConcurrencyKey, w.Job.ConcurrencyKey)
	}
	if err := checkSingleCommit(id, cur.Executions, w.Executions); err != nil {
		return err
	}
	return checkEffects(id, cur.Effects, w.Effects)
}

// CheckNew returns the error a Store must return, writing nothing, when
// asked to insert w as a new job (Create, CreateBatch): ErrInvalidArgument
// for a job without an id or a version, or a transition, execution or
// effect about another job; ErrVersionConflict for transition versions
// that do not strictly increase within [1, w.Job.Version]; the errors of
// CheckWrite for its executions and effects. Whether the id is already
// taken (ErrDuplicateJob) is the store's to find.
func CheckNew(w Write) error {
	id := w.Job.ID
	if id == uuid.Nil {
		return fmt.Errorf("%w: a new job without an id", ErrInvalidArgument)
	}
	if w.Job.Version < 1 {
		return fmt.Errorf("%w: new job %s at version %d, below 1", ErrInvalidArgument, id, w.Job.Version)
	}
	if err := checkVersions(&Job{ID: id}, &w); err != nil {
		return err
	}
	if err := checkSingleCommit(id, nil, w.Executions); err != nil {
		return err
	}
	return checkEffects(id, nil, w.Effects)
}

// KeepsHolder reports whether w, returned by a CreateFunc given the key's
// holder existing (nil for none), keeps the holder instead of creating a
// job: w carries no job (a zero Write). A zero Write with no holder to
// keep is refused with ErrInvalidArgument, and the store writes nothing.
// A Write that carries a job is not kept (false, nil): the store checks
// it with CheckNew and inserts it.
func KeepsHolder(w Write, existing *Job) (bool, error) {
	if w.Job.ID != uuid.Nil {
		return false, nil
	}
	if existing == nil {
		return false, fmt.Errorf("%w: create function returned no job and there is none to keep", ErrInvalidArgument)
	}
	return true, nil
}

// CheckKeyLimit returns ErrKeyLimit (wrapped, naming the key) when a
// KeyLimiter store must refuse w over cur: w.MaxPerKey is above zero, the
// job has a ConcurrencyKey, w raises its Leases, and live, the sum of
// Job.Leases over the jobs of cur's machine with that key as the store
// holds them before the write (cur's own included), would then exceed
// w.MaxPerKey. It returns nil otherwise.
func CheckKeyLimit(cur Job, w Write, live int) error {
	if w.MaxPerKey <= 0 || w.Job.ConcurrencyKey == "" || w.Job.Leases <= cur.Leases {
		return nil
	}
	if after := live - cur.Leases + w.Job.Leases; after > w.MaxPerKey {
		return fmt.Errorf("%w: machine %q, key %q: %d live executions, at most %d", ErrKeyLimit, w.Job.Machine, w.Job.ConcurrencyKey, after, w.MaxPerKey)
	}
	return nil
}

// checkVersions checks w's version against cur's, and its transitions'.
func checkVersions(cur *Job, w *Write) error {
	if w.Job.Version <= cur.Version {
		return fmt.Errorf("%w: job %s: write of version %d over version %d", ErrVersionConflict, cur.ID, w.Job.Version, cur.Version)
	}
	last := cur.Version
	for _, t := range w.Transitions {
		if t.JobID != cur.ID {
			return fmt.Errorf("%w: transition for job %s in a write for job %s", ErrInvalidArgument, t.JobID, cur.ID)
		}
		if t.Version <= last || t.Version > w.Job.Version {
			return fmt.Errorf("%w: job %s: transition version %d outside (%d, %d]", ErrVersionConflict, cur.ID, t.Version, last, w.Job.Version)
		}
		last = t.Version
	}
	return nil
}

// checkSingleCommit checks that the executions after the write hold at
// most one COMMITTED or DONE execution.
func checkSingleCommit(id uuid.UUID, cur, written []Execution) error {
	for _, x := range written {
		if x.JobID != id {
			return fmt.Errorf("%w: execution %s of job %s in a write for job %s", ErrInvalidArgument, x.ID, x.JobID, id)
		}
		if x.ID == uuid.Nil {
			return fmt.Errorf("%w: execution without id in a write for job %s", ErrInvalidArgument, id)
		}
	}
	winner := uuid.Nil
	note := func(x *Execution) error {
		if x.Status != ExecCommitted && x.Status != ExecDone {
			return nil
		}
		if winner != uuid.Nil && winner != x.ID {
			return &CommitError{JobID: id, ExecID: x.ID, Winner: winner}
		}
		winner = x.ID
		return nil
	}
	for i := range cur {
		replaced := slices.ContainsFunc(written, func(x Execution) bool { return x.ID == cur[i].ID })
		if !replaced {
			if err := note(&cur[i]); err != nil {
				return err
			}
		}
	}
	for i := range written {
		if err := note(&written[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkEffects checks that no effect name is recorded twice.
func checkEffects(id uuid.UUID, cur, written []EffectRecord) error {
	for i, ef := range written {
		named := func(r EffectRecord) bool { return r.Name == ef.Name }
		if slices.ContainsFunc(cur, named) || slices.ContainsFunc(written[:i], named) {
			return fmt.Errorf("%w: job %s: effect %q", ErrEffectApplied, id, ef.Name)
		}
	}
	return nil
}
