package storetest

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// fixture is the engine suite's fixture (an engine over a fresh store
// with a manual clock), with the helpers of this suite's own tests.
type fixture struct{ *enginesuite.Fixture }

// newFixture runs the machines of specs (enginesuite.NewFixture). A
// machine bearing the name of one of the five lifecycles must be that
// lifecycle's literal definition (machines.Check); a test that changes its
// rules gives it a generic name.
func newFixture(t *testing.T, newStore NewStore, opts []jobstate.Option, specs ...jobstate.Spec) *fixture {
	t.Helper()
	return &fixture{enginesuite.NewFixture(t, enginesuite.NewStore(newStore), opts, specs...)}
}
