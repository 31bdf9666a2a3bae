package enginesuite

import (
	"sync/atomic"

	"github.com/google/uuid"
)

// CountingIDs returns an id source (jobstate.WithIDs) whose ids count its
// calls: increasing, so that jobs created at one instant are claimed in
// creation order, and alike from two sources called as often. It may be
// called from several goroutines.
func CountingIDs() func() (uuid.UUID, error) {
	var next atomic.Uint64
	return func() (uuid.UUID, error) {
		n := next.Add(1)
		var id uuid.UUID
		for i := range 8 {
			id[15-i] = byte(n >> (8 * i))
		}
		id[6], id[8] = 0x70, 0x80 // version 7, RFC 4122 variant
		return id, nil
	}
}
