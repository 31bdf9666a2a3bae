package memstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobstate/jobstate"
)

var _ jobstate.BatchClaimer = (*Store)(nil)

// ClaimBatch implements jobstate.BatchClaimer: the candidates of ClaimNext,
// in claim order, each offered to fn under its own lock (never another
// job's) and its write applied at once, until n are taken or none is left.
// A store in memory has nothing to roll back user code with, so a write is
// never held back once fn, and the effects it ran, returned: an error other
// than ErrSkip from fn, an invalid write or the end of ctx stops the batch
// and returns the jobs taken before it with the error.
func (s *Store) ClaimBatch(ctx context.Context, q jobstate.ClaimQuery, n int, fn jobstate.UpdateFunc) ([]jobstate.Job, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil claim function", jobstate.ErrInvalidArgument)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: batch of %d jobs", jobstate.ErrInvalidArgument, n)
	}
	now := tk(q.Now)
	var out []jobstate.Job
	var passed map[*entry]bool
	for offers := 0; len(out) < n && (q.Limit <= 0 || offers < q.Limit); offers++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		e := s.nextCandidate(q.Machine, now, passed)
		if e == nil {
			break
		}
		job, err := s.run(ctx, e, fn)
		e.lock.Unlock()
		if passed == nil {
			passed = make(map[*entry]bool)
		}
		passed[e] = true
		if err != nil {
			if errors.Is(err, jobstate.ErrSkip) {
				continue
			}
			return out, err
		}
		out = append(out, job)
	}
	return out, nil
}
