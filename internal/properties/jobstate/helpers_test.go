// Property tests of package jobstate (definitions, the JSON forms of
// definitions and jobs, Step) drawn with pgregory.net/rapid, in a module
// that is never released so that rapid never reaches the library's
// users. The fixtures below are those the root package's tests use too.
package jobstate_test

import (
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/jobstatetest"
)

var (
	states      = machines.States
	base        = machines.SmallSpec
	guardedSpec = machines.GuardedSpec
	normalJob   = jobstatetest.JSONNormal
)
