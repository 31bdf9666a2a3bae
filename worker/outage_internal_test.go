package worker

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// recorder keeps each record's level, message and attributes.
type recorder struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"level": rec.Level.String(), "msg": rec.Message}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	r.recs = append(r.recs, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.recs))
	for i, m := range r.recs {
		out[i] = m["level"] + " " + m["msg"] + " " + m["op"]
	}
	return out
}

func newOutage() (*outage, *recorder, *time.Time) {
	rec := &recorder{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &outage{log: slog.New(rec), now: func() time.Time { return now }}, rec, &now
}

var errDown = &jobstate.UnavailableError{Op: "update", Err: context.DeadlineExceeded}

// TestOutageRecords: one WARN when an outage begins, DEBUG for the calls
// that fail during it, one INFO with the duration and counts when a call
// reaches the store; refusals reach it too, other errors tell nothing.
func TestOutageRecords(t *testing.T) {
	o, rec, now := newOutage()
	ctx := context.Background()
	o.answered(ctx, o.mark(), nil) // healthy: nothing logged
	m := o.mark()
	o.failed(ctx, m, "succeed", errDown)
	o.retry()
	o.failed(ctx, m, "heartbeat", errDown) // in flight when it began
	o.failed(ctx, o.mark(), "claim", errDown)
	o.lapse()
	o.answered(ctx, o.mark(), context.Canceled) // tells nothing of the store
	*now = now.Add(3 * time.Second)
	o.answered(ctx, o.mark(), jobstate.ErrLeaseLost) // a refusal: the store answered
	o.answered(ctx, o.mark(), nil)
	assert.Equal(t, []string{
		"WARN store unreachable succeed",
		"DEBUG store still unreachable heartbeat",
		"DEBUG store still unreachable claim",
		"INFO store reachable again ",
	}, rec.lines())
	up := rec.recs[3]
	assert.Equal(t, "3s", up["duration"])
	assert.Equal(t, "3", up["failed_calls"])
	assert.Equal(t, "1", up["retried"])
	assert.Equal(t, "1", up["leases_lapsed"])
}

// TestOutageDoesNotFlap: a call in flight when the outage began does not
// end it by succeeding, and one in flight when it ended does not begin
// another by failing.
func TestOutageDoesNotFlap(t *testing.T) {
	o, rec, _ := newOutage()
	ctx := context.Background()
	before := o.mark()
	o.failed(ctx, o.mark(), "claim", errDown)
	o.answered(ctx, before, nil) // started before the outage: stale
	during := o.mark()
	o.answered(ctx, o.mark(), nil)            // ends it
	o.failed(ctx, during, "succeed", errDown) // started during it: stale
	require.Equal(t, []string{
		"WARN store unreachable claim",
		"INFO store reachable again ",
		"DEBUG store still unreachable succeed",
	}, rec.lines())
	o.failed(ctx, o.mark(), "sweep", errDown) // a new outage
	assert.Equal(t, "WARN store unreachable sweep", rec.lines()[3])
}
