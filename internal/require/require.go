// Package require holds the assertions of package assert that stop the
// test: each checks the same condition as the assertion of the same name
// in package assert and, when it does not hold, reports the failure
// through t.Errorf as that one does, then calls t.FailNow, which ends the
// test's goroutine. The functions take the same arguments, in the same
// order, as those of github.com/stretchr/testify/require.
package require

import "github.com/jobstate/jobstate/internal/assert"

// TestingT is what an assertion that stops the test needs of it:
// *testing.T, *testing.B and *testing.F have these methods.
type TestingT interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// Equal requires that expected and actual are equal
// (assert.ObjectsAreEqual: bytes.Equal for []byte, else
// reflect.DeepEqual); otherwise it reports the failure and calls
// t.FailNow.
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Equal(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// NotEqual requires that expected and actual are not equal
// (assert.ObjectsAreEqual); otherwise it reports the failure and calls
// t.FailNow.
func NotEqual(t TestingT, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if !assert.NotEqual(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// EqualValues requires that expected and actual are equal once
// converted to the same type (assert.ObjectsAreEqualValues); otherwise
// it reports the failure and calls t.FailNow.
func EqualValues(t TestingT, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if !assert.EqualValues(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// Same requires that expected and actual are pointers of the same type
// to the same variable; otherwise it reports the failure and calls
// t.FailNow.
func Same(t TestingT, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Same(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// JSONEq requires that expected and actual are JSON texts of equal
// values; otherwise it reports the failure and calls t.FailNow.
func JSONEq(t TestingT, expected, actual string, msgAndArgs ...any) {
	t.Helper()
	if !assert.JSONEq(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// True requires that value is true; otherwise it reports the failure
// and calls t.FailNow.
func True(t TestingT, value bool, msgAndArgs ...any) {
	t.Helper()
	if !assert.True(t, value, msgAndArgs...) {
		t.FailNow()
	}
}

// False requires that value is false; otherwise it reports the failure
// and calls t.FailNow.
func False(t TestingT, value bool, msgAndArgs ...any) {
	t.Helper()
	if !assert.False(t, value, msgAndArgs...) {
		t.FailNow()
	}
}

// Nil requires that object is nil or holds a nil channel, function,
// interface, map, pointer or slice; otherwise it reports the failure
// and calls t.FailNow.
func Nil(t TestingT, object any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Nil(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// NotNil requires that object is not nil (see Nil); otherwise it
// reports the failure and calls t.FailNow.
func NotNil(t TestingT, object any, msgAndArgs ...any) {
	t.Helper()
	if !assert.NotNil(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// Empty requires that object is empty: nil, its type's zero value, an
// empty channel, map, slice or string, or a pointer to an empty value;
// otherwise it reports the failure and calls t.FailNow.
func Empty(t TestingT, object any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Empty(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// NotEmpty requires that object is not empty (see Empty); otherwise it
// reports the failure and calls t.FailNow.
func NotEmpty(t TestingT, object any, msgAndArgs ...any) {
	t.Helper()
	if !assert.NotEmpty(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// Zero requires that i is nil or the zero value of its type; otherwise
// it reports the failure and calls t.FailNow.
func Zero(t TestingT, i any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Zero(t, i, msgAndArgs...) {
		t.FailNow()
	}
}

// Len requires that object, an array, channel, map, slice or string,
// has length length; otherwise it reports the failure and calls
// t.FailNow.
func Len(t TestingT, object any, length int, msgAndArgs ...any) {
	t.Helper()
	if !assert.Len(t, object, length, msgAndArgs...) {
		t.FailNow()
	}
}

// Contains requires that s contains contains: as a substring of a
// string, an element of an array or slice, or a key of a map; otherwise
// it reports the failure and calls t.FailNow.
func Contains(t TestingT, s, contains any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Contains(t, s, contains, msgAndArgs...) {
		t.FailNow()
	}
}

// NotContains requires that s does not contain contains (see Contains);
// otherwise it reports the failure and calls t.FailNow.
func NotContains(t TestingT, s, contains any, msgAndArgs ...any) {
	t.Helper()
	if !assert.NotContains(t, s, contains, msgAndArgs...) {
		t.FailNow()
	}
}

// NoError requires that err is nil; otherwise it reports the failure
// and calls t.FailNow.
func NoError(t TestingT, err error, msgAndArgs ...any) {
	t.Helper()
	if !assert.NoError(t, err, msgAndArgs...) {
		t.FailNow()
	}
}

// Error requires that err is not nil; otherwise it reports the failure
// and calls t.FailNow.
func Error(t TestingT, err error, msgAndArgs ...any) {
	t.Helper()
	if !assert.Error(t, err, msgAndArgs...) {
		t.FailNow()
	}
}

// ErrorIs requires that errors.Is(err, target); otherwise it reports
// the failure and calls t.FailNow.
func ErrorIs(t TestingT, err, target error, msgAndArgs ...any) {
	t.Helper()
	if !assert.ErrorIs(t, err, target, msgAndArgs...) {
		t.FailNow()
	}
}

// NotErrorIs requires that !errors.Is(err, target); otherwise it
// reports the failure and calls t.FailNow.
func NotErrorIs(t TestingT, err, target error, msgAndArgs ...any) {
	t.Helper()
	if !assert.NotErrorIs(t, err, target, msgAndArgs...) {
		t.FailNow()
	}
}

// ErrorAs requires that errors.As(err, target), which sets target to
// the matching error; otherwise it reports the failure and calls
// t.FailNow.
func ErrorAs(t TestingT, err error, target any, msgAndArgs ...any) {
	t.Helper()
	if !assert.ErrorAs(t, err, target, msgAndArgs...) {
		t.FailNow()
	}
}

// ErrorContains requires that err is not nil and its message contains
// contains; otherwise it reports the failure and calls t.FailNow.
func ErrorContains(t TestingT, err error, contains string, msgAndArgs ...any) {
	t.Helper()
	if !assert.ErrorContains(t, err, contains, msgAndArgs...) {
		t.FailNow()
	}
}

// NotPanics requires that f returns without panicking; otherwise it
// reports the failure and calls t.FailNow.
func NotPanics(t TestingT, f func(), msgAndArgs ...any) {
	t.Helper()
	if !assert.NotPanics(t, f, msgAndArgs...) {
		t.FailNow()
	}
}

// Greater requires that e1 > e2, both of the same ordered type (an
// integer, a float, a string or a time.Time, or a type defined on one);
// otherwise it reports the failure and calls t.FailNow.
func Greater(t TestingT, e1, e2 any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Greater(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// GreaterOrEqual requires that e1 >= e2 (see Greater for the types);
// otherwise it reports the failure and calls t.FailNow.
func GreaterOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	t.Helper()
	if !assert.GreaterOrEqual(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// Less requires that e1 < e2 (see Greater for the types); otherwise it
// reports the failure and calls t.FailNow.
func Less(t TestingT, e1, e2 any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Less(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// LessOrEqual requires that e1 <= e2 (see Greater for the types);
// otherwise it reports the failure and calls t.FailNow.
func LessOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	t.Helper()
	if !assert.LessOrEqual(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// Positive requires that e is greater than its type's zero value;
// otherwise it reports the failure and calls t.FailNow.
func Positive(t TestingT, e any, msgAndArgs ...any) {
	t.Helper()
	if !assert.Positive(t, e, msgAndArgs...) {
		t.FailNow()
	}
}

// Fail reports a failure described by failure and the optional message,
// then calls t.FailNow.
func Fail(t TestingT, failure string, msgAndArgs ...any) {
	t.Helper()
	assert.Fail(t, failure, msgAndArgs...)
	t.FailNow()
}
