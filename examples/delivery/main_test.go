package main

import (
	"context"
	"flag"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
	"github.com/jobstate/jobstate/internal/doccheck"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/delivery"
	"github.com/jobstate/jobstate/jobstatetest"
)

// fixture is one World under test, on its manual clock, with users alice
// (ACTIVE) and mallory (BLOCKED) and a few files.
type fixture struct {
	t   *testing.T
	ctx context.Context
	*World
}

// newFixture returns a fresh World for t.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	w, err := NewWorld()
	require.NoError(t, err)
	w.Users.Set("alice", UserActive)
	w.Users.Set("mallory", UserBlocked)
	w.Disk.Put("doc.pdf", File{Name: "doc.pdf", Size: 1 << 20, Transfer: 5 * time.Second})
	w.Disk.Put("film.mkv", File{Name: "film.mkv", Size: 1 << 30, Transfer: 2 * time.Minute})
	w.Disk.Put("huge.iso", File{Name: "huge.iso", Size: MaxFileSize + 1, Transfer: time.Minute})
	w.Disk.Put("edge.bin", File{Name: "edge.bin", Size: MaxFileSize, Transfer: time.Second})
	return &fixture{t: t, ctx: context.Background(), World: w}
}

// Snapshot is everything stored about one job.
type Snapshot struct {
	Job        jobstate.Job
	Executions []jobstate.Execution
	History    []jobstate.Transition
}

// snap loads a job with its executions and history, and checks that the
// history replays to the job's state.
func (f *fixture) snap(id uuid.UUID) Snapshot {
	f.t.Helper()
	var s Snapshot
	var err error
	s.Job, err = f.Engine.Store().Get(f.ctx, id)
	require.NoError(f.t, err)
	s.Executions, err = f.Engine.Executions(f.ctx, id)
	require.NoError(f.t, err)
	s.History, err = f.Engine.History(f.ctx, id)
	require.NoError(f.t, err)
	st, err := f.Def.Replay(s.History)
	require.NoError(f.t, err)
	require.Equal(f.t, s.Job.State, st, "the history replays to the job's state")
	return s
}

// queue creates a job through the bot's callback and checks it is new.
func (f *fixture) queue(user, file, nonce string) jobstate.Job {
	f.t.Helper()
	c, err := f.Download(f.ctx, user, file, nonce)
	require.NoError(f.t, err)
	require.False(f.t, c.Existing)
	require.Equal(f.t, Queued, c.Job.State)
	return c.Job
}

// claim claims one named job for worker.
func (f *fixture) claim(id uuid.UUID, worker string) jobstate.Claimed {
	f.t.Helper()
	c, err := f.Engine.ClaimJob(f.ctx, id, jobstate.ClaimRequest{Worker: worker})
	require.NoError(f.t, err)
	require.Equal(f.t, Claimed, c.Job.State)
	return c
}

// advance fires a user event through the lease and checks the new state.
func (f *fixture) advance(l jobstate.Lease, ev jobstate.Event, want jobstate.State) {
	f.t.Helper()
	j, err := f.Engine.Advance(f.ctx, l, ev, jobstate.Call{Args: DownloadArgs{User: UserActive}})
	require.NoError(f.t, err)
	require.Equal(f.t, want, j.State)
}

// process claims the job for worker and runs it, returning the job as the
// worker left it.
func (f *fixture) process(id uuid.UUID, worker string) jobstate.Job {
	f.t.Helper()
	j, err := f.Worker(worker).Process(f.ctx, f.claim(id, worker))
	require.NoError(f.t, err)
	return j
}

// due lets time pass until the job's not-before.
func (f *fixture) due(id uuid.UUID) {
	f.t.Helper()
	_, err := wait(f.ctx, f.World, id)
	require.NoError(f.t, err)
}

