package typednil_test

import (
	"io"
	"testing"

	"github.com/jobstate/jobstate/internal/typednil"
)

func TestIs(t *testing.T) {
	var p *int
	var r io.Reader
	var f func()
	var m map[int]int
	for name, tc := range map[string]struct {
		v    any
		want bool
	}{
		"nil":               {nil, true},
		"nil pointer":       {p, true},
		"nil interface":     {r, true},
		"nil func":          {f, true},
		"nil map":           {m, true},
		"pointer":           {new(int), false},
		"value":             {3, false},
		"empty non-nil map": {map[int]int{}, false},
	} {
		if got := typednil.Is(tc.v); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", name, got, tc.want)
		}
	}
}
