package jobstate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// IdempotencyPolicy says how long a job holds the idempotency key it was
// created with. While it holds the key, creating with the same key returns
// it instead of creating another job.
type IdempotencyPolicy struct {
	// Retention is how long after creation the key is held; zero means for
	// as long as the job exists.
	Retention time.Duration
	// ReleaseIn lists states in which the job no longer holds its key (a
	// failed job lets the same request create a new one).
	ReleaseIn []State
}

// Key builds an idempotency key from parts. Each part is length-prefixed
// before hashing, so ("ab", "c") and ("a", "bc") give different keys. The
// key is the hex SHA-256 of the encoding.
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// KeyAt builds a key from parts and the time bucket holding t: requests in
// the same bucket (the same minute, say) share a key, the next bucket
// starts a new one. A bucket of zero or less means no bucket.
func KeyAt(t time.Time, bucket time.Duration, parts ...string) string {
	if bucket <= 0 {
		return Key(parts...)
	}
	b := t.UnixNano() / int64(bucket)
	if t.UnixNano() < 0 && t.UnixNano()%int64(bucket) != 0 {
		b-- // floor, so buckets before 1970 are as wide as the others
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(b))
	return Key(append(append([]string(nil), parts...), bucket.String(), string(buf[:]))...)
}

// Fingerprint is the default fingerprint of a creation: the hex SHA-256 of
// its payload. The same key with another fingerprint is a conflict.
func Fingerprint(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// holdsKey reports whether job still holds its idempotency key at now.
func (p IdempotencyPolicy) holdsKey(job *Job, now time.Time) bool {
	for _, s := range p.ReleaseIn {
		if job.State == s {
			return false
		}
	}
	return p.Retention <= 0 || now.Before(job.CreatedAt.Add(p.Retention))
}
