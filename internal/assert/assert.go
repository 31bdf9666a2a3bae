// Package assert holds the assertions jobstate's own tests make. Each
// function checks one condition and, when it does not hold, reports a
// failure through t.Errorf naming what was expected, what was got and the
// optional message, then returns false; the test goes on. The functions
// take the same arguments, in the same order, as the assertions of the
// same names in github.com/stretchr/testify/assert, so that tests written
// against that library read the same here.
//
// The optional msgAndArgs is either a single value, printed as is, or a
// format string followed by its arguments.
package assert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// TestingT is what an assertion needs of a test: *testing.T, *testing.B
// and *testing.F have these methods, and so do property-testing
// libraries' test values.
type TestingT interface {
	Helper()
	Errorf(format string, args ...any)
}

// message formats the optional message of an assertion: "" without one,
// the single value printed with %v, or the format string applied to the
// rest.
func message(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		if s, ok := msgAndArgs[0].(string); ok {
			return s
		}
		return fmt.Sprintf("%+v", msgAndArgs[0])
	default:
		if format, ok := msgAndArgs[0].(string); ok {
			return fmt.Sprintf(format, msgAndArgs[1:]...)
		}
		return fmt.Sprint(msgAndArgs...)
	}
}

// Fail reports a failure described by failure and the optional message,
// and returns false.
func Fail(t TestingT, failure string, msgAndArgs ...any) bool {
	t.Helper()
	if msg := message(msgAndArgs); msg != "" {
		t.Errorf("%s\nmessage: %s", failure, msg)
	} else {
		t.Errorf("%s", failure)
	}
	return false
}

// ObjectsAreEqual reports whether expected and actual are equal: with
// bytes.Equal when both are []byte, else with reflect.DeepEqual.
func ObjectsAreEqual(expected, actual any) bool {
	if expected == nil || actual == nil {
		return expected == actual
	}
	eb, ok1 := expected.([]byte)
	ab, ok2 := actual.([]byte)
	if ok1 && ok2 {
		if eb == nil || ab == nil {
			return eb == nil && ab == nil
		}
		return bytes.Equal(eb, ab)
	}
	return reflect.DeepEqual(expected, actual)
}

// ObjectsAreEqualValues reports whether expected and actual are equal as
// ObjectsAreEqual tells, or once one is converted to the other's type
// (so that int32(1) and int64(1) are equal values).
func ObjectsAreEqualValues(expected, actual any) bool {
	if ObjectsAreEqual(expected, actual) {
		return true
	}
	if expected == nil || actual == nil {
		return false
	}
	ev, av := reflect.ValueOf(expected), reflect.ValueOf(actual)
	if ev.Type().ConvertibleTo(av.Type()) && ObjectsAreEqual(ev.Convert(av.Type()).Interface(), actual) {
		return true
	}
	return av.Type().ConvertibleTo(ev.Type()) && ObjectsAreEqual(expected, av.Convert(ev.Type()).Interface())
}

func show(v any) string {
	if v == nil {
		return "<nil>"
	}
	switch v.(type) {
	case string, []byte, error:
		return fmt.Sprintf("%#v", v)
	}
	return fmt.Sprintf("%#v (%T)", v, v)
}

// Equal asserts that expected and actual are equal (ObjectsAreEqual).
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	t.Helper()
	if ObjectsAreEqual(expected, actual) {
		return true
	}
	return Fail(t, fmt.Sprintf("not equal:\nexpected: %s\nactual:   %s", show(expected), show(actual)), msgAndArgs...)
}

// NotEqual asserts that expected and actual are not equal
// (ObjectsAreEqual).
func NotEqual(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	t.Helper()
	if !ObjectsAreEqual(expected, actual) {
		return true
	}
	return Fail(t, fmt.Sprintf("should not be equal, both are: %s", show(actual)), msgAndArgs...)
}

// EqualValues asserts that expected and actual are equal once converted
// to the same type (ObjectsAreEqualValues).
func EqualValues(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	t.Helper()
	if ObjectsAreEqualValues(expected, actual) {
		return true
	}
	return Fail(t, fmt.Sprintf("not equal values:\nexpected: %s\nactual:   %s", show(expected), show(actual)), msgAndArgs...)
}

// Same asserts that expected and actual are pointers of the same type to
// the same variable.
func Same(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	t.Helper()
	ev, av := reflect.ValueOf(expected), reflect.ValueOf(actual)
	if ev.Kind() == reflect.Pointer && av.Kind() == reflect.Pointer && ev.Type() == av.Type() && ev.Pointer() == av.Pointer() {
		return true
	}
	return Fail(t, fmt.Sprintf("not the same pointer:\nexpected: %p %s\nactual:   %p %s", expected, show(expected), actual, show(actual)), msgAndArgs...)
}

