// Command exactlyonce runs the exactly-once execution model on the
// in-memory store or on PostgreSQL. The job (PENDING, RUNNING, SUCCEEDED, FAILED) is a
// projection of its executions (LEASED, IN_PROGRESS, COMMITTED, DONE,
// ABORTED); the side effect, a credit to the example's ledger, runs only
// inside the engine's commit boundary. It shows:
//
//  1. the happy path, LEASED → IN_PROGRESS → COMMITTED → DONE;
//  2. FM_001 reproduced: worker A stalls past its lease, B re-runs the job
//     and commits, A wakes and is refused; the credit is written once;
//  3. a worker killed mid-job before its commit, recovered by the sweep
//     and retried;
//  4. a crash after COMMITTED but before DONE, finalized by the sweep
//     without writing the credit again.
//
// Every step prints the job's state and its executions' statuses, after
// checking that the state is the projection of the executions.
//
//	go run ./examples/exactlyonce
//	go run ./examples/exactlyonce -store postgres [-database-url URL]
//	go run ./examples/exactlyonce -store sqlite [-db PATH]
//
// With -store postgres and no -database-url (nor JOBSTATE_DATABASE_URL)
// it starts a throwaway PostgreSQL cluster for the run.
// With -store sqlite it runs on SQLite files in a temporary directory,
// or at PATH (which must not exist yet) and beside it.
//
// Time is a manual clock, so leases expire without waiting.
//
// The scenarios stage crashes, stalls and duplicate deliveries, so worker
// A's steps (and, in scenario 1, each execution status in turn) are the
// engine's calls made one at a time, where the worker runtime would run
// them in one go; a worker that simply runs the job (B in scenario 3)
// runs through the runtime (Worker.Run).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
)

// main runs the four scenarios and prints them to standard output.
func main() {
	exstore.Main("exactlyonce", nil, func(ctx context.Context, b *exstore.Backend) error {
		return run(ctx, os.Stdout, b)
	})
}

// run runs every scenario, each in a fresh World on a store of its own,
// and prints them to out.
func run(ctx context.Context, out io.Writer, b *exstore.Backend) error {
	scenarios := []struct {
		title string
		fn    func(ctx context.Context, w *World, out io.Writer) (uuid.UUID, error)
	}{
		{"1. Happy path: LEASED → IN_PROGRESS → COMMITTED → DONE", happyPath},
		{"2. FM_001 reproduced: a duplicate execution after a lease expiry", fm001},
		{"3. A worker killed mid-job, before its commit", killedWorker},
		{"4. A crash after COMMITTED, before DONE", crashAfterCommit},
	}
	for i, s := range scenarios {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "== %s ==\n", s.title)
		store, err := b.NewStore(ctx)
		if err != nil {
			return err
		}
		w, err := NewWorldOn(store)
		if err != nil {
			return err
		}
		id, err := s.fn(ctx, w, out)
		if err != nil {
			return fmt.Errorf("%s: %w", s.title, err)
		}
		if err := w.printRecords(ctx, out, id); err != nil {
			return err
		}
	}
	def, err := Machine()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nThe job machine, as a Mermaid state diagram:")
	fmt.Fprint(out, def.Mermaid())
	return nil
}

// happyPath runs one payout through every execution status. Its steps are
// the engine's calls made one at a time, so that each status (LEASED,
// IN_PROGRESS, COMMITTED, DONE) is seen: the worker runtime would commit
// and finish in one write.
func happyPath(ctx context.Context, w *World, out io.Writer) (uuid.UUID, error) {
	job, err := w.Submit(ctx, Payout{Account: "acct-1", Amount: 1000})
	if err != nil {
		return uuid.Nil, err
	}
	if err := w.step(ctx, out, job.ID, "the API submits a payout of 1000 to acct-1"); err != nil {
		return job.ID, err
	}
	a := w.Worker("A")
	c, err := a.Lease(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A leases the job (execution %s, token %d)", ShortID(c.Lease.ExecID), c.Lease.Token); err != nil {
		return job.ID, err
	}
	w.Clock.Advance(time.Second)
	if err := a.Start(ctx, c.Lease); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A starts the work"); err != nil {
		return job.ID, err
	}
	r, err := Prepare(c.Job)
	if err != nil {
		return job.ID, err
	}
	w.Clock.Advance(2 * time.Second)
	if err := w.step(ctx, out, job.ID, "A prepares (safe to repeat): receipt %s", r.Reference); err != nil {
		return job.ID, err
	}
	if err := a.Commit(ctx, c.Lease, r); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A commits: the credit is written at the boundary"); err != nil {
		return job.ID, err
	}
	w.Clock.Advance(time.Second)
	if _, err := a.Finish(ctx, c.Lease); err != nil {
		return job.ID, err
	}
	return job.ID, w.step(ctx, out, job.ID, "A finishes")
}

