package assert

import (
	"fmt"
	"reflect"
	"time"
)

// compare orders a and b, of the same type: a signed or unsigned integer,
// a float, a string or a time.Time (and types defined on them, such as
// time.Duration). It returns -1, 0 or +1, and ok false when the values
// cannot be ordered.
func compare(a, b any) (order int, ok bool) {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) {
		return 0, false
	}
	if at, isTime := a.(time.Time); isTime {
		return at.Compare(b.(time.Time)), true
	}
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	switch av.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return sign(av.Int() < bv.Int(), av.Int() > bv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return sign(av.Uint() < bv.Uint(), av.Uint() > bv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return sign(av.Float() < bv.Float(), av.Float() > bv.Float()), true
	case reflect.String:
		return sign(av.String() < bv.String(), av.String() > bv.String()), true
	}
	return 0, false
}

func sign(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

// ordered asserts that compare(e1, e2) is one of want, describing the
// relation as relation when it is not.
func ordered(t TestingT, e1, e2 any, relation string, want func(int) bool, msgAndArgs []any) bool {
	t.Helper()
	order, ok := compare(e1, e2)
	if !ok {
		return Fail(t, fmt.Sprintf("cannot order %s and %s", show(e1), show(e2)), msgAndArgs...)
	}
	if want(order) {
		return true
	}
	return Fail(t, fmt.Sprintf("expected %v %s %v", e1, relation, e2), msgAndArgs...)
}

// Greater asserts that e1 > e2; both have the same ordered type (an
// integer, a float, a string or a time.Time, or a type defined on one).
func Greater(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	t.Helper()
	return ordered(t, e1, e2, ">", func(o int) bool { return o > 0 }, msgAndArgs)
}

// GreaterOrEqual asserts that e1 >= e2 (see Greater for the types).
func GreaterOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	t.Helper()
	return ordered(t, e1, e2, ">=", func(o int) bool { return o >= 0 }, msgAndArgs)
}

// Less asserts that e1 < e2 (see Greater for the types).
func Less(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	t.Helper()
	return ordered(t, e1, e2, "<", func(o int) bool { return o < 0 }, msgAndArgs)
}

// LessOrEqual asserts that e1 <= e2 (see Greater for the types).
func LessOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	t.Helper()
	return ordered(t, e1, e2, "<=", func(o int) bool { return o <= 0 }, msgAndArgs)
}

// Positive asserts that e is greater than its type's zero value; e is a
// signed or unsigned integer or a float (or a type defined on one).
func Positive(t TestingT, e any, msgAndArgs ...any) bool {
	t.Helper()
	if e == nil {
		return Fail(t, "expected a positive number, got <nil>", msgAndArgs...)
	}
	zero := reflect.Zero(reflect.TypeOf(e)).Interface()
	return ordered(t, e, zero, ">", func(o int) bool { return o > 0 }, msgAndArgs)
}
