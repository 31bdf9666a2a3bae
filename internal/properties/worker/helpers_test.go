// Property tests of package worker (periodic schedules, the runtime's
// outcomes) drawn with pgregory.net/rapid, in a module that is never
// released so that rapid never reaches the library's users. The test
// machine is that of the worker package's tests (machines.TaskSpec).
package worker_test

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/require"
)

func taskMachine(t testing.TB, name string) *jobstate.Definition {
	t.Helper()
	def, err := jobstate.NewDefinition(machines.TaskSpec(name))
	require.NoError(t, err)
	return def
}
