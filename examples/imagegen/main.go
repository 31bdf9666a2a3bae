// Command imagegen runs image generation jobs through the worker runtime,
// on the in-memory store or on PostgreSQL: jobs
// are created straight into "queued" behind a creation guard (prompt
// validation, quota) and an idempotency key, pay for themselves with a
// credit reservation made once at creation, are retried with exponential
// backoff, end in "dead_letter" when the failure count reaches MAX_RETRIES,
// in "rejected" when the safety filter blocks them (an audit record, no
// refund), and in "completed" when the image is stored as an asset. After
// manual review an operator may run a dead-lettered job again, once, as a
// new job (Engine.Redrive); the user's reservation covers it (see
// App.Redrive).
//
//	go run ./examples/imagegen
//	go run ./examples/imagegen -store postgres [-database-url URL]
//	go run ./examples/imagegen -store sqlite [-db PATH]
//
// With -store postgres and no -database-url (nor JOBSTATE_DATABASE_URL)
// it starts a throwaway PostgreSQL cluster for the run; the application
// database stays in memory. With -store sqlite it runs on SQLite files in
// a temporary directory, or at PATH (which must not exist yet) and beside
// it.
//
// The files: machine.go declares the machine (states, table, policy,
// guard and key); appdb.go is the application's own database, which the
// guard and the effects read and write; service.go is the service (the
// engine, the fake image API, the API handlers and the worker's
// handler); main.go runs the demonstration. Time is a manual clock, so the backoffs pass
// instantly, and job ids come from a counter, so the output is the same on
// every run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
)

// main runs the demonstration on standard output.
func main() {
	exstore.Main("imagegen", nil, func(ctx context.Context, b *exstore.Backend) error {
		return run(ctx, os.Stdout, b)
	})
}

// demo holds the demonstration's state: the service and short names for
// its jobs.
type demo struct {
	ctx   context.Context
	out   io.Writer
	app   *App
	names map[uuid.UUID]string
	order []uuid.UUID
}

