package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/doccheck"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/memstore"
)

// update makes TestDiagramIsCurrent rewrite the diagram in the docs page.
var update = flag.Bool("update", false, "rewrite the mermaid block of docs/examples/bounty.md")

// docPage is the example's documentation page, relative to this package.
const docPage = "../../docs/examples/bounty.md"

// The tests' cast and contents.
const (
	buyerName = "buyer"
	depositor = "buyer-wallet"
	reward    = 10000
	// pass and fail are contents the oracle scores 100 and 0 against the
	// tests' rubric.
	pass = "bonjour"
	fail = "salut"
	// crash makes the tests' oracle fail.
	crash = "oracle crash"
)

// epoch is when every test starts.
var epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// errOracleDown is the tests' oracle failing.
var errOracleDown = errors.New("oracle unavailable")

// testOracle is DemoOracle, except that it fails on the content crash.
func testOracle(terms Terms, content string) (int, error) {
	if content == crash {
		return 0, errOracleDown
	}
	return DemoOracle(terms, content)
}

// world is a marketplace over a fresh store and database, on a manual
// clock, with registered workers alice, bob, carol and dave.
type world struct {
	t     *testing.T
	ctx   context.Context
	clock *jobstate.ManualClock
	store jobstate.Store
	db    *DB
	m     *Market
	txs   atomic.Int64
	mu    sync.Mutex
	jobs  []uuid.UUID
}

// newWorld starts a marketplace for one test and checks, when the test
// ends, every bounty it posted (see checkBounty).
func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldOn(t, func(*DB) jobstate.Store { return memstore.New() })
}

// newWorldOn is newWorld over the store mk makes, given the world's
// database.
func newWorldOn(t *testing.T, mk func(*DB) jobstate.Store) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), clock: jobstate.NewManualClock(epoch), db: NewDB()}
	w.store = mk(w.db)
	w.restart()
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		w.m.Register(name)
	}
	t.Cleanup(func() {
		for _, id := range w.jobs {
			w.checkBounty(id)
		}
	})
	return w
}

// restart starts a new server over the world's store and database (the
// previous one is dropped, as if it had crashed) and returns the report of
// its start-up recovery.
func (w *world) restart() jobstate.SweepReport {
	w.t.Helper()
	m, rep, err := Start(w.ctx, w.store, w.db, w.clock, testOracle)
	require.NoError(w.t, err)
	w.m = m
	return rep
}

// checkBounty replays a bounty's history on the machine and checks the
// invariants that hold at all times: the history leads to the stored
// state, at most one submission passed and only in a resolved bounty,
// nothing is judging once the bounty is over.
func (w *world) checkBounty(id uuid.UUID) {
	t := w.t
	t.Helper()
	s := w.snap(id)
	st, err := w.m.Definition().Replay(s.History)
	require.NoError(t, err, "the history replays")
	assert.Equal(t, s.Job.State, st, "the history leads to the stored state")
	var done []jobstate.Execution
	live := 0
	for _, x := range s.Execs {
		if x.Status == jobstate.ExecDone {
			done = append(done, x)
		}
		if x.Status.Live() {
			live++
		}
	}
	assert.LessOrEqual(t, len(done), 1, "at most one submission passes")
	if s.Job.State == Resolved {
		require.Len(t, done, 1, "a resolved bounty has its passed submission")
		assert.Equal(t, done[0].ID, s.Job.Committed)
		res, err := ResolutionOf(s.Job)
		require.NoError(t, err)
		assert.Equal(t, done[0].Owner, res.Winner, "the winner is the passed submission's worker")
	} else {
		assert.Empty(t, done, "only a resolved bounty has a passed submission")
	}
	if s.Job.Terminal() {
		assert.Zero(t, live, "nothing judges a finished bounty")
	}
	assert.Equal(t, live, s.Job.Leases)
}

// terms are the tests' default terms, with the rubric pass satisfies.
func terms() Terms {
	return Terms{Title: "say hello in French", Reward: reward, Rubric: []string{pass}}
}

