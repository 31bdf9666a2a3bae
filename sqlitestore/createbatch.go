package sqlitestore

import (
	"context"
	"fmt"

	"github.com/jobstate/jobstate"
)

// CreateBatch implements jobstate.BatchCreator: every job in one
// transaction on the writer (or a savepoint of the one ctx carries), so
// that with an error none is created. The writer is one connection, so
// the batch's keys are held from its start to its end; each key's holder
// is read in the transaction, which sees the jobs created earlier in it.
func (s *Store) CreateBatch(ctx context.Context, keys []jobstate.BatchKey, fn jobstate.BatchCreateFunc) ([]jobstate.Created, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: create batch: nil function", jobstate.ErrInvalidArgument)
	}
	for i, k := range keys {
		if k.Key != "" && k.Machine == "" {
			return nil, fmt.Errorf("%w: create batch: job %d has a key and no machine", jobstate.ErrInvalidArgument, i)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var out []jobstate.Created
	err := s.write(ctx, "create batch", func(fctx context.Context, st *txState) error {
		out = make([]jobstate.Created, 0, len(keys))
		for i, k := range keys {
			if err := fctx.Err(); err != nil {
				return err
			}
			c, err := s.createIn(fctx, st, "create batch", k.Machine, k.Key, func(ctx context.Context, existing *jobstate.Job) (jobstate.Write, error) {
				return fn(ctx, i, existing)
			})
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
