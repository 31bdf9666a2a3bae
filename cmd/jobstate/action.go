package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
)

// action is one of the moves an operator makes: cancel, redrive, retry.
type action struct {
	// name is the command's name; done its past tense.
	name, done string
	// refusal says why the action cannot apply to job, judging by its
	// definition and the job as read; "" when it can.
	refusal func(def *jobstate.Definition, job jobstate.Job) string
	// readsEffects is set when whether the action applies also depends on
	// the job's effect records (a redriven job is not redriven twice).
	readsEffects bool
	// do makes the move with the engine, returning the job it leaves (the
	// new job of a redrive).
	do func(ctx context.Context, eng *jobstate.Engine, job jobstate.Job, c jobstate.Call) (jobstate.Job, error)
}

// cancelAction fires the machine's cancel rule (Engine.Cancel).
var cancelAction = action{
	name: "cancel", done: "cancelled",
	refusal: func(def *jobstate.Definition, job jobstate.Job) string {
		switch {
		case job.Terminal():
			return fmt.Sprintf("it is finished (state %s)", job.State)
		case def.Policy().DerivedState:
			return fmt.Sprintf("machine %q derives its states from its executions: it has no cancel rule", def.Name())
		case !def.Can(job.State, jobstate.EventCancel):
			return fmt.Sprintf("machine %q has no cancel rule from state %s", def.Name(), job.State)
		}
		if code := ruleCode(def, job.State, jobstate.EventCancel); code != "" {
			return fmt.Sprintf("the cancel rule from state %s runs the service's code (%s): cancel it through the service", job.State, code)
		}
		return ""
	},
	do: func(ctx context.Context, eng *jobstate.Engine, job jobstate.Job, c jobstate.Call) (jobstate.Job, error) {
		return eng.Cancel(ctx, job.ID, c)
	},
}

// redriveAction runs a finished job again as a new job (Engine.Redrive),
// from the states its machine redrives from.
var redriveAction = action{
	name: "redrive", done: "redriven",
	refusal:      redriveRefusal,
	readsEffects: true,
	do: func(ctx context.Context, eng *jobstate.Engine, job jobstate.Job, c jobstate.Call) (jobstate.Job, error) {
		return eng.Redrive(ctx, job.ID, c)
	},
}

func redriveRefusal(def *jobstate.Definition, job jobstate.Job) string {
	from := def.Policy().RedriveFrom
	if !containsState(from, job.State) {
		if len(from) == 0 {
			return fmt.Sprintf("machine %q redrives no job (its policy lists no redrive_from state)", def.Name())
		}
		return fmt.Sprintf("machine %q does not redrive from state %s (only from %s)", def.Name(), job.State, joinStates(from))
	}
	if code := createCode(def); code != "" {
		return fmt.Sprintf("a redrive creates a job, which runs the service's code (%s): redrive it through the service", code)
	}
	return ""
}

// retryAction runs a job that failed again: a redrive restricted to jobs
// whose outcome is a failure. A job still waiting for its retry is not
// one: the engine offers no operation to make it due sooner.
var retryAction = action{
	name: "retry", done: "retried",
	refusal: func(def *jobstate.Definition, job jobstate.Job) string {
		switch {
		case job.Kind == jobstate.KindWaiting && !job.NotBefore.IsZero():
			return fmt.Sprintf("it is waiting to retry (state %s) until %s: the engine has no operation to make it due sooner; the sweep requeues it then", job.State, stamp(job.NotBefore))
		case !job.Terminal():
			return fmt.Sprintf("it has not failed (state %s, %s): retry runs failed jobs again", job.State, job.Kind)
		}
		if !job.Outcome.Failure() {
			return fmt.Sprintf("its outcome %s is not a failure: retry runs failed, dead-lettered or expired jobs again (redrive runs any job its machine redrives)", job.Outcome)
		}
		return redriveRefusal(def, job)
	},
	readsEffects: true,
	do: func(ctx context.Context, eng *jobstate.Engine, job jobstate.Job, c jobstate.Call) (jobstate.Job, error) {
		return eng.Redrive(ctx, job.ID, c)
	},
}

