// Package bench compares the cost of driving a job through the document
// processing lifecycle
//
//	CREATED → QUEUED → RUNNING → RETRYING → QUEUED → RUNNING → SUCCEEDED
//
// with jobstate's pure core (Definition.Step), github.com/looplab/fsm and
// github.com/qmuntal/stateless. jobstate runs the lifecycle's literal
// definition (internal/machines/docproc); the other libraries get the same
// states and the same table; the functions here are shared by the
// benchmarks and by the tests that check every library really ends in
// SUCCEEDED.
//
// The comparison with river on PostgreSQL (jobs worked per second,
// inserts, claim latency, create → claim latency) is the command in
// pgcompare, a module of its own (river requires Go 1.26); see its
// package comment and docs/store.md §6.
package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/looplab/fsm"
	"github.com/qmuntal/stateless"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines/docproc"
)

// The document processing states. The constants are untyped so that they
// serve as a jobstate.State, a looplab/fsm state (string) and a
// stateless.State (any).
const (
	Created   = "CREATED"
	Queued    = "QUEUED"
	Running   = "RUNNING"
	Retrying  = "RETRYING"
	Succeeded = "SUCCEEDED"
	Failed    = "FAILED"
)

// The document processing events, spelled as jobstate spells them.
const (
	Submit             = string(docproc.Submit)
	ResourceExhaustion = string(docproc.ResourceExhaustion)
	Claim              = string(jobstate.EventClaim)
	Retry              = string(jobstate.EventRetry)
	Requeue            = string(jobstate.EventRequeue)
	Succeed            = string(jobstate.EventSucceed)
	Fail               = string(jobstate.EventFail)
	Cancel             = string(jobstate.EventCancel)
)

// Lifecycle is the sequence of events the benchmarks fire: a job is
// submitted, claimed, fails once and is retried, is requeued, claimed again
// and succeeds.
var Lifecycle = [...]string{Submit, Claim, Retry, Requeue, Claim, Succeed}

// jobstateLifecycle is Lifecycle as jobstate events.
var jobstateLifecycle = [...]jobstate.Event{
	jobstate.Event(Submit), jobstate.EventClaim, jobstate.EventRetry,
	jobstate.EventRequeue, jobstate.EventClaim, jobstate.EventSucceed,
}

// FixedTime is the clock reading given to every jobstate step (the pure core
// reads no clock).
var FixedTime = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)

// jobID is the id of every benchmarked job; the other libraries create no
// ids, so none is generated per lifecycle.
var jobID = uuid.MustParse("0190b6a2-3c4d-7e8f-9a0b-1c2d3e4f5a6b")

// ---------------------------------------------------------------------------
// jobstate

// DocProcSpec is document processing's literal definition, with its own
// classifier (which Step never calls).
func DocProcSpec() jobstate.Spec { return docproc.Spec(docproc.Plain()) }

// NewDefinition validates DocProcSpec.
func NewDefinition() (*jobstate.Definition, error) {
	return jobstate.NewDefinition(DocProcSpec())
}

// NewJob returns a fresh job of the document processing machine in state s (a plain value:
// this is all the state jobstate's core needs).
func NewJob(s jobstate.State, k jobstate.Kind) jobstate.Job {
	return jobstate.Job{
		ID:         jobID,
		Machine:    docproc.Name,
		State:      s,
		Kind:       k,
		Version:    1,
		MaxRetries: docproc.MaxRetries,
		CreatedAt:  FixedTime,
		UpdatedAt:  FixedTime,
	}
}

