package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

func TestMigrateUpAndStatus(t *testing.T) {
	t.Parallel()
	cluster, pool := pgtest.Shared(t)
	schema := fmt.Sprintf("jobstate_cmd_migrate_%d", os.Getpid())
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Error(err)
		}
	})
	flags := []string{"--database-url", cluster.URL, "--schema", schema}

	st := runArgs(t, append([]string{"migrate", "status"}, flags...)...)
	st.wantCode(t, exitRefused)
	if want := fmt.Sprintf("is at version 0 of %d: %d migration(s) pending", pgstore.SchemaVersion, pgstore.SchemaVersion); !strings.Contains(st.stdout, want) {
		t.Errorf("status before migrating:\n%s", st.stdout)
	}
	list := runArgs(t, append([]string{"list"}, flags...)...)
	list.wantCode(t, exitRefused)
	if !strings.Contains(list.stderr, "holds no jobstate store: run `jobstate migrate up`") {
		t.Errorf("list on an empty schema: %s", list.stderr)
	}

	up := runArgs(t, append([]string{"migrate", "up"}, flags...)...)
	up.wantCode(t, exitOK)
	if want := fmt.Sprintf("migrated to version %d", pgstore.SchemaVersion); !strings.Contains(up.stdout, want) {
		t.Errorf("migrate up:\n%s", up.stdout)
	}
	again := runArgs(t, append([]string{"migrate", "up"}, flags...)...)
	again.wantCode(t, exitOK)
	if !strings.Contains(again.stdout, "nothing to do") {
		t.Errorf("second migrate up:\n%s", again.stdout)
	}

	st = runArgs(t, append([]string{"migrate", "status"}, flags...)...)
	st.wantCode(t, exitOK)
	if want := fmt.Sprintf("is at version %d: current", pgstore.SchemaVersion); !strings.Contains(st.stdout, want) {
		t.Errorf("status after migrating:\n%s", st.stdout)
	}
	if got := strings.Count(st.stdout, "applied "); got != pgstore.SchemaVersion {
		t.Errorf("status lists %d applied versions, want %d:\n%s", got, pgstore.SchemaVersion, st.stdout)
	}
	list = runArgs(t, append([]string{"list"}, flags...)...)
	list.wantCode(t, exitOK)
}

