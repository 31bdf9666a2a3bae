package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
	"github.com/jobstate/jobstate/internal/doccheck"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/worker"
)

// update rewrites the diagram in docs/examples/imagegen.md.
var update = flag.Bool("update", false, "rewrite the mermaid block of docs/examples/imagegen.md")

// epoch is the tests' start time: five seconds into a minute, so that a
// duplicate click ten seconds later is in the same minute.
var epoch = time.Date(2026, 3, 2, 9, 0, 5, 0, time.UTC)

// harness is a fresh service for one test, with helpers that drive jobs.
type harness struct {
	t   *testing.T
	ctx context.Context
	env *jobstatetest.Env // the jobstatetest helpers on the service's engine
	mem *memstore.Store
	*App
}

// newHarness returns a service whose users alice, bob and carol have 100
// credits, and poor has fewer than one image costs.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, map[string]int{"alice": 100, "bob": 100, "carol": 100, "poor": CreditsPerImage - 1})
}

// newHarnessWith returns a service whose users have the given credits.
func newHarnessWith(t *testing.T, balances map[string]int) *harness {
	t.Helper()
	store := memstore.New()
	app, err := NewAppOn(store, epoch, balances)
	require.NoError(t, err)
	env := &jobstatetest.Env{T: t, Ctx: context.Background(), Clock: app.Clock, Store: store, Engine: app.Eng}
	return &harness{t: t, ctx: env.Ctx, env: env, mem: store, App: app}
}

// request is a valid request by user for prompt.
func request(user, prompt string) Request {
	return Request{UserID: user, Prompt: prompt, Params: Params{Size: "512x512", Style: "photo"}}
}

// create makes a new job and fails the test if none was created.
func (h *harness) create(r Request) jobstate.Job {
	h.t.Helper()
	c, err := h.CreateJob(h.ctx, r)
	require.NoError(h.t, err)
	require.False(h.t, c.Existing, "a new job")
	return c.Job
}

// claim takes the next due job as worker w.
func (h *harness) claim(w string) jobstate.Claimed {
	h.t.Helper()
	c, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: w})
	require.NoError(h.t, err)
	return c
}

// get reads a job from the store.
func (h *harness) get(id uuid.UUID) jobstate.Job {
	h.t.Helper()
	j, err := h.Store.Get(h.ctx, id)
	require.NoError(h.t, err)
	return j
}

// history reads a job's history and checks that it replays to its state.
func (h *harness) history(id uuid.UUID) []jobstate.Transition {
	h.t.Helper()
	hist, err := h.Eng.History(h.ctx, id)
	require.NoError(h.t, err)
	st, err := h.Def.Replay(hist)
	require.NoError(h.t, err, "the history replays on the table")
	assert.Equal(h.t, h.get(id).State, st)
	return hist
}

// sweep runs the engine's sweep.
func (h *harness) sweep() jobstate.SweepReport {
	h.t.Helper()
	r, err := h.Eng.Sweep(h.ctx)
	require.NoError(h.t, err)
	return r
}

// stored is everything the store holds about a job.
type stored struct {
	Job     jobstate.Job
	History []jobstate.Transition
	Execs   []jobstate.Execution
	Effects []jobstate.EffectRecord
}

// snapshot loads everything stored about a job, to show that a refusal
// changed nothing.
func (h *harness) snapshot(id uuid.UUID) stored {
	h.t.Helper()
	var s stored
	var err error
	s.Job, err = h.Store.Get(h.ctx, id)
	require.NoError(h.t, err)
	s.History, err = h.Store.History(h.ctx, id)
	require.NoError(h.t, err)
	s.Execs, err = h.Store.Executions(h.ctx, id)
	require.NoError(h.t, err)
	s.Effects, err = h.Store.Effects(h.ctx, id)
	require.NoError(h.t, err)
	return s
}

// path lists the states a history went through.
func path(hist []jobstate.Transition) []jobstate.State {
	out := []jobstate.State{}
	for _, t := range hist {
		out = append(out, t.To)
	}
	return out
}

// reach creates a job for a fresh prompt and drives it into state s
// through the service's own worker code.
func (h *harness) reach(s jobstate.State) jobstate.Job {
	h.t.Helper()
	r := request("alice", fmt.Sprintf("a study in %s", s))
	switch s {
	case Completed:
		h.API.Script(r.Prompt, nil)
	case Rejected:
		h.API.Script(r.Prompt, ErrSafetyBlock)
	default:
		h.API.Script(r.Prompt, ErrAPI500)
	}
	j := h.create(r)
	switch s {
	case Queued:
		return j
	case Running:
		return h.claim("w").Job
	case Failed, Completed, Rejected:
		got, err := h.Work(h.ctx, "w")
		require.NoError(h.t, err)
		require.Equal(h.t, s, got.State)
		return got
	case DeadLetter:
		for {
			got, err := h.Work(h.ctx, "w")
			require.NoError(h.t, err)
			if got.Terminal() {
				require.Equal(h.t, DeadLetter, got.State)
				return got
			}
			h.Clock.Set(got.NotBefore)
			h.sweep()
		}
	}
	h.t.Fatalf("no way to reach %q", s)
	return jobstate.Job{}
}