// JSONEq asserts that expected and actual are JSON texts of equal values
// (the same members in any order, numbers compared as float64).
func JSONEq(t TestingT, expected, actual string, msgAndArgs ...any) bool {
	t.Helper()
	var ev, av any
	if err := json.Unmarshal([]byte(expected), &ev); err != nil {
		return Fail(t, fmt.Sprintf("expected is not valid JSON: %v\nexpected: %s", err, expected), msgAndArgs...)
	}
	if err := json.Unmarshal([]byte(actual), &av); err != nil {
		return Fail(t, fmt.Sprintf("actual is not valid JSON: %v\nactual: %s", err, actual), msgAndArgs...)
	}
	if reflect.DeepEqual(ev, av) {
		return true
	}
	return Fail(t, fmt.Sprintf("JSON values not equal:\nexpected: %s\nactual:   %s", expected, actual), msgAndArgs...)
}

// True asserts that value is true.
func True(t TestingT, value bool, msgAndArgs ...any) bool {
	t.Helper()
	if value {
		return true
	}
	return Fail(t, "expected true, got false", msgAndArgs...)
}

// False asserts that value is false.
func False(t TestingT, value bool, msgAndArgs ...any) bool {
	t.Helper()
	if !value {
		return true
	}
	return Fail(t, "expected false, got true", msgAndArgs...)
}

// isNil reports whether v is nil or holds a nil channel, function,
// interface, map, pointer or slice.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}

// Nil asserts that object is nil or holds a nil channel, function,
// interface, map, pointer or slice.
func Nil(t TestingT, object any, msgAndArgs ...any) bool {
	t.Helper()
	if isNil(object) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected nil, got: %s", show(object)), msgAndArgs...)
}

// NotNil asserts that object is neither nil nor a nil channel, function,
// interface, map, pointer or slice.
func NotNil(t TestingT, object any, msgAndArgs ...any) bool {
	t.Helper()
	if !isNil(object) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected a value that is not nil, got: %s", show(object)), msgAndArgs...)
}

// isEmpty reports whether v is nil, its type's zero value, an empty
// array, channel, map, slice or string, or a pointer to an empty value.
func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		return r.Len() == 0
	case reflect.Pointer:
		if r.IsNil() {
			return true
		}
		return isEmpty(r.Elem().Interface())
	}
	return r.IsZero()
}

// Empty asserts that object is empty: nil, its type's zero value, an
// empty channel, map, slice or string, or a pointer to an empty value.
func Empty(t TestingT, object any, msgAndArgs ...any) bool {
	t.Helper()
	if isEmpty(object) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected empty, got: %s", show(object)), msgAndArgs...)
}

// NotEmpty asserts that object is not empty (see Empty).
func NotEmpty(t TestingT, object any, msgAndArgs ...any) bool {
	t.Helper()
	if !isEmpty(object) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected something not empty, got: %s", show(object)), msgAndArgs...)
}

// Zero asserts that i is nil or the zero value of its type.
func Zero(t TestingT, i any, msgAndArgs ...any) bool {
	t.Helper()
	if i == nil || ObjectsAreEqual(i, reflect.Zero(reflect.TypeOf(i)).Interface()) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected the zero value, got: %s", show(i)), msgAndArgs...)
}

// Len asserts that object, an array, channel, map, slice or string, has
// length length.
func Len(t TestingT, object any, length int, msgAndArgs ...any) bool {
	t.Helper()
	r := reflect.ValueOf(object)
	switch r.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
	default:
		return Fail(t, fmt.Sprintf("%s has no length", show(object)), msgAndArgs...)
	}
	if r.Len() == length {
		return true
	}
	return Fail(t, fmt.Sprintf("expected length %d, got %d: %s", length, r.Len(), show(object)), msgAndArgs...)
}

