package enginesuite

import (
	"testing"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/delivery"
)

// TestFixtureRefusesOtherRulesUnderALifecycleName: the suite's fixture
// runs a machine bearing a lifecycle's name only if it is that lifecycle's
// literal definition; with other rules it must carry a name of its own.
func TestFixtureRefusesOtherRulesUnderALifecycleName(t *testing.T) {
	literal := delivery.Spec(delivery.Plain())
	if err := CheckSpecs(literal, m.TransferSpec(), m.QueueSpec()); err != nil {
		t.Errorf("the literal and generic machines are refused: %v", err)
	}
	changed := delivery.Spec(delivery.Plain())
	changed.Rules = append(changed.Rules, jobstate.Rule{From: []jobstate.State{delivery.Claimed}, Event: jobstate.EventCancel, To: delivery.Cancelled})
	if err := CheckSpecs(changed); err == nil {
		t.Error("file delivery with a cancel from CLAIMED passed as file delivery")
	}
	changed.Name = "transfer-with-cancel"
	if err := CheckSpecs(changed); err != nil {
		t.Errorf("under a name of its own it is refused: %v", err)
	}
}
