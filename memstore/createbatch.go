package memstore

import (
	"context"
	"fmt"

	"github.com/jobstate/jobstate"
)

var _ jobstate.BatchCreator = (*Store)(nil)

// CreateBatch implements jobstate.BatchCreator. Having no transactions,
// it stores each job as its function returns (the creation effects the
// function ran cannot be undone), so that with an error the jobs created
// before it are returned beside it, and are exactly the jobs created.
// Functions run with no lock of the store held.
func (s *Store) CreateBatch(ctx context.Context, n int, fn func(ctx context.Context, i int) (jobstate.Write, error)) ([]jobstate.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil || n < 0 {
		return nil, fmt.Errorf("%w: create batch: nil function or negative count", jobstate.ErrInvalidArgument)
	}
	var out []jobstate.Job
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		w, err := fn(ctx, i)
		if err != nil {
			return out, err
		}
		j, err := s.insert(&w, nil)
		if err != nil {
			return out, err
		}
		out = append(out, j)
	}
	return out, nil
}
