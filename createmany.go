package jobstate

import (
	"context"
	"fmt"
)

// CreateMany creates jobs in one call of the store's BatchCreator
// capability (one transaction and COPY on pgstore): each job as Create
// would make it (checks, creation guard, creation effect, first history
// record). It returns one Created per job, in order.
//
// A job with a Key is decided as Create decides it: while a job holds the
// key (IdempotencyPolicy), that job is returned with Existing set and no
// guard or effect runs for it; a different fingerprint is a
// *KeyConflictError (ErrKeyConflict). Jobs of one call under the same
// machine and key are decided in order: the first creates the job, the
// later ones find it. Every key of the call is held until the call ends,
// so that a concurrent Create or CreateMany under one of them waits for
// it.
//
// Every job is checked before the store is called: an unknown machine
// (ErrUnknownMachine) or an argument Create refuses fails the whole call
// with nothing written, the error naming the job's index. During the
// batch, a guard's refusal, an effect's error or a key conflict stops it
// and is returned. On a store with transactions (pgstore, sqlitestore) an
// error leaves no job created; on memstore, whose creation effects cannot
// be undone, the results decided before the error are returned beside
// it. The results that are not Existing are exactly the jobs created, and
// observers are told of each one's creation record. No jobs: nil and no
// error. A store without the capability: ErrUnsupported. The engine keeps
// a copy of each payload.
func (e *Engine) CreateMany(ctx context.Context, jobs []NewJob) ([]Created, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	bc, ok := e.store.(BatchCreator)
	if !ok {
		return nil, fmt.Errorf("%w: creating many jobs at once (BatchCreator)", ErrUnsupported)
	}
	cs := make([]creation, len(jobs))
	keys := make([]BatchKey, len(jobs))
	for i := range jobs {
		c := &cs[i]
		c.e, c.nj = e, jobs[i]
		if err := e.planCreate(&c.p, &c.nj); err != nil {
			return nil, fmt.Errorf("jobstate: CreateMany: job %d: %w", i, err)
		}
		if c.nj.Key != "" {
			keys[i] = BatchKey{Machine: c.nj.Machine, Key: c.nj.Key}
		}
	}
	out, err := bc.CreateBatch(ctx, keys, func(ctx context.Context, i int, existing *Job) (Write, error) {
		if i < 0 || i >= len(cs) {
			return Write{}, fmt.Errorf("%w: CreateBatch asked for job %d of %d", ErrInvalidArgument, i, len(cs))
		}
		return cs[i].decide(ctx, existing)
	})
	for i := range out {
		if i < len(cs) && !out[i].Existing {
			e.notify(ctx, out[i].Job, []Transition{cs[i].rec})
		}
	}
	return out, err
}
