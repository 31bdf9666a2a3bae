package jobstate_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"

	"github.com/jobstate/jobstate"
)

// TestCheckWrite: each clause of the Store contract's refusal of a write,
// and the writes it lets through.
func TestCheckWrite(t *testing.T) {
	id, other := uuid.New(), uuid.New()
	x1, x2 := uuid.New(), uuid.New()
	exec := func(x uuid.UUID, st jobstate.ExecStatus) jobstate.Execution {
		return jobstate.Execution{ID: x, JobID: id, Status: st}
	}
	rec := func(v int64) jobstate.Transition { return jobstate.Transition{JobID: id, Version: v} }
	cur := jobstate.Snapshot{
		Job:        jobstate.Job{ID: id, Version: 3},
		Executions: []jobstate.Execution{exec(x1, jobstate.ExecCommitted)},
		Effects:    []jobstate.EffectRecord{{Name: "refund"}},
	}
	at := func(v int64) jobstate.Job { return jobstate.Job{ID: id, Version: v} }
	for _, tc := range []struct {
		name string
		w    jobstate.Write
		want error
	}{
		{"next version with its record", jobstate.Write{Job: at(4), Transitions: []jobstate.Transition{rec(4)}}, nil},
		{"versions jumped with records in order", jobstate.Write{Job: at(6), Transitions: []jobstate.Transition{rec(4), rec(6)}}, nil},
		{"the committed execution finished", jobstate.Write{Job: at(4), Executions: []jobstate.Execution{exec(x1, jobstate.ExecDone)}}, nil},
		{"another job's write", jobstate.Write{Job: jobstate.Job{ID: other, Version: 4}}, jobstate.ErrInvalidArgument},
		{"same version", jobstate.Write{Job: at(3)}, jobstate.ErrVersionConflict},
		{"record at the current version", jobstate.Write{Job: at(4), Transitions: []jobstate.Transition{rec(3)}}, jobstate.ErrVersionConflict},
		{"record above the job", jobstate.Write{Job: at(4), Transitions: []jobstate.Transition{rec(5)}}, jobstate.ErrVersionConflict},
		{"records out of order", jobstate.Write{Job: at(6), Transitions: []jobstate.Transition{rec(5), rec(5)}}, jobstate.ErrVersionConflict},
		{"another job's record", jobstate.Write{Job: at(4), Transitions: []jobstate.Transition{{JobID: other, Version: 4}}}, jobstate.ErrInvalidArgument},
		{"another job's execution", jobstate.Write{Job: at(4), Executions: []jobstate.Execution{{ID: x2, JobID: other}}}, jobstate.ErrInvalidArgument},
		{"an execution without id", jobstate.Write{Job: at(4), Executions: []jobstate.Execution{{JobID: id}}}, jobstate.ErrInvalidArgument},
		{"a second commit", jobstate.Write{Job: at(4), Executions: []jobstate.Execution{exec(x2, jobstate.ExecCommitted)}}, jobstate.ErrAlreadyCommitted},
		{"a second done", jobstate.Write{Job: at(4), Executions: []jobstate.Execution{exec(x2, jobstate.ExecDone)}}, jobstate.ErrAlreadyCommitted},
		{"an effect recorded before", jobstate.Write{Job: at(4), Effects: []jobstate.EffectRecord{{Name: "refund"}}}, jobstate.ErrEffectApplied},
		{"an effect twice in one write", jobstate.Write{Job: at(4), Effects: []jobstate.EffectRecord{{Name: "a"}, {Name: "a"}}}, jobstate.ErrEffectApplied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := jobstate.CheckWrite(cur, tc.w)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}

	t.Run("the winner is named", func(t *testing.T) {
		err := jobstate.CheckWrite(cur, jobstate.Write{Job: at(4), Executions: []jobstate.Execution{exec(x2, jobstate.ExecCommitted)}})
		var ce *jobstate.CommitError
		if assert.True(t, errors.As(err, &ce)) {
			assert.Equal(t, x1, ce.Winner)
			assert.Equal(t, x2, ce.ExecID)
		}
	})
	t.Run("replacing the committed execution by an aborted one frees the commit", func(t *testing.T) {
		w := jobstate.Write{Job: at(4), Executions: []jobstate.Execution{exec(x1, jobstate.ExecAborted), exec(x2, jobstate.ExecCommitted)}}
		assert.NoError(t, jobstate.CheckWrite(cur, w))
	})
}

// TestCheckNew: the refusals of a new job's write.
func TestCheckNew(t *testing.T) {
	id := uuid.New()
	create := jobstate.Transition{JobID: id, Version: 1, Event: jobstate.EventCreate}
	assert.NoError(t, jobstate.CheckNew(jobstate.Write{Job: jobstate.Job{ID: id, Version: 1}, Transitions: []jobstate.Transition{create}}))
	assert.ErrorIs(t, jobstate.CheckNew(jobstate.Write{Job: jobstate.Job{Version: 1}}), jobstate.ErrInvalidArgument)
	assert.ErrorIs(t, jobstate.CheckNew(jobstate.Write{Job: jobstate.Job{ID: id}}), jobstate.ErrInvalidArgument)
	assert.ErrorIs(t, jobstate.CheckNew(jobstate.Write{Job: jobstate.Job{ID: id, Version: 1}, Transitions: []jobstate.Transition{{JobID: id, Version: 2}}}), jobstate.ErrVersionConflict)
	assert.ErrorIs(t, jobstate.CheckNew(jobstate.Write{Job: jobstate.Job{ID: id, Version: 1}, Transitions: []jobstate.Transition{{JobID: uuid.New(), Version: 1}}}), jobstate.ErrInvalidArgument)
}

// TestKeepsHolder: a zero Write keeps the holder there is, is refused
// without one, and a Write with a job is never kept.
func TestKeepsHolder(t *testing.T) {
	holder := &jobstate.Job{ID: uuid.New(), Version: 1}
	kept, err := jobstate.KeepsHolder(jobstate.Write{}, holder)
	assert.NoError(t, err)
	assert.True(t, kept)
	kept, err = jobstate.KeepsHolder(jobstate.Write{}, nil)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.False(t, kept)
	for _, existing := range []*jobstate.Job{nil, holder} {
		kept, err = jobstate.KeepsHolder(jobstate.Write{Job: jobstate.Job{ID: uuid.New(), Version: 1}}, existing)
		assert.NoError(t, err)
		assert.False(t, kept)
	}
}
