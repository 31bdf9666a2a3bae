package jobstatetest

import (
	"time"

	"github.com/jobstate/jobstate"
)

// JSONNormal returns j as Job.UnmarshalJSON gives it back from j's JSON:
// its times in UTC and its empty byte slices nil. Compare a job with its
// JSON round trip through it.
func JSONNormal(j jobstate.Job) jobstate.Job {
	for _, t := range []*time.Time{
		&j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.CompletedAt, &j.NotBefore, &j.Deadline,
		&j.LeaseExpiresAt, &j.HeartbeatAt, &j.WakeAt, &j.SweepRetryAt,
	} {
		*t = t.UTC()
	}
	if len(j.Payload) == 0 {
		j.Payload = nil
	}
	if len(j.Result) == 0 {
		j.Result = nil
	}
	return j
}
