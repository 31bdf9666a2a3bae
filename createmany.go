package jobstate

import (
	"context"
	"fmt"
)

// CreateMany creates jobs, none with an idempotency key, in one call of
// the store's BatchCreator capability (one transaction and COPY on
// pgstore): each job as Create would make it (checks, creation guard,
// creation effect, first history record), and returns them in order.
//
// Every job is checked before the store is called: an unknown machine
// (ErrUnknownMachine), a Key (ErrInvalidArgument: keys serialize creates
// one key at a time, which a batch cannot), or an argument Create refuses
// fails the whole call with nothing written, the error naming the job's
// index. During the batch, a guard's refusal or an effect's error stops
// it and is returned. On a store with transactions (pgstore) an error
// leaves no job created; on memstore, whose creation effects cannot be
// undone, the jobs created before the error are returned beside it. The
// jobs returned are exactly the jobs created, and observers are told of
// each one's creation record. No jobs: nil and no error. A store without
// the capability: ErrUnsupported. The engine keeps a copy of each
// payload.
func (e *Engine) CreateMany(ctx context.Context, jobs []NewJob) ([]Job, error) {
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
	plans := make([]createPlan, len(jobs))
	for i := range jobs {
		nj := &jobs[i]
		if nj.Key != "" {
			return nil, fmt.Errorf("jobstate: CreateMany: job %d: %w: an idempotency key (create it with Create)", i, ErrInvalidArgument)
		}
		if err := e.planCreate(&plans[i], nj); err != nil {
			return nil, fmt.Errorf("jobstate: CreateMany: job %d: %w", i, err)
		}
	}
	recs := make([]Transition, len(jobs))
	created, err := bc.CreateBatch(ctx, len(jobs), func(ctx context.Context, i int) (Write, error) {
		if i < 0 || i >= len(plans) {
			return Write{}, fmt.Errorf("%w: CreateBatch asked for job %d of %d", ErrInvalidArgument, i, len(plans))
		}
		now, err := e.now()
		if err != nil {
			return Write{}, err
		}
		w, err := e.buildJob(ctx, &plans[i], now)
		if err != nil {
			return Write{}, err
		}
		recs[i] = w.Transitions[0]
		return w, nil
	})
	for i := range created {
		if i < len(recs) {
			e.notify(ctx, created[i], recs[i:i+1])
		}
	}
	return created, err
}
