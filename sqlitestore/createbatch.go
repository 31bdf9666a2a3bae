package sqlitestore

import (
	"context"
	"fmt"

	"github.com/jobstate/jobstate"
)

// CreateBatch implements jobstate.BatchCreator: every job in one
// transaction on the writer (or a savepoint of the one ctx carries), so
// that with an error none is created.
func (s *Store) CreateBatch(ctx context.Context, n int, fn func(ctx context.Context, i int) (jobstate.Write, error)) ([]jobstate.Job, error) {
	if fn == nil || n < 0 {
		return nil, fmt.Errorf("%w: create batch: nil function or negative count", jobstate.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	var out []jobstate.Job
	err := s.write(ctx, "create batch", func(fctx context.Context, st *txState) error {
		out = make([]jobstate.Job, 0, min(n, 1024))
		for i := 0; i < n; i++ {
			if err := fctx.Err(); err != nil {
				return err
			}
			w, err := fn(fctx, i)
			if err != nil {
				return err
			}
			if err := s.insert(context.WithoutCancel(fctx), st, &w); err != nil {
				return err
			}
			out = append(out, asStored(w.Job))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