// RunJobstate steps *job through Lifecycle with def, in place (Step moves
// the job it is given to its next version).
func RunJobstate(ctx context.Context, def *jobstate.Definition, job *jobstate.Job) error {
	for _, ev := range jobstateLifecycle {
		if _, err := def.Step(ctx, job, jobstate.Input{Event: ev, Now: FixedTime}); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// github.com/looplab/fsm

// looplabEvents is the document processing table in looplab/fsm's form.
var looplabEvents = fsm.Events{
	{Name: Submit, Src: []string{Created}, Dst: Queued},
	{Name: Claim, Src: []string{Queued}, Dst: Running},
	{Name: Succeed, Src: []string{Running}, Dst: Succeeded},
	{Name: Fail, Src: []string{Running}, Dst: Failed},
	{Name: Retry, Src: []string{Running}, Dst: Retrying},
	{Name: Requeue, Src: []string{Retrying}, Dst: Queued},
	{Name: ResourceExhaustion, Src: []string{Queued}, Dst: Failed},
	{Name: Cancel, Src: []string{Created, Queued, Running, Retrying}, Dst: Failed},
}

// NewLooplabFSM builds a looplab/fsm machine in state initial. The machine
// holds the table and the state together, so a new job needs a new machine
// (or SetState on an idle one).
func NewLooplabFSM(initial string) *fsm.FSM {
	return fsm.NewFSM(initial, looplabEvents, nil)
}

// RunLooplab fires Lifecycle on f and returns its final state.
func RunLooplab(ctx context.Context, f *fsm.FSM) (string, error) {
	for _, ev := range Lifecycle {
		if err := f.Event(ctx, ev); err != nil {
			return f.Current(), err
		}
	}
	return f.Current(), nil
}

// ---------------------------------------------------------------------------
// github.com/qmuntal/stateless

// configureStateless declares the document processing table on sm.
func configureStateless(sm *stateless.StateMachine) {
	sm.Configure(Created).Permit(Submit, Queued).Permit(Cancel, Failed)
	sm.Configure(Queued).Permit(Claim, Running).Permit(ResourceExhaustion, Failed).Permit(Cancel, Failed)
	sm.Configure(Running).
		Permit(Succeed, Succeeded).
		Permit(Fail, Failed).
		Permit(Retry, Retrying).
		Permit(Cancel, Failed)
	sm.Configure(Retrying).Permit(Requeue, Queued).Permit(Cancel, Failed)
	sm.Configure(Succeeded)
	sm.Configure(Failed)
}

// NewStateless builds a stateless machine in state initial, holding its own
// state. It fires immediately rather than through stateless's default
// queue: the table has no actions that fire triggers, so the result is the
// same and the cost lower.
func NewStateless(initial string) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithMode(initial, stateless.FiringImmediate)
	configureStateless(sm)
	return sm
}

// StatelessStore is a state kept outside a stateless machine, so that one
// configured machine can drive many jobs: set State, then fire.
type StatelessStore struct {
	// State is an interface value so that reading and writing it boxes
	// nothing.
	State stateless.State
}

// NewStatelessExternal builds a stateless machine whose state lives in st.
func NewStatelessExternal(st *StatelessStore) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithExternalStorage(
		func(context.Context) (stateless.State, error) { return st.State, nil },
		func(_ context.Context, s stateless.State) error { st.State = s; return nil },
		stateless.FiringImmediate,
	)
	configureStateless(sm)
	return sm
}

// statelessLifecycle is Lifecycle as stateless triggers, boxed once:
// passing a string variable where stateless takes a Trigger (any) would
// allocate on every firing.
var statelessLifecycle = [...]stateless.Trigger{Submit, Claim, Retry, Requeue, Claim, Succeed}

// RunStateless fires Lifecycle on sm and returns its final state.
func RunStateless(ctx context.Context, sm *stateless.StateMachine) (string, error) {
	for _, ev := range statelessLifecycle {
		if err := sm.FireCtx(ctx, ev); err != nil {
			return "", err
		}
	}
	s, err := sm.State(ctx)
	if err != nil {
		return "", err
	}
	str, ok := s.(string)
	if !ok {
		return "", fmt.Errorf("stateless state %v is a %T, not a string", s, s)
	}
	return str, nil
}