// post posts a bounty with t's terms and deadline.
func (w *world) post(t Terms, deadline time.Time) jobstate.Job {
	w.t.Helper()
	job, err := w.m.Post(w.ctx, buyerName, t, deadline)
	require.NoError(w.t, err)
	require.Equal(w.t, Open, job.State)
	w.mu.Lock()
	w.jobs = append(w.jobs, job.ID)
	w.mu.Unlock()
	return job
}

// deposit returns a deposit from the buyer's wallet with a fresh tx hash.
func (w *world) deposit() Deposit {
	return Deposit{TxHash: fmt.Sprintf("0x%064x", w.txs.Add(1)), From: depositor}
}

// fund funds a bounty as its buyer.
func (w *world) fund(id uuid.UUID) jobstate.Job {
	w.t.Helper()
	job, err := w.m.Fund(w.ctx, id, buyerName, w.deposit())
	require.NoError(w.t, err)
	require.Equal(w.t, Funded, job.State)
	return job
}

// funded posts and funds a bounty with the default terms.
func (w *world) funded() jobstate.Job {
	w.t.Helper()
	return w.fund(w.post(terms(), time.Time{}).ID)
}

// fundedWith posts and funds a bounty with the given terms and deadline.
func (w *world) fundedWith(t Terms, deadline time.Time) jobstate.Job {
	w.t.Helper()
	return w.fund(w.post(t, deadline).ID)
}

// join has worker claim the bounty and expects it accepted.
func (w *world) join(id uuid.UUID, worker string) {
	w.t.Helper()
	job, err := w.m.Join(w.ctx, id, worker)
	require.NoError(w.t, err)
	require.Equal(w.t, Funded, job.State)
}

// submit submits content as worker, who claims the bounty first if it has
// not yet, and expects the submission accepted (judging).
func (w *world) submit(id uuid.UUID, worker, content string) Submission {
	w.t.Helper()
	if !w.db.Joined(id, worker) {
		w.join(id, worker)
	}
	s, err := w.m.Submit(w.ctx, id, worker, content)
	require.NoError(w.t, err)
	return s
}

// judge judges a submission and expects the engine to accept the verdict.
func (w *world) judge(s Submission) Verdict {
	w.t.Helper()
	v, err := w.m.Judge(w.ctx, s)
	require.NoError(w.t, err)
	return v
}

// resolved returns a bounty won by alice.
func (w *world) resolved() jobstate.Job {
	w.t.Helper()
	b := w.funded()
	w.judge(w.submit(b.ID, "alice", pass))
	return w.get(b.ID)
}

// expired returns a funded bounty expired on read.
func (w *world) expired() jobstate.Job {
	w.t.Helper()
	b := w.fundedWith(terms(), w.clock.Now().Add(time.Hour))
	w.clock.Advance(time.Hour)
	job := w.get(b.ID)
	require.Equal(w.t, Expired, job.State)
	return job
}

// cancelled returns a bounty cancelled by its buyer, after funding it when
// wasFunded.
func (w *world) cancelled(wasFunded bool) jobstate.Job {
	w.t.Helper()
	b := w.post(terms(), time.Time{})
	if wasFunded {
		w.fund(b.ID)
	}
	job, err := w.m.Cancel(w.ctx, b.ID, buyerName)
	require.NoError(w.t, err)
	require.Equal(w.t, Cancelled, job.State)
	return job
}

// get reads a bounty through the market (lazy expiry applies).
func (w *world) get(id uuid.UUID) jobstate.Job {
	w.t.Helper()
	job, err := w.m.Get(w.ctx, id)
	require.NoError(w.t, err)
	return job
}

// submissions lists a bounty's submissions.
func (w *world) submissions(id uuid.UUID) []SubmissionView {
	w.t.Helper()
	subs, err := w.m.Submissions(w.ctx, id)
	require.NoError(w.t, err)
	return subs
}

// snapshot is everything stored about a bounty, read without lazy expiry,
// with the whole application database.
type snapshot struct {
	Job     jobstate.Job
	Execs   []jobstate.Execution
	History []jobstate.Transition
	Effects []jobstate.EffectRecord
	DB      DBState
}

