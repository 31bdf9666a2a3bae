package bench

import (
	"context"
	"testing"

	"github.com/jobstate/jobstate"
)

// Sinks keep the compiler from discarding the benchmarked work.
var (
	sinkJob   jobstate.Job
	sinkState string
)

// BenchmarkLifecycle runs the whole six-step lifecycle once per iteration.
//
//   - jobstate: one Definition, a fresh Job value per lifecycle (the job is
//     all the state the pure core keeps).
//   - jobstate_newdef: a Definition validated and built per lifecycle too,
//     the counterpart of building a machine per lifecycle.
//   - looplab_fsm, stateless: a machine built per lifecycle, since each
//     machine holds the state of one job.
//   - looplab_fsm_reuse: one machine, reset with SetState per lifecycle.
//   - stateless_reuse: one configured machine with external state storage,
//     reset by writing the stored state per lifecycle.
func BenchmarkLifecycle(b *testing.B) {
	ctx := context.Background()

	b.Run("jobstate", func(b *testing.B) {
		def, err := NewDefinition()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			job := NewJob(Created, jobstate.KindInitial)
			if err := RunJobstate(ctx, def, &job); err != nil {
				b.Fatal(err)
			}
			sinkJob = job
		}
	})

	b.Run("jobstate_newdef", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			def, err := NewDefinition()
			if err != nil {
				b.Fatal(err)
			}
			job := NewJob(Created, jobstate.KindInitial)
			if err := RunJobstate(ctx, def, &job); err != nil {
				b.Fatal(err)
			}
			sinkJob = job
		}
	})

	b.Run("looplab_fsm", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s, err := RunLooplab(ctx, NewLooplabFSM(Created))
			if err != nil {
				b.Fatal(err)
			}
			sinkState = s
		}
	})

	b.Run("looplab_fsm_reuse", func(b *testing.B) {
		f := NewLooplabFSM(Created)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.SetState(Created)
			s, err := RunLooplab(ctx, f)
			if err != nil {
				b.Fatal(err)
			}
			sinkState = s
		}
	})

	b.Run("stateless", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s, err := RunStateless(ctx, NewStateless(Created))
			if err != nil {
				b.Fatal(err)
			}
			sinkState = s
		}
	})

	b.Run("stateless_reuse", func(b *testing.B) {
		var st StatelessStore
		sm := NewStatelessExternal(&st)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			st.State = Created
			s, err := RunStateless(ctx, sm)
			if err != nil {
				b.Fatal(err)
			}
			sinkState = s
		}
	})
}

// BenchmarkTransition fires one transition, QUEUED --claim--> RUNNING, per
// iteration. Each library keeps one job or machine whose state is reset to
// QUEUED before each firing (the reset is inside the timing): jobstate sets
// the job's State and Kind and steps it in place, looplab/fsm calls
// SetState, stateless writes its external state storage.
func BenchmarkTransition(b *testing.B) {
	ctx := context.Background()

	b.Run("jobstate", func(b *testing.B) {
		def, err := NewDefinition()
		if err != nil {
			b.Fatal(err)
		}
		job := NewJob(Queued, jobstate.KindReady)
		in := jobstate.Input{Event: jobstate.EventClaim, Now: FixedTime}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			job.State, job.Kind = Queued, jobstate.KindReady
			if _, err := def.Step(ctx, &job, in); err != nil {
				b.Fatal(err)
			}
		}
		sinkJob = job
	})

	b.Run("looplab_fsm", func(b *testing.B) {
		f := NewLooplabFSM(Queued)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.SetState(Queued)
			if err := f.Event(ctx, Claim); err != nil {
				b.Fatal(err)
			}
		}
		sinkState = f.Current()
	})

	b.Run("stateless", func(b *testing.B) {
		var st StatelessStore
		sm := NewStatelessExternal(&st)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			st.State = Queued
			if err := sm.FireCtx(ctx, Claim); err != nil {
				b.Fatal(err)
			}
		}
		sinkState, _ = st.State.(string)
	})
}
