package worker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Worker claims jobs of the machines it handles and runs their handlers,
// within per-machine and overall concurrency limits, renewing leases,
// committing results, failing and snoozing executions, and sweeping. Make
// one with New, then call Run (once) or Drain. Its methods are safe for
// concurrent use.
type Worker struct {
	eng    *jobstate.Engine
	name   string
	named  bool
	routes []*route
	// periodics are the schedules whose jobs Run creates (periodic.go).
	periodics []*periodic
	limit     int
	log       *slog.Logger
	clock     Clock
	poll      time.Duration
	sweep     time.Duration
	grace     time.Duration
	jitter    float64

	// running counts the slots taken overall (one per handler goroutine).
	running atomic.Int64
	// starved is set when a machine had free slots of its own but the
	// overall limit left none: a freed slot then wakes the claim loop.
	starved atomic.Bool
	// wake asks the claim loop (or Drain) to try again.
	wake chan struct{}
	// launched counts the jobs claimed, for Drain's end test.
	launched atomic.Int64
	// rr rotates the machine claimed first (claim loop or Drain only).
	rr int
	// ahead holds a token per ending write in flight after its handler
	// returned (WithCommitsAhead); its capacity is the bound, and with
	// none each handler's goroutine makes its own write.
	ahead chan struct{}
	// pending counts those writes, for Drain's end test.
	pending atomic.Int64
	// pace bounds them further by how long they take (pace.go).
	pace *pace
	// batch is set when the store claims in batches: claims (the claim
	// loop's, or a finishing handler goroutine's) then take jobs for all
	// the machine's free slots at once, one claim of a machine at a time,
	// instead of one job per goroutine.
	batch bool

	mu     sync.Mutex
	phase  phase
	level  int // stop signals received: 1 graceful, 2 hard
	ended  bool
	tasks  map[*Task]struct{}
	budget int // jobs Drain may still claim; -1 without a limit

	graceCh chan struct{} // closed by the first stop signal
	hardCh  chan struct{} // closed by the second
	done    chan struct{} // closed when Run returns

	// endCh is closed when the grace period of the current Run or Drain
	// ends (endGrace): the writes that end handlers' executions stop
	// their tries then. halt is closed by a hard stop (Run's second
	// signal, Drain's context ending): give-backs stop their tries then.
	// Both are made by begin, under mu.
	endCh chan struct{}
	halt  <-chan struct{}

	// base is the parent of handlers' contexts (the Run or Drain context
	// without its cancellation); ops is the context of the runtime's own
	// engine calls that must complete (outcomes, give-backs).
	base context.Context
	wg   sync.WaitGroup
	// claims counts the claims in flight in handler goroutines, each with
	// the start or give-back of the jobs it returns; Run waits for them
	// on any stop, a hard one included. Added to only under mu before
	// the first stop signal (claimStart).
	claims sync.WaitGroup

	// out follows whether the store can be reached, for the logs.
	out outage
}

type phase int

const (
	phaseIdle phase = iota
	phaseRunning
	phaseDraining
	phaseDone
)

// route is one machine's handler and limits.
type route struct {
	machine string
	def     *jobstate.Definition
	h       Handler
	limit   int
	args    any

	ttl        time.Duration
	ttlSet     bool
	hbEvery    time.Duration
	hbSet      bool
	timeout    time.Duration
	timeoutSet bool

	requireStart bool
	maxExec      int

	running atomic.Int64
	// more is set when the last claim for the machine took as many jobs
	// as it asked for (or could not ask for any): a handler goroutine that
	// finishes then claims the next job itself.
	more atomic.Bool
	// claiming is set while a claim of the machine is in flight (by the
	// claim loop or a handler goroutine on a store with batch claims):
	// one claim at a time fills its free slots.
	claiming atomic.Bool
	// rewake is set when a round of the claim loop could not claim for
	// the machine (a claim in flight, or no free slot): the claim in
	// flight, or the slot's goroutine, may have looked before the jobs
	// that woke the loop were ready. The one that ends its claim or frees
	// its slot next wakes the loop again, so that no wake-up is lost.
	rewake atomic.Bool
	// claimAvg and claimPerJob are the moving averages of the machine's
	// claim durations and durations per job claimed, in nanoseconds, and
	// slotFreed (capacity 1) is signalled when a slot is freed: for
	// gather.
	claimAvg    atomic.Int64
	claimPerJob atomic.Int64
	slotFreed   chan struct{}
}

