package jobstatetest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// Each assertion reports a mismatch with Errorf (the test goes on), with
// the job's history and executions in the message, and returns whether it
// held.

// AssertState checks the job's current state.
func (e *Env) AssertState(id uuid.UUID, want jobstate.State) bool {
	e.T.Helper()
	j := e.Get(id)
	if j.State == want {
		return true
	}
	e.T.Errorf("job %s: state %s, want %s\n%s", id, j.State, want, e.Describe(id))
	return false
}

// AssertTerminal checks that the job is in a terminal state.
func (e *Env) AssertTerminal(id uuid.UUID) bool {
	e.T.Helper()
	j := e.Get(id)
	if j.Terminal() {
		return true
	}
	e.T.Errorf("job %s: state %s is %s, want a terminal state\n%s", id, j.State, j.Kind, e.Describe(id))
	return false
}

// AssertHistory checks the events of the job's history, in order, from
// its creation ("create") on.
func (e *Env) AssertHistory(id uuid.UUID, want ...jobstate.Event) bool {
	e.T.Helper()
	h := e.history(id)
	got := make([]jobstate.Event, len(h))
	for i, t := range h {
		got[i] = t.Event
	}
	if slices.Equal(got, want) {
		return true
	}
	e.T.Errorf("job %s: history %s, want %s\n%s", id, joinEvents(got), joinEvents(want), e.Describe(id))
	return false
}

// AssertPath checks the states the job's history went through, in order:
// the state it was created in, then the target of each record.
func (e *Env) AssertPath(id uuid.UUID, want ...jobstate.State) bool {
	e.T.Helper()
	h := e.history(id)
	got := make([]jobstate.State, len(h))
	for i, t := range h {
		got[i] = t.To
	}
	if slices.Equal(got, want) {
		return true
	}
	e.T.Errorf("job %s: path %s, want %s\n%s", id, joinStates(got), joinStates(want), e.Describe(id))
	return false
}

// AssertCommittedOnce checks the exactly-once boundary for the job: it
// succeeded, exactly one of its executions committed (and finished), and
// the job names that execution as its commit. For the effect itself, see
// Ledger.
func (e *Env) AssertCommittedOnce(id uuid.UUID) bool {
	e.T.Helper()
	j := e.Get(id)
	execs, err := e.Engine.Executions(e.Ctx, id)
	if err != nil {
		e.T.Fatalf("jobstatetest: executions of job %s: %v", id, err)
	}
	var committed []jobstate.Execution
	for _, x := range execs {
		if x.Status == jobstate.ExecCommitted || x.Status == jobstate.ExecDone {
			committed = append(committed, x)
		}
	}
	var problems []string
	if j.Outcome != jobstate.OutcomeSucceeded {
		problems = append(problems, fmt.Sprintf("the job is %s (outcome %q), not succeeded", j.State, j.Outcome))
	}
	switch {
	case len(committed) != 1:
		problems = append(problems, fmt.Sprintf("%d executions committed, want exactly 1", len(committed)))
	case j.Committed != committed[0].ID:
		problems = append(problems, fmt.Sprintf("the job names execution %s as committed, but execution %s did", j.Committed, committed[0].ID))
	case committed[0].Status != jobstate.ExecDone:
		problems = append(problems, fmt.Sprintf("execution %s committed but is %s, not DONE", committed[0].ID, committed[0].Status))
	}
	if len(problems) == 0 {
		return true
	}
	e.T.Errorf("job %s: not committed exactly once: %s\n%s", id, strings.Join(problems, "; "), e.Describe(id))
	return false
}

// AssertEffects checks the names of the once-only effect records of the
// job (Engine.Effects: Engine.Apply, Engine.Redrive), in order.
func (e *Env) AssertEffects(id uuid.UUID, want ...string) bool {
	e.T.Helper()
	recs, err := e.Engine.Effects(e.Ctx, id)
	if err != nil {
		e.T.Fatalf("jobstatetest: effects of job %s: %v", id, err)
	}
	got := make([]string, len(recs))
	for i, r := range recs {
		got[i] = r.Name
	}
	if slices.Equal(got, want) {
		return true
	}
	e.T.Errorf("job %s: effect records [%s], want [%s]\n%s", id, strings.Join(got, ", "), strings.Join(want, ", "), e.Describe(id))
	return false
}

// Describe returns the job's state, history and executions as text, for
// failure messages.
func (e *Env) Describe(id uuid.UUID) string {
	var b strings.Builder
	j, err := e.Engine.Get(e.Ctx, id)
	if err != nil {
		return fmt.Sprintf("  (job %s: %v)", id, err)
	}
	fmt.Fprintf(&b, "  job %s on %q: %s, attempt %d, %d retries", j.ID, j.Machine, j.State, j.Attempt, j.RetryCount)
	if j.LastError != "" {
		msg, _, _ := strings.Cut(j.LastError, "\n")
		fmt.Fprintf(&b, ", last error (%s) %q", j.ErrorClass, msg)
	}
	b.WriteString("\n  history:\n")
	h, _ := e.Engine.History(e.Ctx, id)
	for _, t := range h {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(&b, "    v%-3d %s  %s --%s--> %s", t.Version, t.At.Format("15:04:05.000"), from, t.Event, t.To)
		if t.Actor != "" {
			fmt.Fprintf(&b, "  by %s", t.Actor)
		}
		if t.Reason != "" {
			r, _, _ := strings.Cut(t.Reason, "\n")
			fmt.Fprintf(&b, "  (%s)", r)
		}
		b.WriteByte('\n')
	}
	b.WriteString("  executions:\n")
	execs, _ := e.Engine.Executions(e.Ctx, id)
	for _, x := range execs {
		fmt.Fprintf(&b, "    #%d %s by %s", x.Attempt, x.Status, x.Owner)
		if x.Error != "" {
			msg, _, _ := strings.Cut(x.Error, "\n")
			fmt.Fprintf(&b, ": %s", msg)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (e *Env) history(id uuid.UUID) []jobstate.Transition {
	e.T.Helper()
	h, err := e.Engine.History(e.Ctx, id)
	if err != nil {
		e.T.Fatalf("jobstatetest: history of job %s: %v", id, err)
	}
	return h
}

func joinEvents(evs []jobstate.Event) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = string(ev)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func joinStates(sts []jobstate.State) string {
	s := make([]string, len(sts))
	for i, st := range sts {
		s[i] = string(st)
	}
	return "[" + strings.Join(s, " → ") + "]"
}
