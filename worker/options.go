package worker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/typednil"
)

// Defaults of the worker's settings.
const (
	// DefaultPollInterval is how often a worker looks for due jobs when
	// nothing woke it earlier (WithPollInterval).
	DefaultPollInterval = time.Second
	// DefaultSweepInterval is how often a worker runs Engine.Sweep
	// (WithSweepInterval).
	DefaultSweepInterval = time.Second
	// DefaultGracePeriod is how long a stopping worker lets running
	// handlers finish (WithGracePeriod).
	DefaultGracePeriod = 10 * time.Second
	// DefaultCommitsAhead is the default bound of WithCommitsAhead per
	// slot of the overall concurrency.
	DefaultCommitsAhead = 10
	// MinCommitsAhead is the least default bound of WithCommitsAhead.
	MinCommitsAhead = 1000
	// DefaultJitter is the fraction by which poll and sweep intervals are
	// randomised either way (WithJitter).
	DefaultJitter = 0.2
)

// Option configures a Worker (see New).
type Option func(*config)

// HandlerOption configures the running of one machine's jobs (see Handle).
type HandlerOption func(*route)

type config struct {
	name        string
	named       bool
	routes      []*route
	periodics   []*periodic
	concurrency int
	ahead       int
	aheadSet    bool
	logger      *slog.Logger
	clock       Clock
	poll        time.Duration
	sweep       time.Duration
	grace       time.Duration
	jitter      float64
	problems    []string
}

func (c *config) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// Handle registers h for the jobs of machine, running at most concurrency
// of them at once. Every machine handled needs its own Handle; a machine
// may be handled once. The machine must be registered with the engine and
// have a claim rule, concurrency must be at least 1, and h must not be
// nil.
func Handle(machine string, h Handler, concurrency int, opts ...HandlerOption) Option {
	return func(c *config) {
		r := &route{machine: machine, h: h, limit: concurrency, slotFreed: make(chan struct{}, 1)}
		for i, o := range opts {
			if o == nil {
				c.problem("machine %q: handler option #%d is nil", machine, i+1)
				continue
			}
			o(r)
		}
		c.routes = append(c.routes, r)
	}
}

// LeaseTTL sets the lease length the worker claims jobs with (Claim's
// ClaimRequest.TTL). The default is the machine's Policy.LeaseTTL. It must
// be positive and at most jobstate.MaxDuration.
func LeaseTTL(d time.Duration) HandlerOption {
	return func(r *route) { r.ttl, r.ttlSet = d, true }
}

// HeartbeatInterval sets how often a running job's lease is renewed. The
// default is a third of the lease TTL. It must be positive and shorter
// than the lease TTL.
func HeartbeatInterval(d time.Duration) HandlerOption {
	return func(r *route) { r.hbEvery, r.hbSet = d, true }
}

// Timeout bounds how long one run of the handler may take: when it passes,
// the handler's context is cancelled with a *TimeoutError as its cause and
// the execution fails with it. Measured on the worker's Clock. The
// default is no timeout. It must be positive.
func Timeout(d time.Duration) HandlerOption {
	return func(r *route) { r.timeout, r.timeoutSet = d, true }
}

// ClaimArgs sets the arguments the worker's claims pass to the machine's
// claim guards (ClaimRequest.Args).
func ClaimArgs(args any) HandlerOption {
	return func(r *route) { r.args = args }
}

// WithName names the worker: the owner of its leases and the actor of its
// moves. A worker given a name runs Engine.RecoverWorker with it when it
// starts, ending at once the executions a previous process of the same
// name left behind: give each process its own stable name (a pod name,
// host and slot), never one shared by two live processes. Without a name,
// the worker makes up a unique one (host, process id and a random part)
// and recovers nothing.
func WithName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.problem("empty worker name")
		}
		c.name, c.named = name, true
	}
}

// WithConcurrency bounds the number of handlers running at once across
// all machines. The default is the sum of the machines' concurrencies.
// It must be at least 1.
func WithConcurrency(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problem("overall concurrency %d: it must be at least 1", n)
		}
		c.concurrency = n
	}
}

// WriteGrouper is an optional interface of a jobstate.Store: GroupsWrites
// reports whether the store coalesces concurrent writes of different
// jobs into shared transactions (pgstore with Options.GroupCommit), so
// that writes in flight together cost less each. The worker then lets
// handlers' commits run ahead by default (WithCommitsAhead).
type WriteGrouper interface {
	GroupsWrites() bool
}