func (r *route) request(worker string) jobstate.ClaimRequest {
	return jobstate.ClaimRequest{Machine: r.machine, Worker: worker, TTL: r.ttl, Args: r.args}
}

// New returns a worker running the handlers given by Handle options on
// eng. Every problem in the configuration is reported at once, in a
// *ConfigError (errors.Is with jobstate.ErrInvalidArgument): a nil engine
// (or one not made by jobstate.New), no handler, a machine the engine does
// not know or that has no claim rule, a machine handled twice, a nil
// handler, a concurrency below 1, and bad durations. New never panics on
// its input.
func New(eng *jobstate.Engine, opts ...Option) (*Worker, error) {
	c := &config{poll: DefaultPollInterval, sweep: DefaultSweepInterval, grace: DefaultGracePeriod, jitter: DefaultJitter, clock: SystemClock{}}
	for i, o := range opts {
		if o == nil {
			c.problem("option #%d is nil", i+1)
			continue
		}
		o(c)
	}
	if eng == nil || eng.Store() == nil {
		c.problem("nil engine: make one with jobstate.New")
	} else {
		seen := make(map[string]bool)
		for _, r := range c.routes {
			c.validateRoute(eng, r, seen)
		}
		names := make(map[string]bool)
		for _, pj := range c.periodics {
			c.validatePeriodic(eng, pj, names)
		}
	}
	if len(c.routes) == 0 && len(c.periodics) == 0 {
		c.problem("no handler: register one per machine with worker.Handle")
	}
	if len(c.problems) > 0 {
		return nil, &ConfigError{Problems: c.problems}
	}
	if c.concurrency == 0 {
		for _, r := range c.routes {
			c.concurrency += r.limit
		}
	}
	if !c.aheadSet {
		if g, ok := eng.Store().(WriteGrouper); ok && g.GroupsWrites() {
			c.ahead = max(MinCommitsAhead, DefaultCommitsAhead*c.concurrency)
		}
	}
	if !c.named {
		c.name = defaultName()
	}
	logger := c.logger
	if logger == nil {
		logger = slog.New(discard{})
	}
	_, batch := eng.Store().(jobstate.BatchClaimer)
	log := logger.With(slog.String("worker", c.name))
	return &Worker{
		eng: eng, batch: batch, name: c.name, named: c.named, routes: c.routes, periodics: c.periodics, limit: c.concurrency,
		log: log, clock: c.clock,
		poll: c.poll, sweep: c.sweep, grace: c.grace, jitter: c.jitter,
		wake: make(chan struct{}, 1), tasks: make(map[*Task]struct{}), budget: -1,
		ahead:   make(chan struct{}, c.ahead),
		pace:    newPace(c.ahead, c.concurrency),
		graceCh: make(chan struct{}), hardCh: make(chan struct{}), done: make(chan struct{}),
		out: outage{log: log, now: eng.Now},
	}, nil
}

// Name returns the worker's name: the owner of its leases.
func (w *Worker) Name() string { return w.name }

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
}

// jittered returns d randomised by the worker's jitter.
func (w *Worker) jittered(d time.Duration) time.Duration {
	if w.jitter == 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + w.jitter*(2*rand.Float64()-1)))
}

// poke wakes the claim loop without blocking.
func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stopping reports whether the first stop signal arrived.
func (w *Worker) stopping() bool {
	select {
	case <-w.graceCh:
		return true
	default:
		return false
	}
}

// logf logs msg at level with args, if the logger wants it.
func (w *Worker) logf(ctx context.Context, level slog.Level, msg string, args ...any) {
	if w.log.Enabled(ctx, level) {
		w.log.Log(ctx, level, msg, args...)
	}
}

// logTask logs msg about t's job at level, if the logger wants it.
func (w *Worker) logTask(ctx context.Context, level slog.Level, t *Task, msg string, args ...any) {
	if !w.log.Enabled(ctx, level) {
		return
	}
	w.log.Log(ctx, level, msg, append(t.attrs(), args...)...)
}

// discard is a slog.Handler that drops every record.
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }
