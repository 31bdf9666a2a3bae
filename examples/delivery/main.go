// Command delivery runs the file delivery bot, its workers on the worker
// runtime, on the in-memory store or on PostgreSQL: a Telegram bot that
// downloads a file from Yandex Disk and streams it to the user through a
// local Bot API server. It shows a delivery (with its callback repeated),
// a delivery retried after a 5xx and a 429, two permanent failures (a
// file too big, a blocked user), a cancel, a TTL expiry, the "stuck" view
// of /status, and the recovery sweep a worker runs at start after another
// worker crashed holding three jobs.
//
//	go run ./examples/delivery
//	go run ./examples/delivery -store postgres [-database-url URL]
//	go run ./examples/delivery -store sqlite [-db PATH]
//
// With -store postgres and no -database-url (nor JOBSTATE_DATABASE_URL)
// it starts a throwaway PostgreSQL cluster for the run.
// With -store sqlite it runs on SQLite files in a temporary directory,
// or at PATH (which must not exist yet) and beside it.
//
// Time is a manual clock: transfers, heartbeats, backoffs and the TTL pass
// without waiting.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/examples/internal/exstore"
)

// main runs the demonstration and prints it to standard output.
func main() {
	exstore.Main("delivery", nil, func(ctx context.Context, b *exstore.Backend) error {
		return run(ctx, os.Stdout, b)
	})
}

// run sets up users and files, then runs each section in turn on one World.
func run(ctx context.Context, out io.Writer, b *exstore.Backend) error {
	store, err := b.NewStore(ctx)
	if err != nil {
		return err
	}
	w, err := NewWorldOn(store)
	if err != nil {
		return err
	}
	for _, u := range []string{"alice", "bob", "carol", "erin", "frank"} {
		w.Users.Set(u, UserActive)
	}
	w.Users.Set("dave", UserBlocked)
	for id, f := range map[string]File{
		"report.pdf": {Name: "report.pdf", Size: 2 << 20, Transfer: 5 * time.Second},
		"video.mp4":  {Name: "video.mp4", Size: 700 << 20, Transfer: 25 * time.Second},
		"movie.mkv":  {Name: "movie.mkv", Size: 3 << 30, Transfer: time.Minute},
		"notes.txt":  {Name: "notes.txt", Size: 4 << 10, Transfer: time.Second},
		"photo.jpg":  {Name: "photo.jpg", Size: 3 << 20, Transfer: 5 * time.Second},
		"song.mp3":   {Name: "song.mp3", Size: 9 << 20, Transfer: 15 * time.Second},
		"slides.pdf": {Name: "slides.pdf", Size: 12 << 20, Transfer: 5 * time.Second},
	} {
		w.Disk.Put(id, f)
	}
	sections := []struct {
		title string
		fn    func(context.Context, *World, io.Writer) error
	}{
		{"A delivery", aDelivery},
		{"A retried delivery: 503, then 429 with Retry-After, then delivered", aRetry},
		{"Permanent failures: a file over 2 GB, a blocked user", permanentFailures},
		{"A user cancel", aCancel},
		{"A TTL expiry", anExpiry},
		{"A crashed worker: the stuck view and the recovery at worker start", stuckAndRecovery},
	}
	for i, s := range sections {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "== %d. %s ==\n", i+1, s.title)
		if err := s.fn(ctx, w, out); err != nil {
			return fmt.Errorf("%s: %w", s.title, err)
		}
	}
	fmt.Fprintln(out, "\nThe job lifecycle, as a Mermaid state diagram:")
	fmt.Fprint(out, w.Def.Mermaid())
	return nil
}

// aDelivery: alice clicks "Download"; Telegram delivers the callback twice;
// one job is queued, and worker-1 delivers it.
func aDelivery(ctx context.Context, w *World, out io.Writer) error {
	c, err := w.Download(ctx, "alice", "report.pdf", "n-1")
	if err != nil {
		return err
	}
	again, err := w.Download(ctx, "alice", "report.pdf", "n-1")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  callback (nonce n-1): job %s queued; the same callback again: job %s (existing: %t)\n",
		ShortID(c.Job.ID), ShortID(again.Job.ID), again.Existing)
	if _, err := drain(ctx, w.Worker("worker-1")); err != nil {
		return err
	}
	return w.show(ctx, out, c.Job.ID)
}

// aRetry: bob's video fails once on Yandex Disk (503) and once on Telegram
// (429, Retry-After 20 s), then is delivered on its third attempt.
func aRetry(ctx context.Context, w *World, out io.Writer) error {
	w.Disk.Fail("video.mp4", &HTTPError{Service: "yandex disk", Status: http.StatusServiceUnavailable})
	w.Telegram.Fail("video.mp4", &HTTPError{Service: "telegram", Status: http.StatusTooManyRequests, RetryAfter: "20"})
	c, err := w.Download(ctx, "bob", "video.mp4", "n-2")
	if err != nil {
		return err
	}
	if _, err := drain(ctx, w.Worker("worker-1")); err != nil {
		return err
	}
	return w.show(ctx, out, c.Job.ID)
}

