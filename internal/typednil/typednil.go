// Package typednil tells a nil interface value from one holding a nil
// pointer, map, slice, channel or function, for the constructors that
// refuse both.
package typednil

import "reflect"

// Is reports whether v is nil, or a nil pointer, map, slice, channel,
// function or interface held in an interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return r.IsNil()
	}
	return false
}
