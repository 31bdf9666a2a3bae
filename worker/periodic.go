package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobstate/jobstate"
)

// Schedule says when the periods of a periodic job start. Next returns
// the first period start strictly after t, in the schedule's own time
// zone, or the zero time when no period starts after t.
//
// Every gives fixed intervals. A cron expression's parsed schedule from
// github.com/robfig/cron/v3 (cron.ParseStandard, with a "CRON_TZ=Zone "
// prefix for a time zone) has this method and can be passed as it is.
// Next must be a pure function of t: every process running the schedule
// must compute the same period starts, since a period's start names its
// job.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every returns the schedule whose periods start at the whole multiples
// of d since the Unix epoch (00:00:00 UTC, 1 January 1970): every process
// computes the same starts, whatever its time zone or start time. d must
// be positive; Periodic refuses another.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

// Next returns the first multiple of the interval after t.
func (e every) Next(t time.Time) time.Time {
	d := int64(e)
	if d <= 0 {
		return time.Time{}
	}
	n := t.UnixNano()
	q := n / d
	if n < 0 && n%d != 0 {
		q-- // floor
	}
	return time.Unix(0, (q+1)*d).UTC()
}

// CatchUp says what a starting runtime does about the periods that began
// while no runtime was running the schedule.
type CatchUp int

const (
	// CatchUpNone creates no job for periods that began before the
	// runtime started: its first job is the next period's.
	CatchUpNone CatchUp = iota
	// CatchUpLast creates, at start, the job of the last period that
	// began before the runtime started, unless it exists already: after
	// downtime the schedule runs once, never once per missed period.
	CatchUpLast
)

// PeriodicOption configures a periodic job (see Periodic).
type PeriodicOption func(*periodic)

// PeriodicPayload makes payload the payload of every job of the
// schedule.
func PeriodicPayload(payload []byte) PeriodicOption {
	p := append([]byte(nil), payload...)
	return func(pj *periodic) { pj.payload = func(time.Time) ([]byte, error) { return p, nil } }
}

// PeriodicPayloadFunc makes f give the payload of the job of the period
// starting at start. An error skips that period's job (it is logged).
func PeriodicPayloadFunc(f func(start time.Time) ([]byte, error)) PeriodicOption {
	return func(pj *periodic) { pj.payload = f }
}

// PeriodicCatchUp sets the catch-up policy (CatchUpNone by default).
func PeriodicCatchUp(c CatchUp) PeriodicOption {
	return func(pj *periodic) { pj.catchUp = c }
}

// periodic is one registered schedule.
type periodic struct {
	name     string
	machine  string
	schedule Schedule
	payload  func(time.Time) ([]byte, error)
	catchUp  CatchUp
}

// Periodic has the runtime create a job of machine at the start of each
// period of s, under name (unique among the runtime's schedules). The job
// of a period is created with the idempotency key PeriodKey(name, start),
// so that however many processes run the same schedule, each period gets
// one job: the first creation makes it, the others find it. The job's
// NotBefore is the period's start.
//
// New refuses a schedule whose Next does not advance: it samples the
// schedule from the engine's clock (Next of Engine.Now, then the next
// periods) and reports a *ConfigError when a start is not after the time
// it was computed from. Should Next fail to advance later, while the
// runtime runs, the runtime logs an error and stops that schedule; its
// other schedules and its handlers go on.
//
// New also refuses a schedule whose machine is not registered, cannot be
// created, or could lose the key before the schedule's next period: the
// machine's Policy.Idempotency must release the key in no state and hold
// it (Retention) either for the job's life (zero) or for at least two of
// the schedule's longest gaps between periods. Pruning a period's job
// releases its key too: keep finished periodic jobs longer than a period.
//
// Periods are read on the engine's clock (Engine.Now); the runtime's Clock
// times the waits. Periodic jobs are created by Run, not by Drain.
func Periodic(name, machine string, s Schedule, opts ...PeriodicOption) Option {
	return func(c *config) {
		pj := &periodic{name: name, machine: machine, schedule: s, payload: func(time.Time) ([]byte, error) { return nil, nil }}
		for i, o := range opts {
			if o == nil {
				c.problem("periodic %q: option #%d is nil", name, i+1)
				continue
			}
			o(pj)
		}
		c.periodics = append(c.periodics, pj)
	}
}

// PeriodKey returns the idempotency key of the job of schedule name for
// the period starting at start.
func PeriodKey(name string, start time.Time) string {
	return jobstate.Key("periodic", name, start.UTC().Format(time.RFC3339Nano))
}

// gapSamples is how many periods validatePeriodic looks at to check that
// a schedule advances and to find its longest gap.
const gapSamples = 64

// validatePeriodic reports what makes pj unusable with eng.
func (c *config) validatePeriodic(eng *jobstate.Engine, pj *periodic, seen map[string]bool) {
	switch {
	case pj.name == "":
		c.problem("periodic job with no name")
		return
	case seen[pj.name]:
		c.problem("periodic %q registered twice", pj.name)
		return
	case pj.schedule == nil:
		c.problem("periodic %q: nil schedule", pj.name)
		return
	case pj.payload == nil:
		c.problem("periodic %q: nil payload function", pj.name)
		return
	case pj.catchUp != CatchUpNone && pj.catchUp != CatchUpLast:
		c.problem("periodic %q: unknown catch-up policy %d", pj.name, pj.catchUp)
	}
	seen[pj.name] = true
	if e, ok := pj.schedule.(every); ok && e <= 0 {
		c.problem("periodic %q: interval %s is not positive", pj.name, time.Duration(e))
		return
	}
	gap, stuck := sampleSchedule(pj.schedule, eng.Now())
	if stuck != nil {
		c.problem("periodic %q: the schedule does not advance: Next(%s) = %s", pj.name,
			stuck.from.Format(time.RFC3339Nano), stuck.next.Format(time.RFC3339Nano))
		return
	}
	def, ok := eng.Machine(pj.machine)
	if !ok {
		c.problem("periodic %q: machine %q is not registered", pj.name, pj.machine)
		return
	}
	pol := def.Policy().Idempotency
	if len(pol.ReleaseIn) > 0 {
		c.problem("periodic %q: machine %q releases idempotency keys in states %v, so a period could get a second job", pj.name, pj.machine, pol.ReleaseIn)
	}
	if pol.Retention > 0 && (gap == 0 || pol.Retention < 2*gap) {
		c.problem("periodic %q: machine %q holds idempotency keys for %s, less than two of the schedule's periods (%s)", pj.name, pj.machine, pol.Retention, gap)
	}
}

// stall is a step where a schedule failed to advance: Next(from) = next,
// a non-zero time not after from.
type stall struct{ from, next time.Time }

// sampleSchedule computes Next of now, then of each start, for up to
// gapSamples periods. It returns the longest gap between consecutive
// starts (zero when s ends within them), or the first step that did not
// advance.
func sampleSchedule(s Schedule, now time.Time) (time.Duration, *stall) {
	var gap time.Duration
	from := now
	for i := 0; i <= gapSamples; i++ {
		next := s.Next(from)
		if next.IsZero() {
			return 0, nil
		}
		if !next.After(from) {
			return 0, &stall{from: from, next: next}
		}
		if i > 0 {
			gap = max(gap, next.Sub(from))
		}
		from = next
	}
	return gap, nil
}

// lastStart returns the last period start of s at or before now, and
// whether there is one within a year: it looks back in doubling steps, then
// forward period by period.
func lastStart(s Schedule, now time.Time) (time.Time, bool) {
	for back := time.Second; back <= 366*24*time.Hour; back *= 2 {
		t := s.Next(now.Add(-back))
		if t.IsZero() || t.After(now) {
			continue
		}
		for {
			n := s.Next(t)
			if n.IsZero() || n.After(now) || !n.After(t) {
				return t, true
			}
			t = n
		}
	}
	return time.Time{}, false
}

// scheduler creates pj's jobs until ctx ends, the schedule ends, or its
// Next fails to advance.
//
// It waits for the first period start after the last period it handled
// (or after its own start), so that a period that began while the
// previous one's job was being created is created at once, not skipped.
// When it wakes more than a period late, it creates the latest period's
// job only.
func (w *Worker) scheduler(ctx context.Context, pj *periodic) {
	t := w.clock.NewTimer(0)
	defer t.Stop()
	after := w.eng.Now() // periods starting after it have no job from here yet
	if pj.catchUp == CatchUpLast {
		if start, ok := lastStart(pj.schedule, after); ok {
			w.createPeriod(ctx, t, pj, start)
		}
	}
	for {
		next := pj.schedule.Next(after)
		if next.IsZero() {
			w.logf(ctx, slog.LevelInfo, "periodic schedule ended", slog.String("periodic", pj.name))
			return
		}
		if !next.After(after) {
			w.logf(ctx, slog.LevelError, "periodic schedule stopped: Next does not advance",
				slog.String("periodic", pj.name), slog.Time("from", after), slog.Time("next", next))
			return
		}
		if d := next.Sub(w.eng.Now()); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			// The timer may fire early by the two clocks' difference:
			// wait again until the engine's clock reaches the period.
			if w.eng.Now().Before(next) {
				continue
			}
		} else if ctx.Err() != nil {
			return
		}
		start, ok := lastStart(pj.schedule, w.eng.Now())
		if !ok || start.Before(next) {
			start = next
		}
		w.createPeriod(ctx, t, pj, start)
		after = start
	}
}

// createPeriod creates the job of pj's period starting at start, unless a
// process created it already. While the store cannot be reached it tries
// again every poll interval, on timer t, until the next period starts or
// ctx ends.
func (w *Worker) createPeriod(ctx context.Context, t Timer, pj *periodic, start time.Time) {
	log := []any{slog.String("periodic", pj.name), slog.Time("period", start)}
	payload, err := pj.payload(start)
	if err != nil {
		w.logf(ctx, slog.LevelError, "periodic payload failed; period skipped", append(log, slog.Any("error", err))...)
		return
	}
	key := PeriodKey(pj.name, start)
	nj := jobstate.NewJob{
		Machine: pj.machine, Payload: payload, NotBefore: start, Key: key,
		// The period alone identifies the job, whatever payload a
		// process computed: another process's creation is not a conflict.
		Fingerprint: key,
		Actor:       "periodic:" + pj.name,
	}
	for {
		created, err := w.eng.Create(ctx, nj)
		switch {
		case err == nil && !created.Existing:
			w.logf(ctx, slog.LevelDebug, "periodic job created", append(log, slog.String("job", created.Job.ID.String()))...)
			w.poke()
			return
		case err == nil:
			w.logf(ctx, slog.LevelDebug, "periodic job exists", append(log, slog.String("job", created.Job.ID.String()))...)
			return
		case ctx.Err() != nil:
			return
		case !unavailable(err):
			w.logf(ctx, slog.LevelError, "periodic job not created", append(log, slog.Any("error", fmt.Errorf("create: %w", err)))...)
			return
		}
		if next := pj.schedule.Next(start); !next.IsZero() && !w.eng.Now().Before(next) {
			w.logf(ctx, slog.LevelError, "periodic job not created before the next period: store unavailable", append(log, slog.Any("error", err))...)
			return
		}
		w.logf(ctx, slog.LevelWarn, "periodic job not created yet: store unavailable", append(log, slog.Any("error", err))...)
		t.Reset(w.jittered(w.poll))
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
