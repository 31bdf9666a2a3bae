package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// actionOptions are the checked flags of cancel, redrive and retry.
type actionOptions struct {
	db       database
	defs     []definitionFile
	id       uuid.UUID // the one job, or uuid.Nil with a filter
	query    jobstate.ListQuery
	yes      bool
	verbose  bool
	call     jobstate.Call
	page     int
	parallel int
}

// parseAction checks the command line of an action completely, sending
// nothing to the database: nothing is done on bad input.
func (a *app) parseAction(ctx context.Context, act action, args []string, now time.Time) (actionOptions, error) {
	fs := a.newFlags(act.name, "(ID | filters) [--yes] [--actor WHO] [--reason TEXT]")
	var sf storeFlags
	var ff filterFlags
	sf.register(fs)
	ff.register(fs, false)
	yes := fs.Bool("yes", false, "act; without it the command only prints what it would do")
	verbose := fs.Bool("verbose", false, "with --yes, also print every job moved")
	actor := fs.String("actor", "", "who the history records as making the move (default $USER@host)")
	reason := fs.String("reason", "", "the reason recorded with the move (default \"jobstate "+act.name+"\")")
	page := fs.Int("page", 500, fmt.Sprintf("jobs per page of the selection, 1 to %d", jobstate.MaxListLimit))
	parallel := fs.Int("parallel", 4, "jobs moved at once, 1 to 32")
	pos, err := parse(fs, args)
	if err != nil {
		return actionOptions{}, err
	}
	o := actionOptions{yes: *yes, verbose: *verbose, page: *page, parallel: *parallel}
	switch {
	case len(pos) > 1:
		return o, usagef("%s: name one job id, or select jobs with filters", act.name)
	case len(pos) == 1 && ff.set():
		return o, usagef("%s: give a job id or filters, not both", act.name)
	case len(pos) == 0 && !ff.set():
		return o, usagef("%s: name a job id, or select jobs with filters (--machine, --state, ...)", act.name)
	case o.page < 1 || o.page > jobstate.MaxListLimit:
		return o, usagef("--page %d is outside 1..%d", o.page, jobstate.MaxListLimit)
	case o.parallel < 1 || o.parallel > 32:
		return o, usagef("--parallel %d is outside 1..32", o.parallel)
	}
	if len(pos) == 1 {
		if o.id, err = parseID(pos[0]); err != nil {
			return o, err
		}
	}
	o.call = jobstate.Call{Actor: *actor, Reason: *reason}
	if o.call.Actor == "" {
		o.call.Actor = a.defaultActor()
	}
	if o.call.Reason == "" {
		o.call.Reason = "jobstate " + act.name
	}
	if err := checkText("actor", o.call.Actor, jobstate.MaxKeyBytes); err != nil {
		return o, err
	}
	if err := checkText("reason", o.call.Reason, jobstate.MaxReasonBytes); err != nil {
		return o, err
	}
	if o.db, o.defs, err = a.checkStore(sf); err != nil {
		return o, err
	}
	if len(o.defs) == 0 {
		return o, usagef("%s: no definitions given (--definitions or JOBSTATE_DEFINITIONS): moving a job needs its machine's definition", act.name)
	}
	if o.id != uuid.Nil {
		return o, nil
	}
	if o.query, err = ff.query(now); err != nil {
		return o, err
	}
	o.query.Limit = o.page
	// Jobs created from now on are not selected: a redrive's new jobs
	// never come back into the selection.
	if o.query.CreatedTo.IsZero() || o.query.CreatedTo.After(now) {
		o.query.CreatedTo = now
	}
	if !o.query.CreatedFrom.IsZero() && !o.query.CreatedFrom.Before(o.query.CreatedTo) {
		return o, usagef("--created-from %s selects jobs created after the command started", stamp(o.query.CreatedFrom))
	}
	if err := checkQuery(ctx, o.defs, o.query, ""); err != nil {
		return o, err
	}
	return o, nil
}

// actionCommand returns the command running act.
func actionCommand(act action) func(a *app, ctx context.Context, args []string) error {
	return func(a *app, ctx context.Context, args []string) error {
		o, err := a.parseAction(ctx, act, args, time.Now())
		if err != nil {
			return err
		}
		s, err := a.open(ctx, o.db, o.defs, o.parallel+1)
		if err != nil {
			return err
		}
		defer s.close()
		if o.id != uuid.Nil {
			return a.actOne(ctx, act, s.eng, o)
		}
		return a.actMany(ctx, act, s.eng, o)
	}
}

// actOne moves one job, or says what it would do.
func (a *app) actOne(ctx context.Context, act action, eng *jobstate.Engine, o actionOptions) error {
	job, err := eng.Get(ctx, o.id)
	if errors.Is(err, jobstate.ErrNotFound) {
		return refusedf("job %s not found", o.id)
	}
	if err != nil {
		return dbError(act.name, err)
	}
	why, err := precheck(ctx, act, eng, job)
	if err != nil {
		return dbError(act.name, err)
	}
	if why != "" {
		return refusedf("%s: job %s cannot be %s: %s", act.name, job.ID, act.done, why)
	}
	if !o.yes {
		fmt.Fprintf(a.stdout, "would %s  %s\n", act.name, moveLine(job))
		fmt.Fprintf(a.stdout, "dry run: run again with --yes to %s it\n", act.name)
		return nil
	}
	if a.beforeAct != nil {
		a.beforeAct(ctx, job)
	}
	call := o.call
	call.IfVersion = job.Version
	moved, err := act.do(ctx, eng, job, call)
	switch v, why := judge(err); v {
	case acted:
		fmt.Fprintln(a.stdout, actedLine(act, job, moved))
		return nil
	case skipped:
		return refusedf("%s: job %s was not %s: %s", act.name, job.ID, act.done, why)
	case stopped:
		return dbError(act.name, err)
	default:
		return refusedf("%s: job %s: %s", act.name, job.ID, why)
	}
}