// TestStates replays section 1 of the lifecycle, row by row: each state's kind
// and outcome, and its "Next Allowed States" exactly as the table's rules.
func TestStates(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	rows := []struct {
		name    string
		state   jobstate.State
		kind    jobstate.Kind
		outcome jobstate.Outcome
		next    []jobstate.State
	}{
		{"queued: job created, validated, and awaiting worker; next running, rejected", Queued, jobstate.KindReady, "", []jobstate.State{Rejected, Running}},
		// The lifecycle's table lists completed and failed; its transition E
		// adds rejected.
		{"running: worker has picked up the job, API called; next completed, failed, and rejected (transition E)", Running, jobstate.KindActive, "", []jobstate.State{Completed, Failed, Rejected}},
		{"completed: generation successful, asset URL stored; final state", Completed, jobstate.KindTerminal, jobstate.OutcomeSucceeded, nil},
		{"failed: generation failed (API error); next queued (retry), dead_letter", Failed, jobstate.KindWaiting, "", []jobstate.State{DeadLetter, Queued}},
		{"rejected: blocked by moderation or safety during exec; final state", Rejected, jobstate.KindTerminal, jobstate.OutcomeRejected, nil},
		{"dead_letter: max retries exceeded, manual review; final state", DeadLetter, jobstate.KindTerminal, jobstate.OutcomeDeadLettered, nil},
	}
	require.Len(t, def.States(), len(rows), "the lifecycle's six states, no more")
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			spec, ok := def.State(row.state)
			require.True(t, ok)
			assert.Equal(t, row.kind, spec.Kind)
			assert.Equal(t, row.outcome, spec.Outcome)
			assert.Equal(t, row.next, nextStates(def, row.state))
			h := newHarness(t)
			j := h.reach(row.state)
			assert.Equal(t, row.state, h.get(j.ID).State, "reachable through the service")
			h.history(j.ID)
		})
	}
	t.Run("queued is the initial state", func(t *testing.T) {
		assert.Equal(t, Queued, def.Initial())
	})
}