// run creates the requests of the demonstration, works the queue until
// every job has ended, and prints the lifecycle of each.
func run(ctx context.Context, out io.Writer, b *exstore.Backend) error {
	start := time.Date(2026, 3, 2, 9, 0, 5, 0, time.UTC)
	users := map[string]int{"alice": 20, "bob": 20, "carol": 20, "dave": 3, "erin": 20}
	store, err := b.NewStore(ctx)
	if err != nil {
		return err
	}
	app, err := NewAppOn(store, start, users, jobstate.WithIDs(SeqIDs()))
	if err != nil {
		return err
	}
	d := &demo{ctx: ctx, out: out, app: app, names: make(map[uuid.UUID]string)}

	lighthouse := Request{UserID: "alice", Prompt: "a lighthouse at dusk, oil on canvas", Params: Params{Size: "1024x1024", Style: "painting"}}
	skyline := Request{UserID: "bob", Prompt: "a city skyline in the rain", Params: Params{Size: "1024x1792"}}
	battle := Request{UserID: "carol", Prompt: "a gory battle scene", Params: Params{Size: "512x512"}}
	// bob's three attempts fail; the fourth call, after the operator's
	// review, gets its image.
	app.API.Script(skyline.Prompt, ErrAPI500, ErrAPITimeout, ErrAPI500, nil)
	app.API.Script(battle.Prompt, ErrSafetyBlock)

	fmt.Fprintf(out, "Image generation on %s. Clock starts %s; one image costs %d credits.\n", b.Describe(), start.Format("2006-01-02 15:04:05 MST"), CreditsPerImage)
	fmt.Fprintf(out, "Credits: %s\n\nRequests\n", d.balances(users))

	if err := d.create("alice asks for an image", lighthouse); err != nil {
		return err
	}
	app.Clock.Advance(10 * time.Second)
	if err := d.create("alice's UI resends the same request (network retry)", lighthouse); err != nil {
		return err
	}
	for _, r := range []struct {
		what string
		req  Request
	}{
		{"bob asks for an image", skyline},
		{"carol asks for an image", battle},
		{"dave, with 3 credits, asks for an image", Request{UserID: "dave", Prompt: "a red bicycle", Params: Params{Size: "512x512"}}},
		{"erin sends a blank prompt", Request{UserID: "erin", Prompt: "   ", Params: Params{Size: "512x512"}}},
		{"erin asks for an unsupported size", Request{UserID: "erin", Prompt: "a red bicycle", Params: Params{Size: "640x480"}}},
	} {
		if err := d.create(r.what, r.req); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "\nWorker (each API call takes %s; the sweep runs before each pickup; an idle worker waits a second)\n", app.API.latency)
	if err := d.work(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nRequests (dead_letter keeps the key: only failed releases it)")
	if err := d.create("bob's UI resends his request, still within the minute", skyline); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nOperator (manual review of the dead letter: the API outage is over)")
	app.Clock.Advance(time.Minute)
	job1, job2 := d.order[0], d.order[1]
	for _, r := range []struct {
		what string
		id   uuid.UUID
	}{
		{"ops picks the wrong job", job1},
		{"ops redrives the dead letter", job2},
		{"ops clicks again", job2},
	} {
		if err := d.redrive(r.what, r.id, "ops", "reviewed: API outage over"); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "\nWorker")
	if err := d.work(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nCredits: %s (nothing refunded, the redrive not charged)\n", d.balances(users))
	fmt.Fprintln(out, "Reservations:")
	for _, r := range app.DB.Reservations() {
		fmt.Fprintf(out, "  %s  %-5s -%d credits for %s\n", r.At.Format("15:04:05"), r.User, r.Credits, d.names[r.JobID])
	}
	fmt.Fprintln(out, "Redrives:")
	for _, r := range app.DB.Redrives() {
		fmt.Fprintf(out, "  %s  %s runs %s's %s again as %s, paid by %s's reservation\n", r.At.Format("15:04:05"), r.Operator, r.Owner, d.names[r.Of], d.names[r.Job], d.names[r.Of])
	}
	fmt.Fprintln(out, "Audit log:")
	for _, a := range app.DB.Audit() {
		fmt.Fprintf(out, "  %s  %s %s of %s, rejected by %s: %s\n", a.At.Format("15:04:05"), a.Action, a.User, d.names[a.JobID], a.Actor, a.Reason)
	}
	fmt.Fprintln(out, "Asset library:")
	for _, a := range app.DB.Assets() {
		obj, _ := app.DB.Object(a.Path)
		fmt.Fprintf(out, "  %s  %s: %s (%d bytes), resultUrl %s\n", a.At.Format("15:04:05"), a.Owner, a.Path, len(obj), a.URL)
	}

	fmt.Fprintln(out, "\nHistories")
	for _, id := range d.order {
		if err := d.history(id); err != nil {
			return err
		}
	}
	return nil
}

// create sends a createJob request and prints what came of it.
func (d *demo) create(what string, r Request) error {
	before := d.app.DB.Balance(r.UserID)
	c, err := d.app.CreateJob(d.ctx, r)
	at := d.app.Clock.Now().Format("15:04:05")
	fmt.Fprintf(d.out, "  %s  %s: %q %s\n", at, what, r.Prompt, r.Params.Size)
	switch {
	case errors.Is(err, jobstate.ErrGuardRefused):
		fmt.Fprintf(d.out, "            refused, nothing created (%s): %s; credits %d\n", jobstate.Code(err), guardCause(err), d.app.DB.Balance(r.UserID))
		return nil
	case err != nil:
		return err
	case c.Existing:
		fmt.Fprintf(d.out, "            same key within the minute: the existing %s (%s) is returned; credits still %d\n", d.names[c.Job.ID], c.Job.State, d.app.DB.Balance(r.UserID))
		return nil
	}
	name := fmt.Sprintf("job %d", len(d.order)+1)
	d.names[c.Job.ID] = name
	d.order = append(d.order, c.Job.ID)
	fmt.Fprintf(d.out, "            %s created in %s; credits %d -> %d\n", name, c.Job.State, before, d.app.DB.Balance(r.UserID))
	return nil
}

// redrive has operator run a job again and prints what came of it.
func (d *demo) redrive(what string, id uuid.UUID, operator, reason string) error {
	old, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	before := d.app.DB.Balance(old.Owner)
	n, err := d.app.Redrive(d.ctx, id, operator, reason)
	fmt.Fprintf(d.out, "  %s  %s: %s (%s's, %s), reason %q\n", d.app.Clock.Now().Format("15:04:05"), what, d.names[id], old.Owner, old.State, reason)
	switch {
	case errors.Is(err, jobstate.ErrInvalidTransition):
		fmt.Fprintf(d.out, "            refused, nothing changed (%s): only dead_letter is redriven\n", jobstate.Code(err))
		return nil
	case errors.Is(err, jobstate.ErrEffectApplied):
		fmt.Fprintf(d.out, "            refused, nothing changed (%s): a dead letter is redriven once\n", jobstate.Code(err))
		return nil
	case err != nil:
		return err
	}
	after, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("job %d", len(d.order)+1)
	d.names[n.ID] = name
	d.order = append(d.order, n.ID)
	fmt.Fprintf(d.out, "            %s created in %s; %s stays %s; %s's credits %d -> %d (%s's reservation covers it)\n",
		name, n.State, d.names[id], after.State, n.Owner, before, d.app.DB.Balance(n.Owner), d.names[id])
	return nil
}

// guardCause returns the guard's own error from a refusal.
func guardCause(err error) string {
	var te *jobstate.TransitionError
	if errors.As(err, &te) && te.Cause != nil {
		return te.Cause.Error()
	}
	return err.Error()
}

// work runs one worker until every job has ended, one pickup at a time
// (App.Work: the worker runtime, drained of one job), printing each.
func (d *demo) work() error {
	for {
		done, err := d.allEnded()
		if err != nil || done {
			return err
		}
		if _, err := d.app.Eng.Sweep(d.ctx); err != nil {
			return err
		}
		job, err := d.app.Work(d.ctx, "worker-1")
		if errors.Is(err, jobstate.ErrNoJob) {
			if err := d.app.Tick(d.ctx, time.Second); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		at := job.UpdatedAt.Format("15:04:05")
		fmt.Fprintf(d.out, "  %s  %s attempt %d: ", at, d.names[job.ID], job.Attempt)
		switch job.Kind {
		case jobstate.KindWaiting:
			n, err := d.app.RetryCount(d.ctx, job.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(d.out, "%s -> %s (retryCount %d < %d); retry due at %s (backoff %s)\n", job.LastError, job.State, n, MaxRetries, job.NotBefore.Format("15:04:05"), job.NotBefore.Sub(job.UpdatedAt))
		case jobstate.KindTerminal:
			h, err := d.app.Eng.History(d.ctx, job.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(d.out, "-> %s (", job.State)
			switch last := h[len(h)-1]; {
			case len(job.Result) > 0:
				fmt.Fprintf(d.out, "resultUrl %s", job.Result)
			case job.LastError != "":
				fmt.Fprintf(d.out, "%s; retryCount %d, not < MAX_RETRIES %d", last.Reason, RetryCount(h), MaxRetries)
			default:
				fmt.Fprintf(d.out, "%s", last.Reason)
			}
			fmt.Fprintln(d.out, ")")
		default:
			fmt.Fprintf(d.out, "-> %s\n", job.State)
		}
	}
}

// allEnded reports whether every job of the demonstration is terminal.
func (d *demo) allEnded() (bool, error) {
	for _, id := range d.order {
		j, err := d.app.Eng.Get(d.ctx, id)
		if err != nil {
			return false, err
		}
		if !j.Terminal() {
			return false, nil
		}
	}
	return true, nil
}

// history prints a job's transition records.
func (d *demo) history(id uuid.UUID) error {
	job, err := d.app.Eng.Get(d.ctx, id)
	if err != nil {
		return err
	}
	h, err := d.app.Eng.History(d.ctx, id)
	if err != nil {
		return err
	}
	if _, err := d.app.Def.Replay(h); err != nil {
		return fmt.Errorf("%s: history does not replay: %w", d.names[id], err)
	}
	fmt.Fprintf(d.out, "  %s (%s): %s, outcome %s, attempts %d, retryCount %d\n", d.names[id], job.Owner, job.State, job.Outcome, job.Attempt, RetryCount(h))
	for _, t := range h {
		from := string(t.From)
		if from == "" {
			from = "null"
		}
		line := fmt.Sprintf("    v%-2d %s  %-8s --%-7s--> %-11s %-8s %s", t.Version, t.At.Format("15:04:05"), from, t.Event, t.To, t.Actor, t.Reason)
		fmt.Fprintln(d.out, strings.TrimRight(line, " "))
	}
	effects, err := d.app.Store.Effects(d.ctx, id)
	if err != nil {
		return err
	}
	for _, ef := range effects {
		what := ""
		for _, r := range d.app.DB.Redrives() {
			if ef.Name == jobstate.RedriveEffect && r.Of == id {
				what = ": run again as " + d.names[r.Job]
			}
		}
		fmt.Fprintf(d.out, "        %s  effect %q by %s%s (no transition record; the job stays %s, v%d)\n", ef.At.Format("15:04:05"), ef.Name, ef.Actor, what, job.State, job.Version)
	}
	return nil
}

// balances lists the users' credits, by name.
func (d *demo) balances(users map[string]int) string {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, u := range names {
		parts[i] = fmt.Sprintf("%s %d", u, d.app.DB.Balance(u))
	}
	return strings.Join(parts, ", ")
}