// snap reads a bounty's snapshot straight from the store.
func (w *world) snap(id uuid.UUID) snapshot {
	w.t.Helper()
	var s snapshot
	var err error
	s.Job, err = w.store.Get(w.ctx, id)
	require.NoError(w.t, err)
	s.Execs, err = w.store.Executions(w.ctx, id)
	require.NoError(w.t, err)
	s.History, err = w.store.History(w.ctx, id)
	require.NoError(w.t, err)
	s.Effects, err = w.store.Effects(w.ctx, id)
	require.NoError(w.t, err)
	s.DB = w.db.State()
	return s
}

// refused checks that err matches every sentinel and that the operation
// changed nothing: the stored job, its executions, history and effects,
// and the application database are as before.
func (w *world) refused(before snapshot, err error, sentinels ...error) {
	w.t.Helper()
	require.Error(w.t, err)
	for _, s := range sentinels {
		assert.ErrorIs(w.t, err, s)
	}
	assert.Equal(w.t, before, w.snap(before.Job.ID), "a refused operation changes nothing")
}

// last returns a bounty's last history record.
func (w *world) last(id uuid.UUID) jobstate.Transition {
	w.t.Helper()
	h := w.snap(id).History
	return h[len(h)-1]
}

// statuses lists a bounty's submissions as "worker status" strings.
func (w *world) statuses(id uuid.UUID) []string {
	w.t.Helper()
	var out []string
	for _, s := range w.submissions(id) {
		out = append(out, s.Worker+" "+string(s.Status))
	}
	return out
}

// TestRuleEffectsReadTheirFiring checks that the rule effects take what
// they record from the firing the engine gives them (jobstate.FiringOf):
// the deposit from the fund call's arguments, the worker from the claim's
// actor; run outside a firing, they refuse and record nothing.
func TestRuleEffectsReadTheirFiring(t *testing.T) {
	t.Run("fund_records_the_calls_deposit", func(t *testing.T) {
		w := newWorld(t)
		b := w.post(terms(), time.Time{})
		d := w.deposit()
		_, err := w.m.Fund(w.ctx, b.ID, buyerName, d)
		require.NoError(t, err)
		e, _ := w.db.Escrow(b.ID)
		assert.Equal(t, d, e.Deposit)
		assert.Equal(t, b.ID, w.db.State().Txs[d.TxHash])
	})
	t.Run("join_counts_for_the_joins_actor", func(t *testing.T) {
		w := newWorld(t)
		b := w.funded()
		w.join(b.ID, "bob")
		rec := w.last(b.ID)
		assert.Equal(t, []any{Join, "bob"}, []any{rec.Event, rec.Actor})
		for name, claims := range map[string]int{"alice": 0, "bob": 1, "carol": 0} {
			a, _ := w.db.Agent(name)
			assert.Equal(t, claims, a.Claims, name)
		}
		assert.Equal(t, []string{"bob"}, w.db.Participants(b.ID))
	})
	t.Run("outside_a_firing_nothing_is_recorded", func(t *testing.T) {
		w := newWorld(t)
		b := w.post(terms(), time.Time{})
		before := w.db.State()
		assert.ErrorIs(t, w.db.recordDeposit(w.ctx, b), ErrNoFiring)
		assert.ErrorIs(t, w.db.recordJoin(w.ctx, b), ErrNoFiring)
		assert.Equal(t, before, w.db.State())
	})
}