// nextStates returns the states the table's rules lead to from s, sorted.
func nextStates(def *jobstate.Definition, s jobstate.State) []jobstate.State {
	set := map[jobstate.State]bool{}
	for _, r := range def.Rules() {
		for _, f := range r.From {
			if f == s {
				set[r.To] = true
			}
		}
	}
	var out []jobstate.State
	for to := range set {
		out = append(out, to)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestMainPrintsLifecycle runs the demonstration and checks the lifecycle
// it prints: a success, a duplicate click, a dead letter, a rejection.
func TestMainPrintsLifecycle(t *testing.T) {
	checkLifecycle(t, exstore.Output(t, exstore.Config{Store: exstore.Memory}, run))
}

// TestMainOnPostgreSQL runs the demonstration on PostgreSQL (a throwaway
// cluster, or JOBSTATE_DATABASE_URL's server) and checks that it prints
// what it prints on the in-memory store.
func TestMainOnPostgreSQL(t *testing.T) {
	mem, pg := exstore.OnBoth(t, run)
	checkLifecycle(t, pg)
	assert.Equal(t, strings.Replace(mem, "the in-memory store", "PostgreSQL", 1), pg)
}

// TestMainOnSQLite runs the demonstration on SQLite (a file in a
// temporary directory) and checks that it prints what it prints on the
// in-memory store.
func TestMainOnSQLite(t *testing.T) {
	mem, lite := exstore.OnSQLite(t, run)
	checkLifecycle(t, lite)
	assert.Equal(t, strings.Replace(mem, "the in-memory store", "SQLite", 1), lite)
}

// checkLifecycle checks the lifecycle the demonstration printed.
func checkLifecycle(t *testing.T, s string) {
	t.Helper()
	for _, want := range []string{
		"job 1 created in queued; credits 20 -> 15",
		"same key within the minute: the existing job 1 (queued) is returned; credits still 15",
		"refused, nothing created (guard_refused): quota exceeded: dave has 3 credits, 5 needed; credits 3",
		"refused, nothing created (guard_refused): invalid prompt: empty; credits 20",
		"job 1 attempt 1: -> completed (resultUrl bucket://images-private/originals/",
		"job 2 attempt 1: image API: 500 internal error -> failed (retryCount 1 < 3); retry due at 09:00:23 (backoff 2s)",
		"job 2 attempt 2: image API timeout -> failed (retryCount 2 < 3); retry due at 09:00:31 (backoff 4s)",
		"job 2 attempt 3: -> dead_letter (image API: 500 internal error; retryCount 3, not < MAX_RETRIES 3)",
		"bob's UI resends his request, still within the minute: \"a city skyline in the rain\" 1024x1792\n            same key within the minute: the existing job 2 (dead_letter) is returned; credits still 15",
		"job 3 attempt 1: -> rejected (image API safety filter: NSFW detected)",
		"SAFE_BLOCK carol of job 3, rejected by worker-1: image API safety filter: NSFW detected",
		"running  --fail   --> failed",
		"failed   --exhaust--> dead_letter",
		"running  --reject --> rejected",
		"ops picks the wrong job: job 1 (alice's, completed), reason \"reviewed: API outage over\"\n            refused, nothing changed (invalid_transition): only dead_letter is redriven",
		"ops redrives the dead letter: job 2 (bob's, dead_letter), reason \"reviewed: API outage over\"\n            job 4 created in queued; job 2 stays dead_letter; bob's credits 15 -> 15 (job 2's reservation covers it)",
		"ops clicks again: job 2 (bob's, dead_letter), reason \"reviewed: API outage over\"\n            refused, nothing changed (effect_applied): a dead letter is redriven once",
		"job 4 attempt 1: -> completed (resultUrl bucket://images-private/originals/",
		"Credits: alice 15, bob 15, carol 15, dave 3, erin 20 (nothing refunded, the redrive not charged)",
		"ops runs bob's job 2 again as job 4, paid by job 2's reservation",
		"effect \"redrive\" by ops: run again as job 4 (no transition record; the job stays dead_letter, v17)",
		"job 4 (bob): completed, outcome succeeded, attempts 1, retryCount 0\n    v1  09:01:34  null     --create --> queued      ops      redrive of job 00000000-0000-7000-8000-000000000002: reviewed: API outage over",
	} {
		assert.Contains(t, s, want)
	}
	assert.Equal(t, 1, strings.Count(s, "SAFE_BLOCK"), "one audit record")
	assert.Equal(t, 1, strings.Count(s, "alice: /originals/"), "one asset")
	assert.Equal(t, 1, strings.Count(s, "bob: /originals/"), "bob's image, from the redrive")
	assert.Equal(t, 3, strings.Count(s, " credits for job "), "three reservations: the redrive has none")
}

// TestMachineIsTheLiteralDefinition fails when the machine this program
// registers differs from image generation's literal definition
// (internal/machines/imagegen) in anything but the names of its functions.
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	assert.Equal(t, imagegen.Name, def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

// TestDiagramIsCurrent compares the machine's Mermaid diagram with the
// ```mermaid block of docs/examples/imagegen.md; -update rewrites the block.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := NewDefinition(NewAppDB(nil))
	require.NoError(t, err)
	doccheck.Diagram(t, "../../docs/examples/imagegen.md", def, *update)
}

// Report tells the engine, with a lease held by no worker, how an API
// call ended (as Handler does through its task): the tests use it for
// late or stale reports, which the engine must refuse.
func (h *harness) Report(ctx context.Context, lease jobstate.Lease, img Image, apiErr error) (jobstate.Job, error) {
	if errors.Is(apiErr, ErrSafetyBlock) {
		return h.Eng.Advance(ctx, lease, EventReject, jobstate.Call{Reason: apiErr.Error()})
	}
	if apiErr != nil {
		return h.Eng.Fail(ctx, lease, apiErr)
	}
	data, err := h.API.Download(ctx, img)
	if err != nil {
		return h.Eng.Fail(ctx, lease, err)
	}
	return h.Eng.Succeed(ctx, lease, jobstate.CommitInput{
		Result: []byte(ResultURL(lease.JobID)),
		Effect: h.DB.StoreAsset(img, data),
	})
}

// workLease runs one due job through a worker named name (Handler, under
// jobstatetest.Env.Drain) and returns the lease it ran under and the job
// as it left it.
func (h *harness) workLease(name string) (jobstate.Lease, jobstate.Job) {
	h.t.Helper()
	var lease jobstate.Lease
	run := h.Handler()
	w, err := h.Worker(name, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		lease = t.Lease()
		return run.Work(ctx, t)
	}))
	require.NoError(h.t, err)
	require.Equal(h.t, 1, h.env.Drain(w))
	return lease, h.get(lease.JobID)
}
