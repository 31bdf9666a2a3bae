package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
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
	"github.com/jobstate/jobstate/internal/machines/docproc"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
)

// update rewrites the diagram in docs/examples/docproc.md.
var update = flag.Bool("update", false, "rewrite the mermaid block of docs/examples/docproc.md")

// epoch is the tests' start time.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// allEvents is every event a rule of any machine may carry: the table's
// own and all the lifecycle events.
var allEvents = []jobstate.Event{
	EventSubmit, EventResourceExhaustion, jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventFail, jobstate.EventRetry,
	jobstate.EventRequeue, jobstate.EventExhaust, jobstate.EventAbandon, jobstate.EventExpire, jobstate.EventCancel,
}

// harness is a fresh service for one test, with helpers that drive jobs,
// and the jobstatetest helpers on its engine and clock.
type harness struct {
	t   *testing.T
	ctx context.Context
	env *jobstatetest.Env
	*App
}

// newHarness returns a fresh service on the in-memory store and a manual
// clock at epoch.
func newHarness(t *testing.T) *harness {
	t.Helper()
	store := memstore.New()
	app, err := NewAppOn(store, epoch)
	require.NoError(t, err)
	env := &jobstatetest.Env{T: t, Ctx: context.Background(), Clock: app.Clock, Store: store, Engine: app.Eng}
	return &harness{t: t, ctx: env.Ctx, env: env, App: app}
}

// drain runs a worker with process on the due jobs until none is due
// (jobstatetest.Env.Drain) and returns how many it ran.
func (h *harness) drain(process Processor) int {
	h.t.Helper()
	w, err := h.Worker("worker-1", process)
	require.NoError(h.t, err)
	return h.env.Drain(w)
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

// claim takes the next due job as worker w.
func (h *harness) claim(w string) jobstate.Claimed {
	h.t.Helper()
	c, err := h.Eng.Claim(h.ctx, jobstate.ClaimRequest{Machine: Machine, Worker: w})
	require.NoError(h.t, err)
	return c
}

// fail reports err for the lease's attempt.
func (h *harness) fail(l jobstate.Lease, err error) jobstate.Job {
	h.t.Helper()
	j, ferr := h.Eng.Fail(h.ctx, l, err)
	require.NoError(h.t, ferr)
	return j
}

// stored is everything the store holds about a job.
type stored struct {
	Job     jobstate.Job
	History []jobstate.Transition
	Execs   []jobstate.Execution
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
	return s
}

// reach creates a job and drives it into state s; for RUNNING it also
// returns the worker's lease.
func (h *harness) reach(s jobstate.State) (jobstate.Job, jobstate.Lease) {
	h.t.Helper()
	j, err := h.CreateJob(h.ctx, Document{Name: "doc-" + strings.ToLower(string(s)) + ".pdf"}, "alice")
	require.NoError(h.t, err)
	if s == Created {
		return j, jobstate.Lease{}
	}
	j, err = h.Submit(h.ctx, j.ID, "alice")
	require.NoError(h.t, err)
	if s == Queued {
		return j, jobstate.Lease{}
	}
	c := h.claim("worker-1")
	require.Equal(h.t, j.ID, c.Job.ID)
	switch s {
	case Running:
		return c.Job, c.Lease
	case Retrying:
		return h.fail(c.Lease, ErrTimeout), jobstate.Lease{}
	case Failed:
		return h.fail(c.Lease, ErrUnsupportedFormat), jobstate.Lease{}
	case Succeeded:
		j, err := h.Eng.Succeed(h.ctx, c.Lease, jobstate.CommitInput{Result: []byte("ok")})
		require.NoError(h.t, err)
		return j, jobstate.Lease{}
	}
	h.t.Fatalf("no way to reach %q", s)
	return jobstate.Job{}, jobstate.Lease{}
}

// record is the part of a transition a trace fixes: the move and its time
// since the job's creation.
type record struct {
	From  jobstate.State
	Event jobstate.Event
	To    jobstate.State
	At    time.Duration
}

// records reduces a history to its records.
func records(hist []jobstate.Transition) []record {
	out := make([]record, len(hist))
	for i, t := range hist {
		out[i] = record{t.From, t.Event, t.To, t.At.Sub(hist[0].At)}
	}
	return out
}

// path lists the states a history went through.
func path(hist []jobstate.Transition) []jobstate.State {
	out := []jobstate.State{}
	for _, t := range hist {
		out = append(out, t.To)
	}
	return out
}

// TestStates replays the lifecycle's "State Definitions" and "State
// Classification".
func TestStates(t *testing.T) {
	def, err := NewDefinition()
	require.NoError(t, err)
	rows := []struct {
		name  string
		state jobstate.State
		kind  jobstate.Kind
	}{
		{"CREATED: non-terminal, created but not yet submitted to the queue (initial state)", Created, jobstate.KindInitial},
		{"QUEUED: non-terminal, waiting in the processing queue", Queued, jobstate.KindReady},
		{"RUNNING: non-terminal, actively being processed", Running, jobstate.KindActive},
		{"SUCCEEDED: terminal, completed successfully", Succeeded, jobstate.KindTerminal},
		{"FAILED: terminal, failed permanently", Failed, jobstate.KindTerminal},
		{"RETRYING: non-terminal, scheduled for retry after a transient failure", Retrying, jobstate.KindWaiting},
	}
	require.Len(t, def.States(), len(rows), "the lifecycle's six states, no more")
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			spec, ok := def.State(row.state)
			require.True(t, ok)
			assert.Equal(t, row.kind, spec.Kind)
			h := newHarness(t)
			j, _ := h.reach(row.state)
			assert.Equal(t, row.state, h.get(j.ID).State, "reachable through the service")
			h.history(j.ID)
		})
	}
	t.Run("terminal states: SUCCEEDED (successful completion), FAILED (permanent failure)", func(t *testing.T) {
		for _, s := range []jobstate.State{Succeeded, Failed} {
			spec, _ := def.State(s)
			assert.Equal(t, jobstate.KindTerminal, spec.Kind, "%s", s)
		}
		s, _ := def.State(Succeeded)
		f, _ := def.State(Failed)
		assert.Equal(t, jobstate.OutcomeSucceeded, s.Outcome)
		assert.Equal(t, jobstate.OutcomeFailed, f.Outcome)
	})
	t.Run("non-terminal states: CREATED (initial), QUEUED, RUNNING, RETRYING", func(t *testing.T) {
		for _, s := range []jobstate.State{Created, Queued, Running, Retrying} {
			spec, _ := def.State(s)
			assert.NotEqual(t, jobstate.KindTerminal, spec.Kind, "%s", s)
		}
		assert.Equal(t, Created, def.Initial())
	})
}