// permanentFailures: carol's file is over 2 GB; dave is blocked, so the
// start_download guard refuses. Neither is retried.
func permanentFailures(ctx context.Context, w *World, out io.Writer) error {
	big, err := w.Download(ctx, "carol", "movie.mkv", "n-3")
	if err != nil {
		return err
	}
	blocked, err := w.Download(ctx, "dave", "report.pdf", "n-4")
	if err != nil {
		return err
	}
	if _, err := drain(ctx, w.Worker("worker-1")); err != nil {
		return err
	}
	if err := w.show(ctx, out, big.Job.ID); err != nil {
		return err
	}
	return w.show(ctx, out, blocked.Job.ID)
}

// aCancel: alice cancels a queued job; cancelling it again, or cancelling
// a delivered job, is refused.
func aCancel(ctx context.Context, w *World, out io.Writer) error {
	c, err := w.Download(ctx, "alice", "notes.txt", "n-5")
	if err != nil {
		return err
	}
	if _, err := w.Cancel(ctx, "alice", c.Job.ID); err != nil {
		return err
	}
	if err := w.show(ctx, out, c.Job.ID); err != nil {
		return err
	}
	_, err = w.Cancel(ctx, "alice", c.Job.ID)
	fmt.Fprintf(out, "  cancel again: %s\n", refusal(err))
	first, err := w.Download(ctx, "alice", "report.pdf", "n-1") // the delivered job of section 1
	if err != nil {
		return err
	}
	_, err = w.Cancel(ctx, "alice", first.Job.ID)
	fmt.Fprintf(out, "  cancel the delivered job %s: %s\n", ShortID(first.Job.ID), refusal(err))
	return nil
}

