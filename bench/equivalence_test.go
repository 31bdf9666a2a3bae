package bench

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate"
)

// These tests check that the code the benchmarks time does the real work:
// every library walks the six steps and ends in SUCCEEDED, including when a
// machine is reused.

func TestJobstateLifecycle(t *testing.T) {
	ctx := context.Background()
	def, err := NewDefinition()
	if err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		start := NewJob(Created, jobstate.KindInitial)
		job := start
		if err := RunJobstate(ctx, def, &job); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if job.State != Succeeded || job.Kind != jobstate.KindTerminal || job.Outcome != jobstate.OutcomeSucceeded {
			t.Fatalf("run %d: ended in %s (%s, %q), want SUCCEEDED (terminal, succeeded)", run, job.State, job.Kind, job.Outcome)
		}
		if want := start.Version + int64(len(Lifecycle)); job.Version != want {
			t.Errorf("run %d: version %d, want %d", run, job.Version, want)
		}
		if !job.CompletedAt.Equal(FixedTime) || !job.StartedAt.Equal(FixedTime) {
			t.Errorf("run %d: started %v, completed %v, want both %v", run, job.StartedAt, job.CompletedAt, FixedTime)
		}
	}
}

func TestJobstateTrace(t *testing.T) {
	ctx := context.Background()
	def, err := NewDefinition()
	if err != nil {
		t.Fatal(err)
	}
	want := []jobstate.State{Queued, Running, Retrying, Queued, Running, Succeeded}
	job := NewJob(Created, jobstate.KindInitial)
	for i, ev := range jobstateLifecycle {
		from := job.State
		tr, err := def.Step(ctx, &job, jobstate.Input{Event: ev, Now: FixedTime})
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, ev, err)
		}
		if tr.From != from || tr.To != want[i] || job.State != want[i] {
			t.Fatalf("step %d (%s): record %s -> %s, job now %s, want %s -> %s", i, ev, tr.From, tr.To, job.State, from, want[i])
		}
	}
}

func TestLooplabLifecycle(t *testing.T) {
	ctx := context.Background()
	s, err := RunLooplab(ctx, NewLooplabFSM(Created))
	if err != nil {
		t.Fatal(err)
	}
	if s != Succeeded {
		t.Fatalf("new machine ended in %s, want %s", s, Succeeded)
	}

	f := NewLooplabFSM(Created)
	for run := 0; run < 2; run++ {
		f.SetState(Created)
		s, err := RunLooplab(ctx, f)
		if err != nil {
			t.Fatalf("reuse run %d: %v", run, err)
		}
		if s != Succeeded {
			t.Fatalf("reuse run %d ended in %s, want %s", run, s, Succeeded)
		}
	}
}

func TestStatelessLifecycle(t *testing.T) {
	ctx := context.Background()
	s, err := RunStateless(ctx, NewStateless(Created))
	if err != nil {
		t.Fatal(err)
	}
	if s != Succeeded {
		t.Fatalf("new machine ended in %s, want %s", s, Succeeded)
	}

	var st StatelessStore
	sm := NewStatelessExternal(&st)
	for run := 0; run < 2; run++ {
		st.State = Created
		s, err := RunStateless(ctx, sm)
		if err != nil {
			t.Fatalf("reuse run %d: %v", run, err)
		}
		if s != Succeeded || st.State != Succeeded {
			t.Fatalf("reuse run %d ended in %s (stored %v), want %s", run, s, st.State, Succeeded)
		}
	}
}

// TestTransition checks the single transition the Transition benchmarks
// time, QUEUED --claim--> RUNNING, with the same reset before each firing,
// twice on the same job or machine.
func TestTransition(t *testing.T) {
	ctx := context.Background()
	def, err := NewDefinition()
	if err != nil {
		t.Fatal(err)
	}
	job := NewJob(Queued, jobstate.KindReady)
	f := NewLooplabFSM(Queued)
	var st StatelessStore
	sm := NewStatelessExternal(&st)

	for run := 0; run < 2; run++ {
		job.State, job.Kind = Queued, jobstate.KindReady
		if _, err := def.Step(ctx, &job, jobstate.Input{Event: jobstate.EventClaim, Now: FixedTime}); err != nil {
			t.Fatalf("jobstate run %d: %v", run, err)
		}
		if job.State != Running || job.Kind != jobstate.KindActive {
			t.Errorf("jobstate run %d: claim led to %s (%s), want %s (active)", run, job.State, job.Kind, Running)
		}

		f.SetState(Queued)
		if err := f.Event(ctx, Claim); err != nil {
			t.Fatalf("looplab/fsm run %d: %v", run, err)
		}
		if f.Current() != Running {
			t.Errorf("looplab/fsm run %d: claim led to %s, want %s", run, f.Current(), Running)
		}

		st.State = Queued
		if err := sm.FireCtx(ctx, Claim); err != nil {
			t.Fatalf("stateless run %d: %v", run, err)
		}
		if st.State != Running {
			t.Errorf("stateless run %d: claim led to %v, want %s", run, st.State, Running)
		}
	}
}

// TestTablesAgree checks that the three tables accept and refuse the same
// events in every non-terminal state.
func TestTablesAgree(t *testing.T) {
	ctx := context.Background()
	def, err := NewDefinition()
	if err != nil {
		t.Fatal(err)
	}
	events := []string{Submit, Claim, Retry, Requeue, Succeed, Fail, ResourceExhaustion, Cancel}
	for _, spec := range def.States() {
		if spec.Kind == jobstate.KindTerminal {
			continue
		}
		for _, ev := range events {
			next := NewJob(spec.Name, spec.Kind)
			_, jsErr := def.Step(ctx, &next, jobstate.Input{Event: jobstate.Event(ev), Now: FixedTime})

			f := NewLooplabFSM(string(spec.Name))
			fsmErr := f.Event(ctx, ev)

			st := StatelessStore{State: string(spec.Name)}
			sm := NewStatelessExternal(&st)
			slErr := sm.FireCtx(ctx, ev)

			if (jsErr == nil) != (fsmErr == nil) || (jsErr == nil) != (slErr == nil) {
				t.Errorf("%s --%s-->: jobstate err %v, looplab/fsm err %v, stateless err %v", spec.Name, ev, jsErr, fsmErr, slErr)
				continue
			}
			if jsErr != nil {
				continue
			}
			if string(next.State) != f.Current() || st.State != string(next.State) {
				t.Errorf("%s --%s-->: jobstate %s, looplab/fsm %s, stateless %v", spec.Name, ev, next.State, f.Current(), st.State)
			}
		}
	}
}

// TestLifecyclesMatch checks that the event lists given to each library
// spell the same lifecycle.
func TestLifecyclesMatch(t *testing.T) {
	for i, ev := range Lifecycle {
		if string(jobstateLifecycle[i]) != ev {
			t.Errorf("step %d: jobstate fires %q, want %q", i, jobstateLifecycle[i], ev)
		}
		if statelessLifecycle[i] != ev {
			t.Errorf("step %d: stateless fires %v, want %q", i, statelessLifecycle[i], ev)
		}
	}
}