// TestMainPrintsTraces runs the demonstration and checks that it prints the
// four traces.
func TestMainPrintsTraces(t *testing.T) {
	checkTraces(t, exstore.Output(t, exstore.Config{Store: exstore.Memory}, run))
}

// TestMainOnPostgreSQL runs the demonstration on PostgreSQL (a throwaway
// cluster, or JOBSTATE_DATABASE_URL's server) and checks that it prints
// what it prints on the in-memory store.
func TestMainOnPostgreSQL(t *testing.T) {
	mem, pg := exstore.OnBoth(t, run)
	checkTraces(t, pg)
	assert.Equal(t, strings.Replace(mem, "the in-memory store", "PostgreSQL", 1), pg)
}

// TestMainOnSQLite runs the demonstration on SQLite (a file in a
// temporary directory) and checks that it prints what it prints on the
// in-memory store.
func TestMainOnSQLite(t *testing.T) {
	mem, lite := exstore.OnSQLite(t, run)
	checkTraces(t, lite)
	assert.Equal(t, strings.Replace(mem, "the in-memory store", "SQLite", 1), lite)
}

// TestFlags checks that bad flags are refused with an error, not run.
func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	_, err := exstore.Parse("docproc", []string{"-store", "mysql"}, &stderr, nil)
	require.Error(t, err)
	assert.Contains(t, stderr.String(), `-store "mysql": want memory, postgres or sqlite`)
	cfg, err := exstore.Parse("docproc", []string{"-store", "postgres", "-database-url", "postgres://x"}, &stderr, nil)
	require.NoError(t, err)
	assert.Equal(t, exstore.Config{Store: exstore.Postgres, DatabaseURL: "postgres://x"}, cfg)
	cfg, err = exstore.Parse("docproc", []string{"-store", "sqlite", "-db", "/tmp/x.db"}, &stderr, nil)
	require.NoError(t, err)
	assert.Equal(t, exstore.Config{Store: exstore.SQLite, DB: "/tmp/x.db"}, cfg)
}

// checkTraces checks that out holds the four traces.
func checkTraces(t *testing.T, s string) {
	t.Helper()
	for i, tr := range Traces {
		assert.Contains(t, s, fmt.Sprintf("%d. %s (%s)", i+1, tr.Name, tr.Document.Name))
	}
	for _, want := range []string{
		"+1.250s  requeue        → QUEUED (after 1s)",
		"+4.000s  fail                           → FAILED ✗ (exhausted retries)",
		"+0.250s  fail         → FAILED ✗ (non-retryable, no retry attempt)",
		`"errorType": "TERMINAL"`,
		`"lastError": "temporary unavailable"`,
	} {
		assert.Contains(t, s, want)
	}
}

// TestDiagramIsCurrent compares the machine's Mermaid diagram with the
// ```mermaid block of docs/examples/docproc.md; -update rewrites the block.
// TestMachineIsTheLiteralDefinition fails when the machine this program
// registers differs from document processing's literal definition
// (internal/machines/docproc).
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := NewDefinition()
	require.NoError(t, err)
	assert.Equal(t, docproc.Name, def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

func TestDiagramIsCurrent(t *testing.T) {
	def, err := NewDefinition()
	require.NoError(t, err)
	doccheck.Diagram(t, "../../docs/examples/docproc.md", def, *update)
}