// sweep runs the engine's sweep at the clock's current reading.
func (f *fixture) sweep() jobstate.SweepReport {
	f.t.Helper()
	r, err := f.Engine.Sweep(f.ctx)
	require.NoError(f.t, err)
	return r
}

// unchanged checks that err is a refusal matching every sentinel of want
// and that the job, its executions and its history are as in before.
func (f *fixture) unchanged(before Snapshot, err error, want ...error) {
	f.t.Helper()
	require.Error(f.t, err)
	for _, w := range want {
		require.ErrorIs(f.t, err, w)
	}
	assert.Equal(f.t, before, f.snap(before.Job.ID), "a refused operation changes nothing")
}

// last returns the last record of a history.
func last(h []jobstate.Transition) jobstate.Transition { return h[len(h)-1] }

// path lists the states a history went through.
func path(h []jobstate.Transition) []jobstate.State {
	out := make([]jobstate.State, len(h))
	for i, t := range h {
		out[i] = t.To
	}
	return out
}

// TestTableIsTheLifecycleDiagram checks the table against file delivery's diagram,
// arrow for arrow, its labels mapped to the engine's events, plus the one
// arrow the lifecycle's rules add (CLAIMED → FAILED).
func TestTableIsTheLifecycleDiagram(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	type arrow struct {
		from  jobstate.State
		event jobstate.Event
		to    jobstate.State
	}
	var got []arrow
	for _, r := range def.Rules() {
		for _, from := range r.From {
			got = append(got, arrow{from, r.Event, r.To})
		}
	}
	assert.Equal(t, []arrow{
		{Queued, jobstate.EventClaim, Claimed},        // worker_claim(job_id)
		{Claimed, StartDownload, Downloading},         // start_download
		{Downloading, StreamToLocalAPI, Streaming},    // stream_to_local_api
		{Streaming, jobstate.EventSucceed, Delivered}, // telegram_ack
		{Downloading, jobstate.EventFail, Failed},     // non_retryable_error
		{Streaming, jobstate.EventFail, Failed},       // non_retryable_error
		{Downloading, jobstate.EventRetry, Queued},    // retryable_error (attempt+1)
		{Streaming, jobstate.EventRetry, Queued},      // retryable_error (attempt+1)
		{Claimed, jobstate.EventAbandon, Queued},      // heartbeat_timeout (attempt+1)
		{Downloading, jobstate.EventAbandon, Queued},  // recovery: stale, attempt < 3
		{Streaming, jobstate.EventAbandon, Queued},    // recovery: stale, attempt < 3
		{Queued, jobstate.EventCancel, Cancelled},     // user_cancel (optional)
		{Queued, jobstate.EventExpire, Expired},       // ttl_expired (optional)
		{Claimed, jobstate.EventFail, Failed},         // "... -> FAILED", and recovery
	}, got)
	var states []jobstate.State
	for _, s := range def.States() {
		states = append(states, s.Name)
	}
	assert.Equal(t, []jobstate.State{Queued, Claimed, Downloading, Streaming, Delivered, Failed, Cancelled, Expired}, states)
	assert.Equal(t, Queued, def.Initial())
}

// TestRunPrintsTheDemonstration runs the program and checks its key lines.
func TestRunPrintsTheDemonstration(t *testing.T) {
	checkDemonstration(t, exstore.Output(t, exstore.Config{Store: exstore.Memory}, run))
}

// TestMainOnPostgreSQL runs the demonstration on PostgreSQL (a throwaway
// cluster, or JOBSTATE_DATABASE_URL's server) and checks that it prints
// what it prints on the in-memory store.
func TestMainOnPostgreSQL(t *testing.T) {
	mem, pg := exstore.OnBoth(t, run)
	checkDemonstration(t, pg)
	assert.Equal(t, mem, pg)
}

// TestMainOnSQLite runs the demonstration on SQLite (a file in a
// temporary directory) and checks that it prints what it prints on the
// in-memory store.
func TestMainOnSQLite(t *testing.T) {
	mem, lite := exstore.OnSQLite(t, run)
	checkDemonstration(t, lite)
	assert.Equal(t, mem, lite)
}

