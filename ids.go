package jobstate

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// v7Source is an engine's default id source: UUIDv7 ids (RFC 9562) as
// uuid.NewV7 makes them — 48 bits of Unix milliseconds, 12 bits of
// sub-millisecond time kept strictly increasing within the source, and 62
// random bits — with the random bytes read from crypto/rand for 256 ids
// at a time rather than one read (and one allocation) per id.
type v7Source struct {
	mu   sync.Mutex
	buf  [16 * 256]byte
	pos  int   // next unused 16 bytes of buf; len(buf): empty
	last int64 // the last time stamp given, milliseconds << 12 | sequence
	now  func() time.Time
}

func newV7Source() *v7Source {
	s := &v7Source{now: time.Now}
	s.pos = len(s.buf)
	return s
}

// next returns a new id.
func (s *v7Source) next() (uuid.UUID, error) {
	var u uuid.UUID
	s.mu.Lock()
	if s.pos == len(s.buf) {
		if _, err := rand.Read(s.buf[:]); err != nil {
			s.mu.Unlock()
			return uuid.Nil, fmt.Errorf("reading random bytes: %w", err)
		}
		s.pos = 0
	}
	copy(u[:], s.buf[s.pos:s.pos+16])
	s.pos += 16
	nano := s.now().UnixNano()
	milli := nano / int64(time.Millisecond)
	ts := milli<<12 | (nano-milli*int64(time.Millisecond))>>8&0xfff
	if ts <= s.last {
		ts = s.last + 1
	}
	s.last = ts
	s.mu.Unlock()

	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(ts>>12)<<16)
	copy(u[0:6], t[0:6])
	u[6] = 0x70 | byte(ts>>8)&0x0f // version 7, then the top of the sequence
	u[7] = byte(ts)
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	return u, nil
}