func TestListPagesThroughEveryJob(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	jobs := d.create(t, "queue", 25)
	other := d.create(t, "payout", 3)
	failed := d.fail(t, jobs[0], true)

	// Table: a page, then the cursor to the next one.
	o := d.run(t, "list", "--machine", "queue", "--limit", "10")
	o.wantCode(t, exitOK)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 12 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[11], "more: --cursor ") {
		t.Fatalf("first page:\n%s", o.stdout)
	}
	if !strings.Contains(lines[1], jobs[0].ID.String()) || !strings.Contains(lines[1], "FAILED") {
		t.Errorf("first row is not the first job, failed: %s", lines[1])
	}

	// JSON, page after page with the cursor: every job once, in order.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		args := []string{"list", "--machine", "queue", "--limit", "10", "--json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		o := d.run(t, args...)
		o.wantCode(t, exitOK)
		var page struct {
			Jobs []jobstate.Job `json:"jobs"`
			Next string         `json:"next"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &page); err != nil {
			t.Fatalf("%v:\n%s", err, o.stdout)
		}
		for _, j := range page.Jobs {
			seen = append(seen, j.ID.String())
		}
		if cursor = page.Next; cursor == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
	}
	var want []string
	for _, j := range jobs {
		want = append(want, j.ID.String())
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("paged ids differ from the created jobs:\n got %v\nwant %v", seen, want)
	}

	// A time given as a duration ago moves with the clock: the next page
	// is asked for with the time it was resolved to.
	o = d.run(t, "list", "--machine", "queue", "--limit", "20", "--created-from", "1h")
	o.wantCode(t, exitOK)
	more := strings.Fields(strings.TrimPrefix(lastLine(o.stdout), "more: "))
	if len(more) != 4 || more[0] != "--cursor" || more[2] != "--created-from" {
		t.Fatalf("more line %q", lastLine(o.stdout))
	}
	o = d.run(t, append([]string{"list", "--machine", "queue", "--limit", "20"}, more...)...)
	o.wantCode(t, exitOK)
	if got := strings.Count(o.stdout, "\n"); got != 1+5 {
		t.Errorf("second page has %d lines, want a header and 5 jobs:\n%s", got, o.stdout)
	}
	o = d.run(t, "list", "--machine", "queue", "--limit", "20", "--created-from", "1h", "--cursor", more[1])
	o.wantCode(t, exitUsage)

	// Filters: state, outcome; --all walks every page.
	o = d.run(t, "list", "--state", "FAILED", "--json")
	o.wantCode(t, exitOK)
	if !strings.Contains(o.stdout, failed.ID.String()) || strings.Count(o.stdout, `"id"`) != 1 {
		t.Errorf("--state FAILED:\n%s", o.stdout)
	}
	o = d.run(t, "list", "--all", "--limit", "7", "--desc")
	o.wantCode(t, exitOK)
	if got := strings.Count(o.stdout, "\n"); got != 1+len(jobs)+len(other) || strings.Contains(o.stdout, "more:") {
		t.Errorf("--all printed %d lines:\n%s", got, o.stdout)
	}
	if first := strings.Split(o.stdout, "\n")[1]; !strings.Contains(first, other[2].ID.String()) {
		t.Errorf("--desc does not start with the newest job: %s", first)
	}
}

func TestGetShowsHistoryExecutionsEffects(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	job := d.create(t, "queue", 1)[0]
	failed := d.fail(t, job, true)
	redone := d.run(t, "redrive", job.ID.String(), "--yes", "--actor", "ops@example")
	redone.wantCode(t, exitOK)

	o := d.run(t, "get", job.ID.String())
	o.wantCode(t, exitOK)
	for _, want := range []string{
		"id:", job.ID.String(), "FAILED (terminal, failed)", "history (3):", "create", "claim", "fail",
		"executions (1):", "ABORTED", "w1", "effects (1):", "redrive", "ops@example", "broken input",
	} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, o.stdout)
		}
	}

	o = d.run(t, "get", "--json", job.ID.String())
	o.wantCode(t, exitOK)
	var got struct {
		Job        jobstate.Job     `json:"job"`
		History    []transitionJSON `json:"history"`
		Executions []executionJSON  `json:"executions"`
		Effects    []effectJSON     `json:"effects"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, o.stdout)
	}
	if got.Job.ID != job.ID || got.Job.Version != failed.Version+1 || got.Job.State != "FAILED" {
		t.Errorf("job %+v", got.Job)
	}
	if len(got.History) != 3 || got.History[2].Event != "fail" || got.History[0].From != "" || got.History[0].Event != "create" {
		t.Errorf("history %+v", got.History)
	}
	if len(got.Executions) != 1 || got.Executions[0].Status != "ABORTED" || got.Executions[0].Owner != "w1" {
		t.Errorf("executions %+v", got.Executions)
	}
	if len(got.Effects) != 1 || got.Effects[0].Name != jobstate.RedriveEffect || got.Effects[0].Actor != "ops@example" {
		t.Errorf("effects %+v", got.Effects)
	}

	missing := d.run(t, "get", "0190f5e4-8c3b-7a6e-9d1f-2b4c6d8e0f12")
	missing.wantCode(t, exitRefused)
	if !strings.Contains(missing.stderr, "not found") {
		t.Errorf("stderr %s", missing.stderr)
	}
}

func TestCountsPerMachineAndState(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	jobs := d.create(t, "queue", 6)
	d.create(t, "payout", 2)
	d.fail(t, jobs[0], true)
	d.fail(t, jobs[1], false)

	o := d.run(t, "counts", "--json")
	o.wantCode(t, exitOK)
	var got map[string]map[string]int
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, o.stdout)
	}
	want := map[string]map[string]int{
		"queue":  {"QUEUED": 4, "RUNNING": 0, "RETRYING": 1, "SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 0},
		"payout": {"PENDING": 2, "PAYING": 0, "PAID": 0, "FAILED": 0, "CANCELLED": 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}

	o = d.run(t, "counts", "--machine", "queue")
	o.wantCode(t, exitOK)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "MACHINE") || !strings.Contains(lines[1], "QUEUED") || !strings.HasSuffix(lines[1], "4") {
		t.Errorf("counts table:\n%s", o.stdout)
	}
	d.run(t, "counts", "--machine", "nope").wantCode(t, exitUsage)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
