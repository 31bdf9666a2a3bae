package jobstate_test

import (
	"testing"

	"github.com/jobstate/jobstate"
)

// TestOutcomeFailure checks which outcomes are failures: failed,
// dead-lettered and expired, and no other.
func TestOutcomeFailure(t *testing.T) {
	for o, want := range map[jobstate.Outcome]bool{
		jobstate.OutcomeFailed:       true,
		jobstate.OutcomeDeadLettered: true,
		jobstate.OutcomeExpired:      true,
		jobstate.OutcomeSucceeded:    false,
		jobstate.OutcomeCancelled:    false,
		jobstate.OutcomeRejected:     false,
		"":                           false,
		"unknown":                    false,
	} {
		if got := o.Failure(); got != want {
			t.Errorf("Outcome(%q).Failure() = %v, want %v", o, got, want)
		}
	}
}
