package jobstate_test

import (
	"errors"
	"io"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"

	"github.com/jobstate/jobstate"
)

// TestUnavailableError: an unreachable store's error matches
// ErrUnavailable, and ErrOutcomeUnknown only when the operation may have
// been applied; both have their codes, the outcome first.
func TestUnavailableError(t *testing.T) {
	surely := &jobstate.UnavailableError{Op: "update", Err: io.ErrUnexpectedEOF}
	assert.ErrorIs(t, surely, jobstate.ErrUnavailable)
	assert.NotErrorIs(t, surely, jobstate.ErrOutcomeUnknown)
	assert.ErrorIs(t, surely, io.ErrUnexpectedEOF)
	assert.Equal(t, "unavailable", jobstate.Code(surely))
	assert.Contains(t, surely.Error(), "nothing was applied")

	maybe := &jobstate.UnavailableError{Op: "update", MayHaveApplied: true, Err: io.ErrUnexpectedEOF}
	assert.ErrorIs(t, maybe, jobstate.ErrUnavailable)
	assert.ErrorIs(t, maybe, jobstate.ErrOutcomeUnknown)
	assert.Equal(t, "outcome_unknown", jobstate.Code(maybe))
	assert.Contains(t, maybe.Error(), "may have been applied")

	var ue *jobstate.UnavailableError
	assert.True(t, errors.As(errors.Join(errors.New("wrapped"), maybe), &ue))
	assert.True(t, ue.MayHaveApplied)
}