// checkDemonstration checks the key lines of the demonstration's output.
func checkDemonstration(t *testing.T, s string) {
	t.Helper()
	for _, want := range []string{
		"job #1 queued; the same callback again: job #1 (existing: true)",
		"job #1: report.pdf for alice: DELIVERED, attempt 0, 1 execution(s)",
		"job #3: video.mp4 for bob: DELIVERED, attempt 2, 3 execution(s)",
		"STREAMING   --retry              --> QUEUED      by worker-1: telegram: HTTP 429 Too Many Requests (Retry-After: 20)",
		"09:01:50  QUEUED      --claim",
		"movie.mkv for carol: FAILED, attempt 0",
		"CLAIMED     --fail               --> FAILED      by worker-1",
		"QUEUED      --cancel             --> CANCELLED   by alice: user_cancel",
		"cancel the delivered job #1: refused (terminal)",
		"QUEUED      --expire             --> EXPIRED     by jobstate: deadline passed",
		"/status: 0 stuck",
		"/status: 3 stuck",
		"recovery: 3 lease(s) lost, 3 back to QUEUED, 0 FAILED",
		"STREAMING   --abandon            --> QUEUED      by jobstate: lease expired",
		"CLAIMED     --fail               --> FAILED      by worker-2: attempt limit reached: attempt 3, limit 3",
		"photo.jpg for frank: DELIVERED, attempt 1, 2 execution(s)",
		"stateDiagram-v2",
	} {
		assert.Contains(t, s, want)
	}
}

// update makes TestDiagramIsCurrent rewrite the documented diagram.
var update = flag.Bool("update", false, "rewrite the mermaid block of "+docPath+" from the definition")

// docPath is the example's documentation page, relative to this package.
const docPath = "../../docs/examples/delivery.md"

// TestMachineIsTheLiteralDefinition fails when the machine this program
// registers differs from file delivery's literal definition
// (internal/machines/delivery).
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	assert.Equal(t, delivery.Name, def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

// TestDiagramIsCurrent checks that the ```mermaid block of the example's
// page is the definition's diagram; -update rewrites it.
func TestDiagramIsCurrent(t *testing.T) {
	def, err := Machine()
	require.NoError(t, err)
	doccheck.Diagram(t, docPath, def, *update)
}

// TestRuntimeDelivers runs the worker's handler through the worker runtime
// (jobstatetest.Env.Drain): a delivery, a retried one, and a permanent
// failure, each job's execution committed once and its delivery recorded
// once.
func TestRuntimeDelivers(t *testing.T) {
	f := newFixture(t)
	env := &jobstatetest.Env{T: t, Ctx: f.ctx, Clock: f.Timers, Engine: f.Engine}
	f.Disk.Fail("film.mkv", &HTTPError{Service: "yandex disk", Status: http.StatusServiceUnavailable})
	doc := f.queue("alice", "doc.pdf", "n1")
	film := f.queue("alice", "film.mkv", "n2")
	huge := f.queue("alice", "huge.iso", "n3")
	rt, err := f.Worker("w1").Runtime()
	require.NoError(t, err)
	assert.Equal(t, 3, env.Drain(rt), "each job once; film.mkv waits out its backoff")
	env.AssertState(doc.ID, Delivered)
	env.AssertState(film.ID, Queued)
	env.AssertState(huge.ID, Failed)
	f.due(film.ID)
	assert.Equal(t, 1, env.Drain(rt))
	for _, id := range []uuid.UUID{doc.ID, film.ID} {
		env.AssertState(id, Delivered)
		env.AssertCommittedOnce(id)
		assert.Equal(t, 1, f.Deliveries.Count(id))
	}
	env.AssertPath(huge.ID, Queued, Claimed, Downloading, Failed)
}
