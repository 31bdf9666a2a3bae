package machines

import (
	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/hook"
)

// The functions below give machines of this package under the identifiers
// and machine names the root package's tests and the store suite's text
// checks (storetest/texts.go) use. DocsSpec, DerivedSpec and ImageSpec are
// generic machines under other names; BountySpec is the literal bounty
// marketplace; DeliverySpec is the transfer machine.

// DocsSpec is the queue machine (QueueSpec) named "docs".
func DocsSpec() jobstate.Spec {
	s := QueueSpec()
	s.Name = "docs"
	return s
}

// Docs returns DocsSpec as a validated Definition.
func Docs() *jobstate.Definition { return Must(DocsSpec()) }

// DerivedSpec is the projected machine (ProjectedSpec) named "derived".
func DerivedSpec() jobstate.Spec {
	s := ProjectedSpec()
	s.Name = "derived"
	return s
}

// ImageSpec is the parking machine (ParkingSpec) named "image".
func ImageSpec() jobstate.Spec {
	s := ParkingSpec()
	s.Name = "image"
	return s
}

// BountySpec is the literal bounty marketplace with its Plain hooks, the
// refund run by refund, which has no name.
func BountySpec(refund jobstate.EffectFunc) jobstate.Spec {
	h := bounty.Plain()
	h.Refund = hook.Effect{Func: refund}
	return bounty.Spec(h)
}

// DeliverySpec is the transfer machine (TransferSpec).
func DeliverySpec() jobstate.Spec { return TransferSpec() }
