package jobstate

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// v7Source is an engine's default id source: UUIDv7 ids (RFC 9562) as
// uuid.NewV7 makes them — 48 bits of Unix milliseconds, 12 bits of
// sub-millisecond time kept strictly increasing within the source, and 62
// random bits — with the random bytes read from crypto/rand for 64 ids at
// a time rather than one read (and one allocation) per id.
//
// Nothing in it makes concurrent callers sleep for each other: the time
// stamp is taken with a compare-and-swap, and the random bytes come from
// one of several buffers, each with its own lock, picked at random. (One
// lock for the source made concurrent creates and claims queue on it, and
// a goroutine woken from that queue waits on the releaser's processor.)
type v7Source struct {
	last   atomic.Int64 // the last time stamp given, milliseconds << 12 | sequence
	shards [randShards]randBuf
	now    func() time.Time
}

const (
	randShards = 8
	idsPerRead = 64
)

// randBuf is one buffer of random bytes for idsPerRead ids.
type randBuf struct {
	mu  sync.Mutex
	buf [16 * idsPerRead]byte
	pos int // next unused 16 bytes of buf; len(buf): empty
}

func newV7Source() *v7Source {
	s := &v7Source{now: time.Now}
	for i := range s.shards {
		s.shards[i].pos = len(s.shards[i].buf)
	}
	return s
}

// random fills u with 16 random bytes from one of the buffers.
func (s *v7Source) random(u *uuid.UUID) error {
	b := &s.shards[mrand.Uint32N(randShards)]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pos == len(b.buf) {
		if _, err := rand.Read(b.buf[:]); err != nil {
			return fmt.Errorf("reading random bytes: %w", err)
		}
		b.pos = 0
	}
	copy(u[:], b.buf[b.pos:b.pos+16])
	b.pos += 16
	return nil
}

// stamp returns a time stamp above every one given before.
func (s *v7Source) stamp() int64 {
	nano := s.now().UnixNano()
	milli := nano / int64(time.Millisecond)
	ts := milli<<12 | (nano-milli*int64(time.Millisecond))>>8&0xfff
	for {
		last := s.last.Load()
		next := max(ts, last+1)
		if s.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// next returns a new id.
func (s *v7Source) next() (uuid.UUID, error) {
	var u uuid.UUID
	if err := s.random(&u); err != nil {
		return uuid.Nil, err
	}
	ts := s.stamp()
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(ts>>12)<<16)
	copy(u[0:6], t[0:6])
	u[6] = 0x70 | byte(ts>>8)&0x0f // version 7, then the top of the sequence
	u[7] = byte(ts)
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	return u, nil
}
