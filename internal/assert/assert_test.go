package assert_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
)

// fakeT records what an assertion reports instead of failing the test.
type fakeT struct {
	errors  []string
	helpers int
}

func (f *fakeT) Helper() { f.helpers++ }

func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

type myErr struct{ code int }

func (e *myErr) Error() string { return fmt.Sprintf("code %d", e.code) }

type named int

// check runs an assertion on a fake test and returns what it reported.
func check(t *testing.T, name string, want bool, f func(assert.TestingT) bool) *fakeT {
	t.Helper()
	ft := &fakeT{}
	got := f(ft)
	if got != want {
		t.Errorf("%s returned %v, want %v", name, got, want)
	}
	if want && len(ft.errors) != 0 {
		t.Errorf("%s holds but reported %q", name, ft.errors)
	}
	if !want && len(ft.errors) != 1 {
		t.Errorf("%s fails but reported %d errors, want 1: %q", name, len(ft.errors), ft.errors)
	}
	if ft.helpers == 0 {
		t.Errorf("%s did not call t.Helper", name)
	}
	return ft
}

// Each assertion returns true and reports nothing when its condition
// holds, and returns false and reports one error when it does not.
func TestAssertionsHoldAndFail(t *testing.T) {
	x, y := 1, 1
	target := &myErr{}
	wrapped := fmt.Errorf("wrapped: %w", &myErr{code: 7})
	cases := []struct {
		name string
		want bool
		f    func(assert.TestingT) bool
	}{
		{"Equal ints", true, func(t assert.TestingT) bool { return assert.Equal(t, 1, 1) }},
		{"Equal types differ", false, func(t assert.TestingT) bool { return assert.Equal(t, int64(1), 1) }},
		{"Equal bytes", true, func(t assert.TestingT) bool { return assert.Equal(t, []byte("a"), []byte("a")) }},
		{"Equal empty and nil bytes", false, func(t assert.TestingT) bool { return assert.Equal(t, []byte{}, []byte(nil)) }},
		{"Equal structs deep", true, func(t assert.TestingT) bool {
			return assert.Equal(t, []map[string]int{{"a": 1}}, []map[string]int{{"a": 1}})
		}},
		{"Equal nil and nil", true, func(t assert.TestingT) bool { return assert.Equal(t, nil, nil) }},
		{"Equal strings", false, func(t assert.TestingT) bool { return assert.Equal(t, "a", "b") }},
		{"NotEqual", true, func(t assert.TestingT) bool { return assert.NotEqual(t, 1, 2) }},
		{"NotEqual same", false, func(t assert.TestingT) bool { return assert.NotEqual(t, "a", "a") }},
		{"EqualValues converts", true, func(t assert.TestingT) bool { return assert.EqualValues(t, int32(3), int64(3)) }},
		{"EqualValues defined type", true, func(t assert.TestingT) bool { return assert.EqualValues(t, 3, named(3)) }},
		{"EqualValues differ", false, func(t assert.TestingT) bool { return assert.EqualValues(t, int32(3), int64(4)) }},
		{"Same", true, func(t assert.TestingT) bool { return assert.Same(t, &x, &x) }},
		{"Same equal values", false, func(t assert.TestingT) bool { return assert.Same(t, &x, &y) }},
		{"JSONEq order", true, func(t assert.TestingT) bool { return assert.JSONEq(t, `{"a":1,"b":[2]}`, `{"b":[2],"a":1.0}`) }},
		{"JSONEq differ", false, func(t assert.TestingT) bool { return assert.JSONEq(t, `{"a":1}`, `{"a":2}`) }},
		{"JSONEq invalid", false, func(t assert.TestingT) bool { return assert.JSONEq(t, `{"a":1}`, `{`) }},
		{"True", true, func(t assert.TestingT) bool { return assert.True(t, true) }},
		{"True false", false, func(t assert.TestingT) bool { return assert.True(t, false) }},
		{"False", true, func(t assert.TestingT) bool { return assert.False(t, false) }},
		{"False true", false, func(t assert.TestingT) bool { return assert.False(t, true) }},
		{"Nil typed nil", true, func(t assert.TestingT) bool { return assert.Nil(t, (*int)(nil)) }},
		{"Nil value", false, func(t assert.TestingT) bool { return assert.Nil(t, 0) }},
		{"NotNil", true, func(t assert.TestingT) bool { return assert.NotNil(t, &x) }},
		{"NotNil nil map", false, func(t assert.TestingT) bool { return assert.NotNil(t, map[int]int(nil)) }},
		{"Empty string", true, func(t assert.TestingT) bool { return assert.Empty(t, "") }},
		{"Empty zero struct", true, func(t assert.TestingT) bool { return assert.Empty(t, time.Time{}) }},
		{"Empty pointer to empty", true, func(t assert.TestingT) bool { return assert.Empty(t, new([]int)) }},
		{"Empty slice with one", false, func(t assert.TestingT) bool { return assert.Empty(t, []int{0}) }},
		{"NotEmpty", true, func(t assert.TestingT) bool { return assert.NotEmpty(t, map[int]int{1: 1}) }},
		{"NotEmpty zero", false, func(t assert.TestingT) bool { return assert.NotEmpty(t, 0) }},
		{"Zero", true, func(t assert.TestingT) bool { return assert.Zero(t, time.Duration(0)) }},
		{"Zero one", false, func(t assert.TestingT) bool { return assert.Zero(t, 1) }},
		{"Zero empty slice", false, func(t assert.TestingT) bool { return assert.Zero(t, []int{}) }},
		{"Len", true, func(t assert.TestingT) bool { return assert.Len(t, []int{1, 2}, 2) }},
		{"Len wrong", false, func(t assert.TestingT) bool { return assert.Len(t, "abc", 2) }},
		{"Len no length", false, func(t assert.TestingT) bool { return assert.Len(t, 5, 0) }},
		{"Contains substring", true, func(t assert.TestingT) bool { return assert.Contains(t, "hello", "ell") }},
		{"Contains element", true, func(t assert.TestingT) bool { return assert.Contains(t, []string{"a", "b"}, "b") }},
		{"Contains key", true, func(t assert.TestingT) bool { return assert.Contains(t, map[string]int{"k": 1}, "k") }},
		{"Contains missing", false, func(t assert.TestingT) bool { return assert.Contains(t, "hello", "x") }},
		{"Contains not a list", false, func(t assert.TestingT) bool { return assert.Contains(t, 3, 3) }},
		{"NotContains", true, func(t assert.TestingT) bool { return assert.NotContains(t, []int{1}, 2) }},
		{"NotContains present", false, func(t assert.TestingT) bool { return assert.NotContains(t, "abc", "b") }},
		{"NoError", true, func(t assert.TestingT) bool { return assert.NoError(t, nil) }},
		{"NoError error", false, func(t assert.TestingT) bool { return assert.NoError(t, fs.ErrNotExist) }},
		{"Error", true, func(t assert.TestingT) bool { return assert.Error(t, fs.ErrNotExist) }},
		{"Error nil", false, func(t assert.TestingT) bool { return assert.Error(t, nil) }},
		{"ErrorIs wrapped", true, func(t assert.TestingT) bool {
			return assert.ErrorIs(t, fmt.Errorf("x: %w", fs.ErrNotExist), fs.ErrNotExist)
		}},
		{"ErrorIs other", false, func(t assert.TestingT) bool { return assert.ErrorIs(t, fs.ErrExist, fs.ErrNotExist) }},
		{"NotErrorIs", true, func(t assert.TestingT) bool { return assert.NotErrorIs(t, fs.ErrExist, fs.ErrNotExist) }},
		{"NotErrorIs same", false, func(t assert.TestingT) bool { return assert.NotErrorIs(t, fs.ErrExist, fs.ErrExist) }},
		{"ErrorAs", true, func(t assert.TestingT) bool { return assert.ErrorAs(t, wrapped, &target) }},
		{"ErrorAs none", false, func(t assert.TestingT) bool { return assert.ErrorAs(t, fs.ErrExist, &target) }},
		{"ErrorAs bad target", false, func(t assert.TestingT) bool { return assert.ErrorAs(t, fs.ErrExist, 3) }},
		{"ErrorContains", true, func(t assert.TestingT) bool { return assert.ErrorContains(t, wrapped, "code 7") }},
		{"ErrorContains nil", false, func(t assert.TestingT) bool { return assert.ErrorContains(t, nil, "x") }},
		{"ErrorContains missing", false, func(t assert.TestingT) bool { return assert.ErrorContains(t, wrapped, "code 8") }},
		{"NotPanics", true, func(t assert.TestingT) bool { return assert.NotPanics(t, func() {}) }},
		{"NotPanics panics", false, func(t assert.TestingT) bool { return assert.NotPanics(t, func() { panic("boom") }) }},
		{"Greater", true, func(t assert.TestingT) bool { return assert.Greater(t, 2, 1) }},
		{"Greater equal", false, func(t assert.TestingT) bool { return assert.Greater(t, 1, 1) }},
		{"GreaterOrEqual", true, func(t assert.TestingT) bool { return assert.GreaterOrEqual(t, uint8(1), uint8(1)) }},
		{"GreaterOrEqual less", false, func(t assert.TestingT) bool { return assert.GreaterOrEqual(t, 0.5, 1.5) }},
		{"Less durations", true, func(t assert.TestingT) bool { return assert.Less(t, time.Second, time.Minute) }},
		{"Less strings", false, func(t assert.TestingT) bool { return assert.Less(t, "b", "a") }},
		{"Less mixed types", false, func(t assert.TestingT) bool { return assert.Less(t, 1, int64(2)) }},
		{"LessOrEqual times", true, func(t assert.TestingT) bool {
			return assert.LessOrEqual(t, time.Unix(1, 0), time.Unix(1, 0))
		}},
		{"LessOrEqual greater", false, func(t assert.TestingT) bool { return assert.LessOrEqual(t, 3, 2) }},
		{"Positive", true, func(t assert.TestingT) bool { return assert.Positive(t, 0.1) }},
		{"Positive zero", false, func(t assert.TestingT) bool { return assert.Positive(t, 0) }},
		{"Positive negative", false, func(t assert.TestingT) bool { return assert.Positive(t, -time.Second) }},
	}
	for _, c := range cases {
		check(t, c.name, c.want, c.f)
	}
	if target.code != 7 {
		t.Errorf("ErrorAs set the target to code %d, want 7", target.code)
	}
}

// A failure names the expected and the actual values and the optional
// message, given as one value or as a format and its arguments.
func TestFailureReport(t *testing.T) {
	ft := check(t, "Equal", false, func(t assert.TestingT) bool { return assert.Equal(t, "want", "got", "job %d", 7) })
	for _, s := range []string{"expected", `"want"`, "actual", `"got"`, "job 7"} {
		if !strings.Contains(ft.errors[0], s) {
			t.Errorf("the failure %q does not mention %s", ft.errors[0], s)
		}
	}
	ft = check(t, "True", false, func(t assert.TestingT) bool { return assert.True(t, false, "the flag") })
	if !strings.Contains(ft.errors[0], "the flag") {
		t.Errorf("the failure %q does not hold its message", ft.errors[0])
	}
	ft = check(t, "NoError", false, func(t assert.TestingT) bool { return assert.NoError(t, errors.New("disk full"), 42) })
	if !strings.Contains(ft.errors[0], "disk full") || !strings.Contains(ft.errors[0], "42") {
		t.Errorf("the failure %q does not name the error and the message", ft.errors[0])
	}
}