// TestInvalidTransitions tries every endpoint in every state: what the
// lifecycle does not allow is refused with the library's error and changes
// nothing.
func TestInvalidTransitions(t *testing.T) {
	ok := error(nil)
	type op struct {
		name string
		do   func(w *world, id uuid.UUID) error
	}
	ops := []op{
		{"fund", func(w *world, id uuid.UUID) error { _, err := w.m.Fund(w.ctx, id, buyerName, w.deposit()); return err }},
		{"cancel", func(w *world, id uuid.UUID) error { _, err := w.m.Cancel(w.ctx, id, buyerName); return err }},
		{"claim", func(w *world, id uuid.UUID) error { _, err := w.m.Join(w.ctx, id, "carol"); return err }},
		{"submit", func(w *world, id uuid.UUID) error {
			if !w.db.Joined(id, "dave") {
				if _, err := w.m.Join(w.ctx, id, "dave"); err != nil {
					return err
				}
			}
			_, err := w.m.Submit(w.ctx, id, "dave", pass)
			return err
		}},
		{"refund", func(w *world, id uuid.UUID) error { _, err := w.m.Refund(w.ctx, id, buyerName); return err }},
	}
	states := []struct {
		state jobstate.State
		make  func(w *world) jobstate.Job
		want  []error // per op: fund, cancel, claim, submit, refund
	}{
		{Open, func(w *world) jobstate.Job { return w.post(terms(), time.Time{}) },
			[]error{ok, ok, jobstate.ErrInvalidTransition, jobstate.ErrInvalidTransition, jobstate.ErrInvalidTransition}},
		{Funded, (*world).funded,
			[]error{jobstate.ErrInvalidTransition, ok, ok, ok, jobstate.ErrInvalidTransition}},
		{Resolved, (*world).resolved,
			[]error{jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrInvalidTransition}},
		{Expired, (*world).expired,
			[]error{jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, ok}},
		{Cancelled, func(w *world) jobstate.Job { return w.cancelled(true) },
			[]error{jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, jobstate.ErrTerminal, ok}},
	}
	for _, st := range states {
		for i, o := range ops {
			t.Run(string(st.state)+"_"+o.name, func(t *testing.T) {
				w := newWorld(t)
				b := st.make(w)
				require.Equal(t, st.state, b.State)
				before := w.snap(b.ID)
				err := o.do(w, b.ID)
				if st.want[i] == nil {
					assert.NoError(t, err)
					return
				}
				w.refused(before, err, st.want[i])
			})
		}
	}
}

// TestStory runs the program and checks its story.
func TestStory(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		"acme funds it (tx 0x5eed01 from acme-wallet): funded",
		"mallory claims: refused (guard_refused: worker is not registered)",
		"acme claims: refused (guard_refused: the buyer cannot work on their own bounty)",
		"alice submits before claiming: refused (guard_refused: the worker has not claimed this bounty)",
		"alice, bob and carol claim it: participants [alice bob carol]",
		"alice, bob and carol submit at once: 3 judging, bounty funded",
		"alice's verdict: score 0 below 80: failed; bounty still funded, 2 judging",
		"score 100: passed, won",
		"score 100: discarded (already_committed)",
		"$80.00 to", "$20.00 to fee-wallet",
		"the store still holds funded",
		`bounty read: expired; submissions: dave failed (job moved to "expired" by "expire")`,
		"dave's verdict arrives: refused (lease_lost",
		"mallory asks for the refund: refused (guard_refused: only the buyer may do that)",
		"acme asks for the refund: $50.00 back to acme-wallet (refund tx off-chain); bounty still expired",
		"acme asks for the refund: refused (effect_applied)",
		"acme cancels: refused (guard_refused: a submission is being judged (409))",
		"acme cancels: cancelled",
		"comes back a minute later, within the judging lease",
		"start-up recovery: 2 stuck submission(s) failed",
		"failed (server restarted)",
		"a verdict for bob from the old server arrives: refused (lease_lost: execution aborted: server restarted)",
		"bounty read: funded; submissions:",
		"bob passed",
		"2m0s later, the sweep: 1 stuck submission(s) failed",
		"bounty read: funded; submissions: carol failed (lease expired)",
		"a minute passes (its deadline); the store still holds funded",
		"6. \"Proofread a poem\"                     expired",
	} {
		assert.Contains(t, s, want)
	}
	assert.Equal(t, 1, strings.Count(s, "passed, won"))
}

// TestMachineIsTheLiteralDefinition fails when the machine this program
// registers differs from the bounty marketplace's literal definition
// (internal/machines/bounty).
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := NewMachine(NewDB())
	require.NoError(t, err)
	assert.Equal(t, bounty.Name, def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

// TestDiagramIsCurrent checks that the diagram in the documentation page is
// the machine's own; go test -run TestDiagramIsCurrent -update rewrites it.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := NewMachine(NewDB())
	require.NoError(t, err)
	doccheck.Diagram(t, docPage, def, *update)
}
