package memstore

import (
	"math/rand/v2"
	"testing"
)

// draws reads a test case's choices from a fuzz input: each choice takes
// the fewest bytes that can name every value of its range, and once the
// input runs out every choice is its range's least value, so that every
// input, however short, is a case.
type draws struct {
	data []byte
}

// IntRange returns a value of [lo, hi] (hi >= lo).
func (d *draws) IntRange(lo, hi int) int {
	span := uint64(hi - lo)
	var v uint64
	for bits := span; bits > 0; bits >>= 8 {
		if len(d.data) == 0 {
			break
		}
		v = v<<8 | uint64(d.data[0])
		d.data = d.data[1:]
	}
	return lo + int(v%(span+1))
}

// Bool returns a choice between false and true.
func (d *draws) Bool() bool { return d.IntRange(0, 1) == 1 }

// pick returns one element of list, which is not empty.
func pick[T any](d *draws, list []T) T { return list[d.IntRange(0, len(list)-1)] }

// pickN returns between lo and hi elements of list, each picked alone.
func pickN[T any](d *draws, list []T, lo, hi int) []T {
	out := make([]T, d.IntRange(lo, hi))
	for i := range out {
		out[i] = pick(d, list)
	}
	return out
}

// addInputs adds to f's corpus the empty input, an input of 0xff bytes
// (every choice near its range's top) and n inputs of size bytes drawn
// from a fixed pseudo-random sequence, so that `go test` runs the same
// cases each time and the fuzzer has varied inputs to start from.
func addInputs(f *testing.F, n, size int) {
	f.Add([]byte{})
	top := make([]byte, size)
	for i := range top {
		top[i] = 0xff
	}
	f.Add(top)
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(r.Uint32())
		}
		f.Add(in)
	}
}