// WithCommitsAhead bounds the executions whose ending write is still
// being made after their handler has returned. A handler's slot is freed
// as soon as it returns, so that the worker claims the next job while
// the write that ends the execution (Engine.Succeed with the commit and
// its effect, Fail, or Snooze) is made in the background; at most n such
// writes are in flight, and a handler that returns when n are waits,
// holding its slot, until one ends. A store that groups concurrent
// writes into one transaction (pgstore's Options.GroupCommit) then
// commits the jobs of many handlers with one flush while the handlers go
// on with the next jobs. Nothing changes for exactly-once: the commit is
// the same write, the job counts as done only when it has committed, and
// Drain, Run's graceful shutdown and Shutdown wait for every write in
// flight. The lease is not renewed after the handler returns: a write
// that waits longer than the lease's remaining time is refused
// (jobstate.ErrLeaseLost) and the sweep retries the job, as when a
// handler overruns its lease. The default depends on the store: on a
// store that groups concurrent writes (WriteGrouper) it is
// DefaultCommitsAhead per slot of the overall concurrency, and at least
// MinCommitsAhead; on any other store it is 0, since a write that costs
// microseconds in memory gains nothing from being handed to another
// goroutine. 0 makes every handler's slot wait for its own write. It
// must not be negative.
func WithCommitsAhead(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.problem("commits ahead %d: it must not be negative", n)
		}
		c.ahead, c.aheadSet = n, true
	}
}

// WithLogger sets the structured logger. The default discards everything.
// Records carry the attributes worker, and for a job job, machine, state
// and attempt. WARN and ERROR records are kept for what an operator must
// act on (a handler's panic, a lease lost while its handler ran, a table
// that refuses a move, a store outage: one WARN record per outage, and one
// INFO record when it ends); a job's ordinary life (a failure and its
// retry, a snooze, a user's cancel) is INFO or DEBUG.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.problem("nil logger")
			return
		}
		c.logger = l
	}
}

// WithClock sets the clock of the runtime's own timers (heartbeats,
// polls, sweeps, timeouts, the grace period). The default is SystemClock.
// Job state always follows the engine's clock.
func WithClock(clk Clock) Option {
	return func(c *config) {
		if typednil.Is(clk) {
			c.problem("nil clock")
			return
		}
		c.clock = clk
	}
}

// WithPollInterval sets how often the worker tries to claim when nothing
// woke it (DefaultPollInterval). With a store that notifies
// (jobstate.Notifier) polls only catch lost signals and jobs whose
// not-before passed. It must be positive.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.problem("poll interval %s: it must be positive", d)
		}
		c.poll = d
	}
}

// WithSweepInterval sets how often the worker runs Engine.Sweep
// (DefaultSweepInterval). Every worker process sweeps; sweeps of several
// processes are safe together, since every sweep move is atomic. It must
// be positive.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.problem("sweep interval %s: it must be positive", d)
		}
		c.sweep = d
	}
}

// WithGracePeriod sets how long a stopping worker waits for running
// handlers before it cancels them and gives their leases back
// (DefaultGracePeriod). Zero cancels them at once. It must not be
// negative.
func WithGracePeriod(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.problem("grace period %s: it must not be negative", d)
		}
		c.grace = d
	}
}

// WithJitter sets the fraction f by which every poll and sweep interval,
// and every wait before a write that found the store unreachable is made
// again, is randomised, uniformly within [1-f, 1+f) of its length, so that
// the processes sharing a store, and the jobs of one process, do not act in
// step (DefaultJitter). It must be in [0, 1).
func WithJitter(f float64) Option {
	return func(c *config) {
		if !(f >= 0 && f < 1) {
			c.problem("jitter %v: it must be in [0, 1)", f)
		}
		c.jitter = f
	}
}

// validate checks each route against the engine and fills in its
// defaults.
func (c *config) validateRoute(eng *jobstate.Engine, r *route, seen map[string]bool) {
	name := r.machine
	if seen[name] {
		c.problem("machine %q handled twice", name)
		return
	}
	seen[name] = true
	if typednil.Is(r.h) {
		c.problem("machine %q: nil handler", name)
	}
	if r.limit < 1 {
		c.problem("machine %q: concurrency %d: it must be at least 1", name, r.limit)
	}
	def, ok := eng.Machine(name)
	if !ok {
		c.problem("machine %q is not registered with the engine (%v)", name, jobstate.ErrUnknownMachine)
		return
	}
	r.def = def
	if !claimable(def) {
		c.problem("machine %q has no claim rule from a ready state: no job of it can ever be claimed", name)
	}
	p := def.Policy()
	r.requireStart, r.maxExec = p.RequireStart, p.MaxExecutions
	ttl := p.LeaseTTL
	if r.ttlSet {
		if r.ttl <= 0 || r.ttl > jobstate.MaxDuration {
			c.problem("machine %q: lease TTL %s: it must be positive and at most %s", name, r.ttl, jobstate.MaxDuration)
		}
		ttl = r.ttl
	}
	if r.hbSet {
		if r.hbEvery <= 0 || r.hbEvery >= ttl {
			c.problem("machine %q: heartbeat interval %s: it must be positive and shorter than the lease TTL %s", name, r.hbEvery, ttl)
		}
	} else {
		r.hbEvery = max(ttl/3, 1)
	}
	if r.timeoutSet && r.timeout <= 0 {
		c.problem("machine %q: timeout %s: it must be positive", name, r.timeout)
	}
}

// claimable reports whether def has a claim rule from a ready state.
func claimable(def *jobstate.Definition) bool {
	for _, s := range def.States() {
		if s.Kind == jobstate.KindReady && def.Can(s.Name, jobstate.EventClaim) {
			return true
		}
	}
	return false
}
