package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

func TestCancelOneJob(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	job := d.create(t, "queue", 1)[0]
	ctx := context.Background()

	dry := d.run(t, "cancel", job.ID.String())
	dry.wantCode(t, exitOK)
	if !strings.Contains(dry.stdout, "would cancel  "+job.ID.String()+"  queue  QUEUED") || !strings.Contains(dry.stdout, "--yes") {
		t.Errorf("dry run:\n%s", dry.stdout)
	}
	if got, _ := d.eng.Get(ctx, job.ID); got.Version != job.Version {
		t.Fatalf("the dry run moved the job to version %d", got.Version)
	}

	// The default actor is $USER@host.
	o := d.run(t, "cancel", job.ID.String(), "--yes", "--reason", "customer asked")
	o.wantCode(t, exitOK)
	if !strings.Contains(o.stdout, "cancelled  "+job.ID.String()+"  queue  QUEUED -> CANCELLED") {
		t.Errorf("stdout:\n%s", o.stdout)
	}
	hist, err := d.eng.History(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.Event != jobstate.EventCancel || last.To != "CANCELLED" || last.Actor != "tester@testhost" || last.Reason != "customer asked" {
		t.Errorf("history records %+v", last)
	}

	again := d.run(t, "cancel", job.ID.String(), "--yes")
	again.wantCode(t, exitRefused)
	if !strings.Contains(again.stderr, "cannot be cancelled: it is finished (state CANCELLED)") {
		t.Errorf("stderr %s", again.stderr)
	}
	d.run(t, "cancel", "0190f5e4-8c3b-7a6e-9d1f-2b4c6d8e0f12", "--yes").wantCode(t, exitRefused)
}

func TestCancelOfAJobThatChangedIsRefused(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	job := d.create(t, "queue", 1)[0]
	a, stdout, stderr := testApp(nil)
	a.beforeAct = func(ctx context.Context, j jobstate.Job) {
		if _, err := d.eng.ClaimJob(ctx, j.ID, jobstate.ClaimRequest{Worker: "w1"}); err != nil {
			t.Error(err)
		}
	}
	o := runOn(t, a, stdout, stderr, append([]string{"cancel", job.ID.String(), "--yes"}, d.flags...)...)
	o.wantCode(t, exitRefused)
	if !strings.Contains(o.stderr, "was not cancelled: it changed since it was listed") {
		t.Errorf("stderr %s", o.stderr)
	}
	if got, _ := d.eng.Get(context.Background(), job.ID); got.State != "RUNNING" {
		t.Errorf("job is %s, want RUNNING (claimed, not cancelled)", got.State)
	}
}

func TestMovesThatNeedTheServicesCodeAreRefused(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	jobs := d.create(t, "payout", 2)
	ctx := context.Background()

	o := d.run(t, "cancel", jobs[0].ID.String(), "--yes")
	o.wantCode(t, exitRefused)
	if !strings.Contains(o.stderr, `runs the service's code (guard "owner_only")`) {
		t.Errorf("stderr %s", o.stderr)
	}
	d.fail(t, jobs[1], true)
	o = d.run(t, "redrive", jobs[1].ID.String(), "--yes")
	o.wantCode(t, exitRefused)
	if !strings.Contains(o.stderr, `runs the service's code (guard "within_quota")`) {
		t.Errorf("stderr %s", o.stderr)
	}
	for _, j := range jobs {
		if hist, _ := d.eng.History(ctx, j.ID); hist[len(hist)-1].Event == jobstate.EventCancel {
			t.Errorf("job %s was cancelled", j.ID)
		}
	}
	// In bulk, they are skipped with the reason, and the run does not fail.
	o = d.run(t, "cancel", "--machine", "payout", "--yes")
	o.wantCode(t, exitOK)
	if !strings.Contains(o.stdout, "cancel: 0 cancelled, 2 skipped, 0 failed, of 2 selected") {
		t.Errorf("stdout:\n%s", o.stdout)
	}
}

// The placeholder of the service's code refuses whatever the checks
// before the move let through: a guard refuses, an effect fails, and
// nothing is written.
func TestPlaceholdersRefuseToRunCode(t *testing.T) {
	reg := placeholders(codeNames{guards: []string{"g"}, effects: []string{"e"}, classifiers: []string{"c"}})
	if err := reg.Guards["g"](context.Background(), jobstate.GuardInput{}); err == nil || !strings.Contains(err.Error(), `guard "g"`) {
		t.Errorf("guard: %v", err)
	}
	if err := reg.Effects["e"](context.Background(), jobstate.Job{}); err == nil || !strings.Contains(err.Error(), `effect "e"`) {
		t.Errorf("effect: %v", err)
	}
	if v, why := judge(reg.Effects["e"](context.Background(), jobstate.Job{})); v != skipped || !strings.Contains(why, "service") {
		t.Errorf("judged %v %q", v, why)
	}
}

func TestRetryAndRedrive(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ctx := context.Background()
	jobs := d.create(t, "queue", 6)
	var failedJobs []jobstate.Job
	for _, j := range jobs[:3] {
		failedJobs = append(failedJobs, d.fail(t, j, true))
	}
	waiting := d.fail(t, jobs[3], false)
	if _, err := d.eng.Cancel(ctx, jobs[4].ID, jobstate.Call{Actor: "someone"}); err != nil {
		t.Fatal(err)
	}
	// jobs[5] stays QUEUED.

	o := d.run(t, "retry", waiting.ID.String(), "--yes")
	o.wantCode(t, exitRefused)
	if !strings.Contains(o.stderr, "waiting to retry (state RETRYING) until") || !strings.Contains(o.stderr, "no operation to make it due sooner") {
		t.Errorf("stderr %s", o.stderr)
	}

	dry := d.run(t, "retry", "--machine", "queue")
	dry.wantCode(t, exitOK)
	if !strings.Contains(dry.stdout, "dry run: would retry 3 job(s), would skip 3, of 6 selected") {
		t.Errorf("dry run:\n%s", dry.stdout)
	}
	if !strings.Contains(dry.stdout, "would skip  "+jobs[4].ID.String()+"  queue  CANCELLED: its outcome cancelled is not a failure") {
		t.Errorf("dry run does not say why the cancelled job is skipped:\n%s", dry.stdout)
	}

	o = d.run(t, "retry", "--machine", "queue", "--yes", "--verbose", "--actor", "ops@example", "--reason", "bug fixed")
	o.wantCode(t, exitOK)
	if !strings.Contains(o.stdout, "retry: 3 retried, 3 skipped, 0 failed, of 6 selected") {
		t.Errorf("stdout:\n%s", o.stdout)
	}
	for _, j := range failedJobs {
		effs, err := d.eng.Effects(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(effs) != 1 || effs[0].Name != jobstate.RedriveEffect || effs[0].Actor != "ops@example" {
			t.Errorf("job %s effects %+v", j.ID, effs)
		}
		if !strings.Contains(o.stdout, "retried  "+j.ID.String()+"  queue  as new job ") {
			t.Errorf("--verbose does not name the new job of %s:\n%s", j.ID, o.stdout)
		}
	}
	// The new jobs were created after the command started: not selected.
	page, err := d.eng.List(ctx, jobstate.ListQuery{Machine: "queue", States: []jobstate.State{"QUEUED"}, Limit: 100}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 4 {
		t.Fatalf("%d queued jobs, want the 3 new ones and jobs[5]", len(page.Jobs))
	}
	for _, nj := range page.Jobs {
		if nj.ID == jobs[5].ID {
			continue
		}
		hist, err := d.eng.History(ctx, nj.ID)
		if err != nil {
			t.Fatal(err)
		}
		if hist[0].Actor != "ops@example" || !strings.Contains(hist[0].Reason, "redrive of job") || !strings.Contains(hist[0].Reason, "bug fixed") {
			t.Errorf("new job's creation record %+v", hist[0])
		}
	}

	// A job is redriven once; redrive also takes the cancelled job.
	o = d.run(t, "redrive", "--state", "FAILED,CANCELLED", "--yes")
	o.wantCode(t, exitOK)
	if !strings.Contains(o.stdout, "redrive: 1 redriven, 3 skipped, 0 failed, of 4 selected") || strings.Count(o.stdout, "it was redriven already") != 3 {
		t.Errorf("stdout:\n%s", o.stdout)
	}
}

func TestBulkCancelOfTenThousandJobs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("10,000 jobs")
	}
	d := newDB(t)
	ctx := context.Background()
	const n = 10000
	start := time.Now()
	jobs := d.create(t, "queue", n)
	t.Logf("created %d jobs in %s", n, time.Since(start))
	others := d.create(t, "payout", 5)

	dry := d.run(t, "cancel", "--machine", "queue", "--state", "QUEUED")
	dry.wantCode(t, exitOK)
	if !strings.Contains(dry.stdout, "dry run: would cancel 10000 job(s), would skip 0, of 10000 selected") ||
		strings.Count(dry.stdout, "would cancel  ") != n {
		t.Fatalf("dry run:\n%s", tail(dry.stdout))
	}
	t.Logf("dry run at %s", time.Since(start))
	if c, _ := d.eng.Counts(ctx, "queue"); c["QUEUED"] != n {
		t.Fatalf("the dry run moved jobs: %v", c)
	}

	// Three jobs are claimed by a worker between the listing and the
	// move: they are skipped, not cancelled.
	changed := map[string]bool{jobs[10].ID.String(): true, jobs[5000].ID.String(): true, jobs[n-1].ID.String(): true}
	a, stdout, stderr := testApp(nil)
	a.terminal = true
	a.beforeAct = func(ctx context.Context, j jobstate.Job) {
		if changed[j.ID.String()] {
			if _, err := d.eng.ClaimJob(ctx, j.ID, jobstate.ClaimRequest{Worker: "w1"}); err != nil {
				t.Error(err)
			}
		}
	}
	o := runOn(t, a, stdout, stderr, append([]string{"cancel", "--machine", "queue", "--state", "QUEUED", "--yes",
		"--actor", "ops@example", "--reason", "bad deploy", "--page", "1000", "--parallel", "8"}, d.flags...)...)
	o.wantCode(t, exitOK)
	t.Logf("cancelled at %s", time.Since(start))
	if !strings.Contains(o.stdout, "cancel: 9997 cancelled, 3 skipped, 0 failed, of 10000 selected") {
		t.Fatalf("stdout:\n%s", tail(o.stdout))
	}
	for id := range changed {
		if !strings.Contains(o.stdout, "skipped  "+id+"  queue  QUEUED: it changed since it was listed") {
			t.Errorf("no skip line for %s", id)
		}
	}
	// Progress: a line rewritten after each page on the terminal.
	if got := strings.Count(o.stderr, "\rcancel: "); got != n/1000 {
		t.Errorf("%d progress updates, want %d: %q", got, n/1000, tail(o.stderr))
	}
	if !strings.HasSuffix(o.stderr, "\rcancel: 10000 selected, 9997 cancelled, 3 skipped, 0 failed\n") {
		t.Errorf("last progress: %q", tail(o.stderr))
	}

	c, err := d.eng.Counts(ctx, "queue")
	if err != nil {
		t.Fatal(err)
	}
	if c["CANCELLED"] != n-3 || c["RUNNING"] != 3 || c["QUEUED"] != 0 {
		t.Errorf("counts %v", c)
	}
	for i, hist := range d.histories(t, jobs) {
		last := hist[len(hist)-1]
		if changed[jobs[i].ID.String()] {
			if last.Event != jobstate.EventClaim {
				t.Errorf("changed job %s: last record %+v", jobs[i].ID, last)
			}
			continue
		}
		if last.Event != jobstate.EventCancel || last.Actor != "ops@example" || last.Reason != "bad deploy" || last.To != "CANCELLED" {
			t.Fatalf("job %s: last record %+v", jobs[i].ID, last)
		}
	}
	t.Logf("histories checked at %s", time.Since(start))
	for _, j := range others {
		if got, _ := d.eng.Get(ctx, j.ID); got.State != "PENDING" {
			t.Errorf("a job of another machine moved: %+v", got)
		}
	}

	// Without a terminal, no progress is shown.
	quiet := d.run(t, "cancel", "--machine", "queue", "--state", "RUNNING", "--yes")
	quiet.wantCode(t, exitOK)
	if quiet.stderr != "" || !strings.Contains(quiet.stdout, "3 cancelled") {
		t.Errorf("stdout %q stderr %q", quiet.stdout, quiet.stderr)
	}
}

// tail returns the end of a long output, for failure messages.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

func TestInterruptStopsABulkActionWithItsCounts(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.create(t, "queue", 40)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int64
	a, stdout, stderr := testApp(nil)
	a.beforeAct = func(context.Context, jobstate.Job) {
		if seen.Add(1) == 5 {
			cancel()
		}
	}
	code := a.run(ctx, append([]string{"cancel", "--machine", "queue", "--yes", "--page", "10", "--parallel", "2"}, d.flags...))
	o := outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
	o.wantCode(t, exitInterrupted)
	if !strings.Contains(o.stderr, "interrupted") {
		t.Errorf("stderr %q", o.stderr)
	}
	var acted, skippedN, failedN, selected int
	if _, err := fmt.Sscanf(lastLine(o.stdout), "cancel: %d cancelled, %d skipped, %d failed, of %d selected", &acted, &skippedN, &failedN, &selected); err != nil {
		t.Fatalf("summary %q: %v", lastLine(o.stdout), err)
	}
	c, err := d.eng.Counts(context.Background(), "queue")
	if err != nil {
		t.Fatal(err)
	}
	if acted < 4 || selected >= 40 || c["CANCELLED"] != acted || c["QUEUED"] != 40-acted || skippedN+failedN != 0 {
		t.Errorf("summary %q, counts %v", lastLine(o.stdout), c)
	}
	// Run again: the rest is cancelled.
	d.run(t, "cancel", "--machine", "queue", "--state", "QUEUED", "--yes").wantCode(t, exitOK)
	if c, _ := d.eng.Counts(context.Background(), "queue"); c["CANCELLED"] != 40 {
		t.Errorf("counts after the second run %v", c)
	}
}

func TestTerminalIsACharacterDevice(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, out := range []io.Writer{w, f, &strings.Builder{}} {
		if isTerminal(out) {
			t.Errorf("%T is taken for a terminal", out)
		}
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !isTerminal(tty) {
			t.Error("/dev/tty is not taken for a terminal")
		}
	}
}
