package machines

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate"
)

func TestAllValid(t *testing.T) {
	refund := func(context.Context, jobstate.Job) error { return nil }
	for _, s := range []jobstate.Spec{DocsSpec(), DerivedSpec(), BountySpec(refund), DeliverySpec(), ImageSpec()} {
		if _, err := jobstate.NewDefinition(s); err != nil {
			t.Error(err)
		}
	}
}