// fm001 reproduces FM_001, the exactly-once lifecycle's double effect, and shows the engine preventing it:
// A leases and starts, stalls past its lease; the sweep aborts A's
// execution and the job goes back to PENDING; B leases and commits; A wakes
// and tries to commit and finish: both refused, naming B; the credit is
// written once.
func fm001(ctx context.Context, w *World, out io.Writer) (uuid.UUID, error) {
	job, err := w.Submit(ctx, Payout{Account: "acct-7", Amount: 2500})
	if err != nil {
		return uuid.Nil, err
	}
	a, b := w.Worker("A"), w.Worker("B")
	ca, err := a.Lease(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := a.Start(ctx, ca.Lease); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A leases (execution %s, token %d) and starts", ShortID(ca.Lease.ExecID), ca.Lease.Token); err != nil {
		return job.ID, err
	}
	ra, err := Prepare(ca.Job)
	if err != nil {
		return job.ID, err
	}
	w.Clock.Advance(LeaseTTL + time.Second)
	if err := w.step(ctx, out, job.ID, "A prepared, then stalls past its lease (%s)", ca.Lease.ExpiresAt.Format("15:04:05")); err != nil {
		return job.ID, err
	}
	rep, err := w.Engine.Sweep(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "sweep: lease expired, nothing COMMITTED (aborted %d)", rep.Aborted); err != nil {
		return job.ID, err
	}
	cb, err := b.Lease(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := b.Start(ctx, cb.Lease); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "B leases (execution %s, token %d) and starts", ShortID(cb.Lease.ExecID), cb.Lease.Token); err != nil {
		return job.ID, err
	}
	rb, err := Prepare(cb.Job)
	if err != nil {
		return job.ID, err
	}
	w.Clock.Advance(time.Second)
	if err := b.Commit(ctx, cb.Lease, rb); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "B commits: the credit is written"); err != nil {
		return job.ID, err
	}

	// A wakes up and carries on as if nothing happened.
	w.Clock.Advance(time.Second)
	err = a.Commit(ctx, ca.Lease, ra)
	if err := w.refused(ctx, out, job.ID, "A wakes and commits", err); err != nil {
		return job.ID, err
	}
	_, err = a.Finish(ctx, ca.Lease)
	if err := w.refused(ctx, out, job.ID, "A finishes", err); err != nil {
		return job.ID, err
	}
	if _, err := b.Finish(ctx, cb.Lease); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "B finishes"); err != nil {
		return job.ID, err
	}
	fmt.Fprintf(out, "  two workers reached their commit phase; the ledger holds %d credit for the job (balance of acct-7: %d)\n",
		w.Ledger.Applied(job.ID), w.Ledger.Balance("acct-7"))
	return job.ID, nil
}

// errKilled is what the killed worker's work returns once its context is
// cancelled.
var errKilled = errors.New("worker killed")

// killedWorker runs worker A in a goroutine, kills it (cancels its
// context) while it prepares, and abandons it: nobody waits for it before
// recovery. A's steps are scripted, so that it dies exactly there. The
// sweep aborts A's execution once the lease expires; B retries the job
// through the worker runtime and commits. A's dying attempt to commit with its dead
// context is refused.
func killedWorker(ctx context.Context, w *World, out io.Writer) (uuid.UUID, error) {
	job, err := w.Submit(ctx, Payout{Account: "acct-3", Amount: 700})
	if err != nil {
		return uuid.Nil, err
	}
	wctx, kill := context.WithCancel(ctx)
	defer kill()
	started := make(chan jobstate.Lease, 1)
	last := make(chan error, 1) // A's last word, read only for the printout
	go func() {
		a := w.Worker("A")
		c, err := a.Lease(wctx)
		if err == nil {
			err = a.Start(wctx, c.Lease)
		}
		if err != nil {
			close(started)
			last <- err
			return
		}
		started <- c.Lease
		<-wctx.Done() // the prepare phase never ends: the process is killed here
		r, _ := Prepare(c.Job)
		last <- errors.Join(errKilled, a.Commit(wctx, c.Lease, r))
	}()
	lease, ok := <-started
	if !ok {
		return job.ID, <-last
	}
	if err := w.step(ctx, out, job.ID, "worker A (a goroutine) leases %s, starts, prepares", ShortID(lease.ExecID)); err != nil {
		return job.ID, err
	}
	kill()
	if err := w.step(ctx, out, job.ID, "A is killed: context cancelled, goroutine abandoned"); err != nil {
		return job.ID, err
	}
	w.Clock.Advance(LeaseTTL)
	rep, err := w.Engine.Sweep(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "the lease expires; sweep aborts A's execution (aborted %d)", rep.Aborted); err != nil {
		return job.ID, err
	}
	b := w.Worker("B")
	if _, err := b.Run(ctx); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "B leases, starts, prepares, commits, finishes"); err != nil {
		return job.ID, err
	}
	fmt.Fprintf(out, "  A's last attempt, with its dead context, was refused: %v\n", strings.ReplaceAll((<-last).Error(), "\n", ": "))
	fmt.Fprintf(out, "  the ledger holds %d credit for the job\n", w.Ledger.Applied(job.ID))
	return job.ID, nil
}