// includes reports whether element is in list: a substring of a string,
// an element of an array or slice (ObjectsAreEqual), or a key of a map.
// ok is false when list is none of these.
func includes(list, element any) (found, ok bool) {
	r := reflect.ValueOf(list)
	switch r.Kind() {
	case reflect.String:
		e := reflect.ValueOf(element)
		if e.Kind() != reflect.String {
			return false, false
		}
		return strings.Contains(r.String(), e.String()), true
	case reflect.Array, reflect.Slice:
		for i := 0; i < r.Len(); i++ {
			if ObjectsAreEqual(r.Index(i).Interface(), element) {
				return true, true
			}
		}
		return false, true
	case reflect.Map:
		for _, k := range r.MapKeys() {
			if ObjectsAreEqual(k.Interface(), element) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// Contains asserts that s contains contains: as a substring of a string,
// an element of an array or slice, or a key of a map.
func Contains(t TestingT, s, contains any, msgAndArgs ...any) bool {
	t.Helper()
	found, ok := includes(s, contains)
	if !ok {
		return Fail(t, fmt.Sprintf("%s cannot contain %s", show(s), show(contains)), msgAndArgs...)
	}
	if found {
		return true
	}
	return Fail(t, fmt.Sprintf("%s does not contain %s", show(s), show(contains)), msgAndArgs...)
}

// NotContains asserts that s does not contain contains (see Contains).
func NotContains(t TestingT, s, contains any, msgAndArgs ...any) bool {
	t.Helper()
	found, ok := includes(s, contains)
	if !ok {
		return Fail(t, fmt.Sprintf("%s cannot contain %s", show(s), show(contains)), msgAndArgs...)
	}
	if !found {
		return true
	}
	return Fail(t, fmt.Sprintf("%s should not contain %s", show(s), show(contains)), msgAndArgs...)
}

// NoError asserts that err is nil.
func NoError(t TestingT, err error, msgAndArgs ...any) bool {
	t.Helper()
	if err == nil {
		return true
	}
	return Fail(t, fmt.Sprintf("unexpected error: %v", err), msgAndArgs...)
}

// Error asserts that err is not nil.
func Error(t TestingT, err error, msgAndArgs ...any) bool {
	t.Helper()
	if err != nil {
		return true
	}
	return Fail(t, "expected an error, got nil", msgAndArgs...)
}

// ErrorIs asserts that errors.Is(err, target).
func ErrorIs(t TestingT, err, target error, msgAndArgs ...any) bool {
	t.Helper()
	if errors.Is(err, target) {
		return true
	}
	return Fail(t, fmt.Sprintf("error chain does not hold the target:\nexpected: %v\nactual:   %v", target, err), msgAndArgs...)
}

// NotErrorIs asserts that !errors.Is(err, target).
func NotErrorIs(t TestingT, err, target error, msgAndArgs ...any) bool {
	t.Helper()
	if !errors.Is(err, target) {
		return true
	}
	return Fail(t, fmt.Sprintf("error chain should not hold the target:\nnot expected: %v\nactual:       %v", target, err), msgAndArgs...)
}

// ErrorAs asserts that errors.As(err, target): target, a non-nil pointer
// to an interface or to a type implementing error, is set to the first
// error in err's chain that matches it. A target errors.As refuses is
// reported as a failure, not a panic.
func ErrorAs(t TestingT, err error, target any, msgAndArgs ...any) bool {
	t.Helper()
	r := reflect.ValueOf(target)
	errorType := reflect.TypeOf((*error)(nil)).Elem()
	if target == nil || r.Kind() != reflect.Pointer || r.IsNil() ||
		(r.Type().Elem().Kind() != reflect.Interface && !r.Type().Elem().Implements(errorType)) {
		return Fail(t, fmt.Sprintf("ErrorAs needs a non-nil pointer to an interface or to a type implementing error, got %T", target), msgAndArgs...)
	}
	if errors.As(err, target) {
		return true
	}
	return Fail(t, fmt.Sprintf("no error in the chain is a %s:\nactual: %v", r.Type().Elem(), err), msgAndArgs...)
}

// ErrorContains asserts that err is not nil and that its message
// contains contains.
func ErrorContains(t TestingT, err error, contains string, msgAndArgs ...any) bool {
	t.Helper()
	if err == nil {
		return Fail(t, fmt.Sprintf("expected an error containing %q, got nil", contains), msgAndArgs...)
	}
	if strings.Contains(err.Error(), contains) {
		return true
	}
	return Fail(t, fmt.Sprintf("error %q does not contain %q", err.Error(), contains), msgAndArgs...)
}

// NotPanics asserts that f returns without panicking.
func NotPanics(t TestingT, f func(), msgAndArgs ...any) bool {
	t.Helper()
	if v, panicked := call(f); panicked {
		return Fail(t, fmt.Sprintf("function panicked with: %v", v), msgAndArgs...)
	}
	return true
}

// call runs f and reports whether it panicked, and with what.
func call(f func()) (v any, panicked bool) {
	panicked = true
	defer func() {
		if panicked {
			v = recover()
		}
	}()
	f()
	panicked = false
	return nil, false
}