// anExpiry: erin's job waits in QUEUED with no worker running; after its
// TTL the sweep expires it.
func anExpiry(ctx context.Context, w *World, out io.Writer) error {
	c, err := w.Download(ctx, "erin", "report.pdf", "n-6")
	if err != nil {
		return err
	}
	w.Clock.Advance(QueueTTL)
	rep, err := w.Engine.Sweep(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  no worker for %s; sweep: expired %d\n", QueueTTL, rep.Expired)
	return w.show(ctx, out, c.Job.ID)
}

// stuckAndRecovery: worker-1 crashes holding three jobs: one CLAIMED, one
// DOWNLOADING, and one STREAMING at attempt 2. /status lists them as stuck
// once their heartbeat is older than T. worker-2 starts with the recovery
// sweep: all three have attempt < 3, so all three go back to QUEUED with
// attempt+1. worker-2 then delivers the first two; the third, now at
// attempt 3, is claimed and refused at start_download, so it fails.
func stuckAndRecovery(ctx context.Context, w *World, out io.Writer) error {
	var ids []uuid.UUID
	for _, r := range []struct{ user, file, nonce string }{
		{"frank", "photo.jpg", "n-7"},
		{"frank", "song.mp3", "n-8"},
		{"alice", "slides.pdf", "n-9"},
	} {
		c, err := w.Download(ctx, r.user, r.file, r.nonce)
		if err != nil {
			return err
		}
		ids = append(ids, c.Job.ID)
	}
	photo, song, slides := ids[0], ids[1], ids[2]

	// This section is scripted step by step, with the engine's calls made
	// by hand rather than through the worker runtime, so as to leave
	// worker-1's three jobs in the states a crash would (the runtime would
	// finish or give them back). worker-2's recovery and delivery then run
	// through the runtime (drain).
	//
	// slides.pdf has already failed twice (transient 502s) before the crash.
	for i := 0; i < 2; i++ {
		w.Disk.Fail("slides.pdf", &HTTPError{Service: "yandex disk", Status: http.StatusBadGateway})
		if _, err := wait(ctx, w, slides); err != nil {
			return err
		}
		c, err := w.Engine.ClaimJob(ctx, slides, jobstate.ClaimRequest{Worker: "worker-1"})
		if err != nil {
			return err
		}
		if _, err := w.Worker("worker-1").Process(ctx, c); err != nil {
			return err
		}
	}
	if _, err := wait(ctx, w, slides); err != nil {
		return err
	}

	// worker-1 takes the three jobs, gets them to CLAIMED, DOWNLOADING and
	// STREAMING, heartbeats once, and dies.
	w1 := w.Worker("worker-1")
	var leases []jobstate.Lease
	for _, id := range ids {
		c, err := w.Engine.ClaimJob(ctx, id, jobstate.ClaimRequest{Worker: w1.Name})
		if err != nil {
			return err
		}
		leases = append(leases, c.Lease)
	}
	active := DownloadArgs{User: UserActive}
	for _, l := range leases[1:] {
		if _, err := w.Engine.Advance(ctx, l, StartDownload, jobstate.Call{Args: active}); err != nil {
			return err
		}
	}
	if _, err := w.Engine.Advance(ctx, leases[2], StreamToLocalAPI, jobstate.Call{}); err != nil {
		return err
	}
	w.Clock.Advance(HeartbeatEvery)
	for _, l := range leases {
		if _, err := w.Engine.Heartbeat(ctx, l); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "  %s  worker-1 holds %s (CLAIMED), %s (DOWNLOADING), %s (STREAMING, attempt 2), heartbeats, and crashes\n",
		clock(w.Clock.Now()), ShortID(photo), ShortID(song), ShortID(slides))

	for _, d := range []time.Duration{HeartbeatTimeout - time.Second, time.Second, time.Second} {
		w.Clock.Advance(d)
		stuck, err := w.Stuck(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s  /status: %d stuck (heartbeat older than %s)\n", clock(w.Clock.Now()), len(stuck), HeartbeatTimeout)
		for _, j := range stuck {
			fmt.Fprintf(out, "             %s %-11s heartbeat_at %s (%s ago), attempt %d, held by %d lease(s)\n",
				ShortID(j.ID), j.State, clock(j.HeartbeatAt), w.Clock.Now().Sub(j.HeartbeatAt), Attempt(j), j.Leases)
		}
	}

	w2 := w.Worker("worker-2")
	rep, err := w2.Recover(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s  worker-2 starts; recovery: %d lease(s) lost, %d back to QUEUED, %d FAILED\n",
		clock(w.Clock.Now()), rep.Aborted, rep.Retried, rep.Failed)
	for _, id := range ids {
		j, err := w.Engine.Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "             %s %-9s attempt %d\n", ShortID(id), j.State, Attempt(j))
	}
	if _, err := drain(ctx, w2); err != nil {
		return err
	}
	for _, id := range ids {
		if err := w.show(ctx, out, id); err != nil {
			return err
		}
	}
	_, err = w.Engine.Heartbeat(ctx, leases[1])
	fmt.Fprintf(out, "  worker-1 comes back and heartbeats for %s: %s", ShortID(song), refusal(err))
	if ce := (*jobstate.CommitError)(nil); errors.As(err, &ce) {
		fmt.Fprintf(out, ": execution %s delivered it", ShortID(ce.Winner))
	}
	fmt.Fprintln(out)
	return nil
}

// drain runs the worker, through the worker runtime, until every job is
// terminal, letting time pass (one second per idle poll) while jobs wait
// out a backoff. The runtime's Drain claims and runs the due jobs, and
// when none is due runs the sweep, the periodic housekeeping that expires
// QUEUED jobs past their TTL (which no claim takes) and takes back jobs
// whose lease lapsed. It returns how many jobs it processed.
func drain(ctx context.Context, wk *Worker) (int, error) {
	rt, err := wk.Runtime()
	if err != nil {
		return 0, err
	}
	n := 0
	for idle := 0; idle < 3600; idle++ {
		got, err := rt.Drain(ctx, 0)
		n += got
		if err != nil {
			return n, fmt.Errorf("drain: %w", err)
		}
		if got > 0 {
			idle = 0
		}
		counts, err := wk.Engine.Counts(ctx, MachineName)
		if err != nil {
			return n, err
		}
		if counts[Queued]+counts[Claimed]+counts[Downloading]+counts[Streaming] == 0 {
			return n, nil
		}
		wk.Sleep(time.Second)
	}
	return n, errors.New("jobs still waiting after an hour")
}

// wait lets time pass until the job is due (its backoff over).
func wait(ctx context.Context, w *World, id uuid.UUID) (jobstate.Job, error) {
	j, err := w.Engine.Get(ctx, id)
	if err != nil {
		return j, err
	}
	if d := j.NotBefore.Sub(w.Clock.Now()); d > 0 {
		w.Clock.Advance(d)
	}
	return j, nil
}

// show prints a job's summary and its history.
func (w *World) show(ctx context.Context, out io.Writer, id uuid.UUID) error {
	j, err := w.Engine.Get(ctx, id)
	if err != nil {
		return err
	}
	h, err := w.Engine.History(ctx, id)
	if err != nil {
		return err
	}
	var req Request
	_ = json.Unmarshal(j.Payload, &req)
	fmt.Fprintf(out, "  job %s: %s for %s: %s, attempt %d, %d execution(s)", ShortID(j.ID), req.FileID, req.UserID, j.State, Attempt(j), j.Attempt)
	if len(j.Result) > 0 {
		fmt.Fprintf(out, ", result %s", j.Result)
	}
	fmt.Fprintln(out)
	if j.LastError != "" {
		fmt.Fprintf(out, "    last_error (%s): %s\n", j.ErrorClass, j.LastError)
	}
	for _, t := range h {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(out, "    %s  %-11s --%-19s--> %-11s by %s", clock(t.At), from, t.Event, t.To, t.Actor)
		if t.Reason != "" {
			fmt.Fprintf(out, ": %s", t.Reason)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// refusal describes an error the engine returned, by its stable code.
func refusal(err error) string {
	if err == nil {
		return "allowed"
	}
	return fmt.Sprintf("refused (%s)", jobstate.Code(err))
}

// clock formats a time of day.
func clock(t time.Time) string { return t.Format("15:04:05") }
