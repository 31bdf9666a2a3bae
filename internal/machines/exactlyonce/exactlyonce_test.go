package exactlyonce

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// run is an engine running the machine on a fresh store and a manual clock.
type run struct {
	t     *testing.T
	ctx   context.Context
	eng   *jobstate.Engine
	store jobstate.Store
}

func newRun(t *testing.T) *run {
	t.Helper()
	def, err := jobstate.NewDefinition(Spec())
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	eng, err := jobstate.New(store, jobstate.WithMachines(def),
		jobstate.WithClock(jobstate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		t.Fatal(err)
	}
	return &run{t: t, ctx: context.Background(), eng: eng, store: store}
}

// failOnce creates a job, claims it and fails the execution with err.
func (r *run) failOnce(err error) (jobstate.Job, []jobstate.Execution) {
	r.t.Helper()
	c, e := r.eng.Create(r.ctx, jobstate.NewJob{Machine: Name})
	if e != nil {
		r.t.Fatal(e)
	}
	cl, e := r.eng.ClaimJob(r.ctx, c.Job.ID, jobstate.ClaimRequest{Worker: "w"})
	if e != nil {
		r.t.Fatal(e)
	}
	job, e := r.eng.Fail(r.ctx, cl.Lease, err)
	if e != nil {
		r.t.Fatal(e)
	}
	xs, e := r.store.Executions(r.ctx, job.ID)
	if e != nil {
		r.t.Fatal(e)
	}
	return job, xs
}

func statuses(xs []jobstate.Execution) []jobstate.ExecStatus {
	out := make([]jobstate.ExecStatus, len(xs))
	for i, x := range xs {
		out[i] = x.Status
	}
	return out
}

// TestPendingAndFailedHaveTheSameExecutions shows what CheckProjection
// documents: a retried failure and a permanent one leave the same
// executions (one ABORTED) and the job PENDING or FAILED; the state is
// stored, and CheckProjection accepts both.
func TestPendingAndFailedHaveTheSameExecutions(t *testing.T) {
	r := newRun(t)
	pending, px := r.failOnce(errors.New("timeout"))
	failed, fx := r.failOnce(jobstate.Permanent(errors.New("bad input")))
	if pending.State != Pending || failed.State != Failed {
		t.Fatalf("states %s and %s, want %s and %s", pending.State, failed.State, Pending, Failed)
	}
	if a, b := statuses(px), statuses(fx); len(a) != 1 || len(b) != 1 || a[0] != b[0] {
		t.Fatalf("executions %v and %v, want one ABORTED each", a, b)
	}
	for _, c := range []struct {
		job jobstate.Job
		xs  []jobstate.Execution
	}{{pending, px}, {failed, fx}} {
		if err := jobstate.CheckProjection(c.job, c.xs); err != nil {
			t.Errorf("%s: %v", c.job.State, err)
		}
	}
}

// TestCheckProjectionRefusesAStateTheExecutionsContradict: each clause of
// CheckProjection fails on a job whose stored state disagrees with its
// executions.
func TestCheckProjectionRefusesAStateTheExecutionsContradict(t *testing.T) {
	r := newRun(t)
	pending, xs := r.failOnce(errors.New("timeout"))
	if pending.RetryCount != 1 {
		t.Fatalf("retry count %d, want 1", pending.RetryCount)
	}
	running := pending
	running.State, running.Kind = Running, jobstate.KindActive
	succeeded := pending
	succeeded.State, succeeded.Kind, succeeded.Outcome = Succeeded, jobstate.KindTerminal, jobstate.OutcomeSucceeded
	for name, c := range map[string]struct {
		job  jobstate.Job
		xs   []jobstate.Execution
		want string
	}{
		"active with no live execution":     {running, xs, "no live or done execution"},
		"succeeded with no DONE execution":  {succeeded, xs, "no live or done execution"},
		"a retried failure with no ABORTED": {pending, nil, "1 retried failures but 0 aborted"},
	} {
		err := jobstate.CheckProjection(c.job, c.xs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, c.want)
		}
	}
}