// crashAfterCommit commits and then loses the worker before Finish. The
// sweep finds the COMMITTED execution under an expired lease and finalizes
// it to DONE, the job to SUCCEEDED, without running the effect again; the
// worker's late Finish is refused.
func crashAfterCommit(ctx context.Context, w *World, out io.Writer) (uuid.UUID, error) {
	job, err := w.Submit(ctx, Payout{Account: "acct-9", Amount: 4200})
	if err != nil {
		return uuid.Nil, err
	}
	a := w.Worker("A")
	c, err := a.Lease(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := a.Start(ctx, c.Lease); err != nil {
		return job.ID, err
	}
	r, err := Prepare(c.Job)
	if err != nil {
		return job.ID, err
	}
	w.Clock.Advance(2 * time.Second)
	if err := a.Commit(ctx, c.Lease, r); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A leases %s, starts, prepares, commits", ShortID(c.Lease.ExecID)); err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "A crashes before finishing"); err != nil {
		return job.ID, err
	}
	w.Clock.Advance(LeaseTTL)
	rep, err := w.Engine.Sweep(ctx)
	if err != nil {
		return job.ID, err
	}
	if err := w.step(ctx, out, job.ID, "sweep: COMMITTED under an expired lease (finalized %d)", rep.Finalized); err != nil {
		return job.ID, err
	}
	_, err = a.Finish(ctx, c.Lease)
	if err := w.refused(ctx, out, job.ID, "A comes back and finishes", err); err != nil {
		return job.ID, err
	}
	fmt.Fprintf(out, "  the ledger holds %d credit for the job\n", w.Ledger.Applied(job.ID))
	return job.ID, nil
}

// step prints one line: the clock, what happened, the job's state and its
// executions' statuses. It fails if the job's state is not the projection
// of its executions.
func (w *World) step(ctx context.Context, out io.Writer, id uuid.UUID, format string, args ...any) error {
	s, err := w.Snapshot(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s  %-62s job %-9s %s\n", w.Clock.Now().Format("15:04:05"), fmt.Sprintf(format, args...), s.Job.State, execSummary(s.Executions))
	return nil
}

// refused prints an operation the engine refused, with the typed error,
// and fails if it was not refused or the projection no longer holds.
func (w *World) refused(ctx context.Context, out io.Writer, id uuid.UUID, what string, err error) error {
	if err == nil {
		return fmt.Errorf("%s: not refused", what)
	}
	var ce *jobstate.CommitError
	var le *jobstate.LeaseError
	why := err.Error()
	switch {
	case errors.As(err, &ce):
		why = fmt.Sprintf("CommitError (%s): execution %s already committed", jobstate.Code(err), ShortID(ce.Winner))
	case errors.As(err, &le):
		why = fmt.Sprintf("LeaseError (%s): %s", jobstate.Code(err), le.Reason)
	}
	if err := w.step(ctx, out, id, "%s: refused", what); err != nil {
		return err
	}
	fmt.Fprintf(out, "            %s\n", why)
	return nil
}

// execSummary lists executions as "[#id owner STATUS]".
func execSummary(execs []jobstate.Execution) string {
	parts := make([]string, len(execs))
	for i, x := range execs {
		parts[i] = fmt.Sprintf("[%s %s %s]", ShortID(x.ID), x.Owner, x.Status)
	}
	return strings.Join(parts, " ")
}

// printRecords prints the job, every execution record and the history.
func (w *World) printRecords(ctx context.Context, out io.Writer, id uuid.UUID) error {
	s, err := w.Snapshot(ctx, id)
	if err != nil {
		return err
	}
	j := s.Job
	fmt.Fprintf(out, "  job %s: %s, attempt %d, version %d, committed by %s, result %s\n",
		ShortID(j.ID), j.State, j.Attempt, j.Version, ShortID(j.Committed), j.Result)
	fmt.Fprintln(out, "  executions:")
	for _, x := range s.Executions {
		fmt.Fprintf(out, "    %-3s attempt %d  owner %s  %-11s claimed %s  started %s  lease until %s  finished %s",
			ShortID(x.ID), x.Attempt, x.Owner, x.Status, clock(x.ClaimedAt), clock(x.StartedAt), clock(x.LeaseExpiresAt), clock(x.FinishedAt))
		if x.Error != "" {
			fmt.Fprintf(out, "  (%s)", x.Error)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "  history:")
	for _, t := range s.History {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(out, "    v%-2d %s  %-7s --%-7s--> %-9s by %s", t.Version, clock(t.At), from, t.Event, t.To, t.Actor)
		if t.ExecID != uuid.Nil {
			fmt.Fprintf(out, " (execution %s)", ShortID(t.ExecID))
		}
		if t.Reason != "" {
			fmt.Fprintf(out, ": %s", t.Reason)
		}
		fmt.Fprintln(out)
	}
	for _, e := range w.Ledger.Entries() {
		if e.JobID == id {
			fmt.Fprintf(out, "  ledger: %d to %s (%s) by %s's execution %s at %s\n", e.Amount, e.Account, e.Reference, e.Worker, ShortID(e.ExecID), clock(e.At))
		}
	}
	return nil
}

// clock formats a time of day, or "-" for the zero time.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05")
}
