package require_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobstate/jobstate/internal/require"
)

// fakeT records what an assertion reports and whether it stopped the
// test, instead of failing or stopping the real one.
type fakeT struct {
	errors  []string
	stopped bool
	helpers int
}

func (f *fakeT) Helper() { f.helpers++ }

func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeT) FailNow() { f.stopped = true }

// An assertion that holds neither reports nor stops; one that fails
// reports the failure, with its message, and calls FailNow.
func TestRequireStopsOnFailure(t *testing.T) {
	cases := []struct {
		name string
		want bool
		f    func(require.TestingT)
	}{
		{"NoError", true, func(t require.TestingT) { require.NoError(t, nil) }},
		{"NoError error", false, func(t require.TestingT) { require.NoError(t, errors.New("boom"), "step %s", "one") }},
		{"Equal", true, func(t require.TestingT) { require.Equal(t, []byte("a"), []byte("a")) }},
		{"Equal differ", false, func(t require.TestingT) { require.Equal(t, 1, 2, "step %s", "one") }},
		{"Len", false, func(t require.TestingT) { require.Len(t, []int{1}, 2, "step one") }},
		{"True", false, func(t require.TestingT) { require.True(t, false, "step one") }},
		{"ErrorIs", false, func(t require.TestingT) { require.ErrorIs(t, nil, errors.ErrUnsupported, "step one") }},
		{"Less", true, func(t require.TestingT) { require.Less(t, 1, 2) }},
		{"Fail", false, func(t require.TestingT) { require.Fail(t, "failed", "step one") }},
	}
	for _, c := range cases {
		ft := &fakeT{}
		c.f(ft)
		if ft.helpers == 0 {
			t.Errorf("%s did not call t.Helper", c.name)
		}
		if c.want {
			if ft.stopped || len(ft.errors) != 0 {
				t.Errorf("%s holds but stopped=%v, reported %q", c.name, ft.stopped, ft.errors)
			}
			continue
		}
		if !ft.stopped {
			t.Errorf("%s failed without calling FailNow", c.name)
		}
		if len(ft.errors) != 1 || !strings.Contains(ft.errors[0], "step one") {
			t.Errorf("%s reported %q, want one failure with its message", c.name, ft.errors)
		}
	}
}