// actedLine says what a move did.
func actedLine(act action, job, moved jobstate.Job) string {
	if moved.ID != job.ID {
		return fmt.Sprintf("%s  %s  %s  as new job %s", act.done, job.ID, job.Machine, moved.ID)
	}
	return fmt.Sprintf("%s  %s  %s  %s -> %s", act.done, job.ID, job.Machine, job.State, moved.State)
}

// tally counts what a bulk action did.
type tally struct {
	selected, acted, skipped, failed int
}

// result is what became of one job of a page.
type result struct {
	job    jobstate.Job
	moved  jobstate.Job
	v      verdict
	reason string
	err    error
}

// actMany selects jobs page by page and moves each (with --yes), or says
// what it would do. A job that cannot be moved, or changed since it was
// listed, is skipped with its reason; an unreachable database or an
// interruption stops the run after the page, with the counts so far.
func (a *app) actMany(ctx context.Context, act action, eng *jobstate.Engine, o actionOptions) error {
	start := time.Now()
	var t tally
	prog := a.progress(act, !o.yes)
	cursor := ""
	var stop error
	for stop == nil {
		page, err := eng.List(ctx, o.query, cursor)
		if err != nil {
			stop = err
			break
		}
		results := a.runPage(ctx, act, eng, o, page.Jobs)
		for _, r := range results {
			t.selected++
			switch r.v {
			case acted:
				t.acted++
				switch {
				case !o.yes:
					fmt.Fprintf(a.stdout, "would %s  %s\n", act.name, moveLine(r.job))
				case o.verbose:
					fmt.Fprintln(a.stdout, actedLine(act, r.job, r.moved))
				}
			case skipped:
				t.skipped++
				word := "skipped"
				if !o.yes {
					word = "would skip"
				}
				fmt.Fprintf(a.stdout, "%s  %s: %s\n", word, moveLine(r.job), r.reason)
			case failed:
				t.failed++
				fmt.Fprintf(a.stdout, "failed  %s: %s\n", moveLine(r.job), r.reason)
			case stopped:
				t.selected--
				if stop == nil {
					stop = r.err
				}
			}
		}
		prog(t, false)
		cursor = page.Next
		if cursor == "" {
			break
		}
	}
	prog(t, true)
	if !o.yes {
		fmt.Fprintf(a.stdout, "dry run: would %s %d job(s), would skip %d, of %d selected; run again with --yes to %s them\n",
			act.name, t.acted, t.skipped, t.selected, act.name)
	} else {
		fmt.Fprintf(a.stdout, "%s: %d %s, %d skipped, %d failed, of %d selected, in %s\n",
			act.name, t.acted, act.done, t.skipped, t.failed, t.selected, elapsed(time.Since(start)))
	}
	switch {
	case stop != nil:
		return dbError(fmt.Sprintf("%s stopped after %d job(s)", act.name, t.selected), stop)
	case t.failed > 0:
		return refusedf("%s: %d job(s) failed", act.name, t.failed)
	}
	return nil
}

// runPage judges, and with --yes moves, the jobs of one page, o.parallel
// at a time; the results keep the page's order.
func (a *app) runPage(ctx context.Context, act action, eng *jobstate.Engine, o actionOptions, jobs []jobstate.Job) []result {
	results := make([]result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(o.parallel, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = a.actJob(ctx, act, eng, o, jobs[i])
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// actJob judges one job and, with --yes, moves it. A job is not begun
// once ctx is done, but one begun is finished whatever ctx does (each
// read and write is bounded by the store's round-trip timeout), so that an
// interrupt never leaves a move whose outcome the summary does not know.
func (a *app) actJob(ctx context.Context, act action, eng *jobstate.Engine, o actionOptions, job jobstate.Job) result {
	r := result{job: job}
	if err := ctx.Err(); err != nil {
		r.v, r.err = stopped, err
		return r
	}
	ctx = context.WithoutCancel(ctx)
	why, err := precheck(ctx, act, eng, job)
	if err != nil {
		r.v, r.reason = judge(err)
		r.err = err
		return r
	}
	if why != "" {
		r.v, r.reason = skipped, why
		return r
	}
	if !o.yes {
		r.v = acted
		return r
	}
	if a.beforeAct != nil {
		a.beforeAct(ctx, job)
	}
	call := o.call
	call.IfVersion = job.Version
	r.moved, r.err = act.do(ctx, eng, job, call)
	r.v, r.reason = judge(r.err)
	return r
}

// progress returns the function that shows a bulk action's progress on
// stderr when it is a terminal: one line, rewritten after each page,
// ended when the run ends.
func (a *app) progress(act action, dry bool) func(t tally, last bool) {
	if !a.terminal {
		return func(tally, bool) {}
	}
	done := act.done
	if dry {
		done = "to " + act.name
	}
	shown := false
	return func(t tally, last bool) {
		if last {
			if shown {
				fmt.Fprintln(a.stderr)
			}
			return
		}
		shown = true
		fmt.Fprintf(a.stderr, "\r%s: %d selected, %d %s, %d skipped, %d failed", act.name, t.selected, t.acted, done, t.skipped, t.failed)
	}
}