func joinStates(list []jobstate.State) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// verdict is what became of one job.
type verdict int

const (
	acted verdict = iota
	skipped
	failed
	// stopped: the database could not be reached, or the run was
	// interrupted: no further job is tried.
	stopped
)

// judge classifies the error of a move: a job that changed meanwhile, or
// whose move the table, a guard or the service's code refuses, is skipped
// with the reason; an unreachable database or an interruption stops the
// run; anything else failed the job.
func judge(err error) (verdict, string) {
	switch {
	case err == nil:
		return acted, ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, jobstate.ErrUnavailable):
		return stopped, err.Error()
	case errors.Is(err, errNeedsCode):
		return skipped, "the move " + trimJobstate(err) + ": do it through the service"
	case errors.Is(err, jobstate.ErrVersionConflict):
		return skipped, "it changed since it was listed"
	case errors.Is(err, jobstate.ErrNotFound):
		return skipped, "it no longer exists"
	case errors.Is(err, jobstate.ErrEffectApplied):
		return skipped, "it was redriven already"
	case errors.Is(err, jobstate.ErrInvalidTransition), errors.Is(err, jobstate.ErrGuardRefused),
		errors.Is(err, jobstate.ErrAlreadyCommitted), errors.Is(err, jobstate.ErrUnknownMachine):
		return skipped, trimJobstate(err)
	}
	return failed, trimJobstate(err)
}

// trimJobstate drops the "jobstate: " prefix of the library's errors.
func trimJobstate(err error) string {
	return strings.ReplaceAll(oneLine(err.Error()), "jobstate: ", "")
}

// redriven reports whether the job was redriven already, from its effect
// records.
func redriven(ctx context.Context, eng *jobstate.Engine, job jobstate.Job) (bool, error) {
	effs, err := eng.Effects(ctx, job.ID)
	if err != nil {
		return false, err
	}
	for _, e := range effs {
		if e.Name == jobstate.RedriveEffect {
			return true, nil
		}
	}
	return false, nil
}

// precheck says why act cannot apply to job ("" when it can), or the
// error of reading what it needs.
func precheck(ctx context.Context, act action, eng *jobstate.Engine, job jobstate.Job) (string, error) {
	def, ok := eng.Machine(job.Machine)
	if !ok {
		return fmt.Sprintf("its machine %q is not among the definitions", job.Machine), nil
	}
	if why := act.refusal(def, job); why != "" {
		return why, nil
	}
	if act.readsEffects {
		done, err := redriven(ctx, eng, job)
		if err != nil {
			return "", err
		}
		if done {
			return "it was redriven already", nil
		}
	}
	return "", nil
}

// defaultActor is "$USER@host", the operator recorded when --actor is not
// given.
func (a *app) defaultActor() string {
	user := a.getenv("USER")
	if user == "" {
		user = a.getenv("LOGNAME")
	}
	if user == "" {
		user = "operator"
	}
	host, err := a.hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return user + "@" + host
}

// checkText refuses a text the engine would refuse to record.
func checkText(flagName, s string, limit int) error {
	switch {
	case len(s) > limit:
		return usagef("--%s is %d bytes long, above the limit of %d", flagName, len(s), limit)
	case !utf8.ValidString(s):
		return usagef("--%s is not valid UTF-8", flagName)
	case containsNUL(s):
		return usagef("--%s holds a NUL character", flagName)
	}
	return nil
}

// moveLine names a job for people: its id, machine and state.
func moveLine(job jobstate.Job) string {
	return fmt.Sprintf("%s  %s  %s", job.ID, job.Machine, job.State)
}

// elapsed rounds a duration for a summary.
func elapsed(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}
