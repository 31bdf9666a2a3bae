package ui

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	f := newFixture(t, 0, Options{})
	for _, p := range []string{"/", "/jobs", "/jobs/" + f.jobs.Queued.String(), "/jobs?machine=nope", "/nothing", "/static/style.css", "/counts.json"} {
		_, _, hd := f.get(p)
		csp := hd.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", p, csp)
		}
		if hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, hd)
		}
	}
}

func TestOverviewShowsCountsPerState(t *testing.T) {
	f := newFixture(t, 5, Options{})
	code, body, _ := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	// Created: QUEUED = queued, script, binary, big and 5 plain = 9;
	// RUNNING 1; SUCCEEDED 1; FAILED 2 (failed, img).
	mustContain(t, body, `<section class="machine" data-machine="queue">`,
		`<td class="num" data-state="QUEUED">9</td>`, `<td class="num" data-state="RUNNING">1</td>`,
		`<td class="num" data-state="FAILED">2</td>`, `<td class="num" data-state="CANCELLED">0</td>`,
		`<span class="total" data-total>13</span>`, `src="/static/overview.js"`,
		`data-counts-url="/counts.json"`, `href="/jobs?machine=queue&amp;state=FAILED"`)
	mustNotContain(t, body, "<script>", "http-equiv")

	code, body, hd := f.get("/counts.json")
	if code != http.StatusOK || hd.Get("Content-Type") != "application/json" {
		t.Fatalf("counts.json: %d %s", code, hd.Get("Content-Type"))
	}
	var got struct {
		Machines []struct {
			Machine string
			Total   int
			States  []struct {
				State string
				Count int
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Machines) != 1 || got.Machines[0].Machine != "queue" || got.Machines[0].Total != 13 {
		t.Fatalf("counts.json: %+v", got)
	}
	if s := got.Machines[0].States[0]; s.State != "QUEUED" || s.Count != 9 {
		t.Fatalf("counts.json first state: %+v", s)
	}
}

var jobLinkRE = regexp.MustCompile(`<a class="job" href="/jobs/([0-9a-f-]{36})">`)
var nextRE = regexp.MustCompile(`<a id="next" href="([^"]+)">`)

// pageThrough follows the list's Next links from path and returns the
// jobs' ids in order.
func pageThrough(t *testing.T, f *fixture, path string) ([]string, int) {
	t.Helper()
	var ids []string
	pages := 0
	for path != "" {
		code, body, _ := f.get(path)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, code, body)
		}
		pages++
		for _, m := range jobLinkRE.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		path = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		if pages > 100 {
			t.Fatal("paging does not end")
		}
	}
	return ids, pages
}

func TestJobsPagingVisitsEveryJobOnceInOrder(t *testing.T) {
	f := newFixture(t, 23, Options{PageSize: 5})
	ids, pages := pageThrough(t, f, "/jobs?order=created&dir=asc")
	if len(ids) != 31 || pages != 7 {
		t.Fatalf("%d jobs on %d pages, want 31 on 7", len(ids), pages)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("job %s listed twice", id)
		}
		seen[id] = true
	}
	if ids[0] != f.jobs.Queued.String() || ids[30] != f.jobs.Plain[22].String() {
		t.Fatalf("oldest first: got %s .. %s", ids[0], ids[30])
	}
	desc, _ := pageThrough(t, f, "/jobs")
	if len(desc) != 31 || desc[0] != f.jobs.Plain[22].String() || desc[30] != f.jobs.Queued.String() {
		t.Fatalf("default order is not newest first: %d jobs, first %s", len(desc), desc[0])
	}
	// Sorting by update time: the job failed last comes first.
	upd, _ := pageThrough(t, f, "/jobs?order=updated&dir=desc&state=FAILED")
	if len(upd) != 2 || upd[0] != f.jobs.Img.String() {
		t.Fatalf("by update time: %v", upd)
	}
}

func TestJobsFilters(t *testing.T) {
	f := newFixture(t, 6, Options{})
	cases := []struct {
		query string
		want  int
	}{
		{"owner=alice", 2},
		{"owner=owner-1", 2},
		{"state=FAILED", 2},
		{"state=FAILED&state=SUCCEEDED", 3},
		{"machine=queue&state=RUNNING", 1},
		{"key=order-1", 1},
		{"owner=nobody", 0},
		{"created_from=2000-01-01T00:00&created_to=2000-01-02T00:00", 0},
	}
	for _, c := range cases {
		ids, _ := pageThrough(t, f, "/jobs?"+c.query)
		if len(ids) != c.want {
			t.Errorf("%s: %d jobs, want %d", c.query, len(ids), c.want)
		}
	}
	// A time range that keeps the jobs created after the fourth one.
	fourth := f.env.Get(f.jobs.Failed).CreatedAt
	ids, _ := pageThrough(t, f, "/jobs?created_from="+fourth.Format("2006-01-02T15:04:05.000Z07:00"))
	if len(ids) != 6+5 {
		t.Errorf("created_from: %d jobs, want 11", len(ids))
	}
	_, body, _ := f.get("/jobs?owner=alice&state=QUEUED")
	mustContain(t, body, `<input name="owner" value="alice">`, `<option value="QUEUED" selected>QUEUED</option>`)
}

func TestJobsBadFiltersAre400WithOneLine(t *testing.T) {
	f := newFixture(t, 3, Options{PageSize: 1})
	_, first, _ := f.get("/jobs?owner=alice")
	m := nextRE.FindStringSubmatch(first)
	if m == nil {
		t.Fatal("no next page")
	}
	cursor := strings.TrimPrefix(m[1][strings.Index(m[1], "cursor="):], "cursor=")
	cases := map[string]string{
		"machine=nope":             "unknown machine",
		"state=GONE":               "no machine has a state",
		"machine=queue&state=GONE": `machine &#34;queue&#34; has no state`,
		"created_from=yesterday":   "is not a time",
		"created_from=2026-01-02T00:00&created_to=2026-01-01T00:00": "range ends",
		"cursor=garbage":                     "cursor",
		"owner=owner-1&cursor=" + cursor:     "cursor",
		"order=sideways":                     "unknown order",
		"dir=up":                             "unknown direction",
		"bogus=1":                            "unknown parameter",
		"owner=a&owner=b":                    "given 2 times",
		"owner=%ff":                          "not valid text",
		"owner=" + strings.Repeat("a", 2000): "longer than",
	}
	for q, want := range cases {
		code, body, _ := f.get("/jobs?" + q)
		if code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, code)
			continue
		}
		line := regexp.MustCompile(`<p class="error" id="error-message">([^<]*)</p>`).FindStringSubmatch(body)
		if line == nil || !strings.Contains(line[1], want) || strings.Contains(line[1], "\n") {
			t.Errorf("%s: error line %q, want one line with %q", q, line, want)
		}
	}
}

func TestJobPageShowsStateHistoryExecutionsEffectsAndDiagram(t *testing.T) {
	f := newFixture(t, 0, Options{})
	code, body, _ := f.get("/jobs/" + f.jobs.Succeeded.String())
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	mustContain(t, body,
		`<strong id="job-state" class="kind-terminal">SUCCEEDED</strong>`,
		`<tr><th>Owner</th><td>alice</td></tr>`, `<tr><th>Attempt</th><td>1</td></tr>`,
		`<span class="from">QUEUED</span> —<span class="event">claim</span>→ <span class="to">RUNNING</span>`,
		`<span class="event">succeed</span>`, `by <span class="actor">worker-1</span>`,
		`<td>worker-1</td><td>DONE</td>`, "Attempt (fencing token)",
		`{&#34;ok&#34;:true}`,
		`class="node kind-terminal walked current" data-state="SUCCEEDED"`,
		`class="node kind-ready walked" data-state="QUEUED"`,
		`class="node kind-terminal" data-state="FAILED"`,
		`<g class="edge taken"><path`, `>claim</text>`)
	if strings.Count(body, `<g class="edge taken">`) != 2 {
		t.Errorf("want the two moves taken marked, got %d", strings.Count(body, `<g class="edge taken">`))
	}
	// A running job shows its live execution's lease expiry.
	_, body, _ = f.get("/jobs/" + f.jobs.Running.String())
	mustContain(t, body, `<td>worker-1</td><td>LEASED</td>`, `class="node kind-active walked current" data-state="RUNNING"`)
	// A failed job, retried, lists the redrive effect.
	f2 := newFixture(t, 0, Options{Authorize: allowAll})
	rec := f2.post("/jobs/"+f2.jobs.Failed.String()+"/retry", formFor(f2.h, "retry", f2.jobs.Failed), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("redrive: %d %s", rec.Code, rec.Body)
	}
	_, body, _ = f2.get("/jobs/" + f2.jobs.Failed.String())
	mustContain(t, body, `<tr><td>redrive</td><td>operator-ann</td>`)
}

func TestUnknownJobAndPage404(t *testing.T) {
	f := newFixture(t, 0, Options{})
	for _, p := range []string{"/jobs/00000000-0000-0000-0000-000000000001", "/jobs/not-a-uuid", "/jobs/" + f.jobs.Queued.String() + "x", "/elsewhere", "/jobs/a/b/c"} {
		if code, body, _ := f.get(p); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404: %.200s", p, code, body)
		}
	}
}

func TestStoreUnavailableIs503(t *testing.T) {
	f := newFixture(t, 0, Options{})
	f.store.down.Store(true)
	for _, p := range []string{"/", "/jobs", "/jobs/" + f.jobs.Queued.String(), "/counts.json"} {
		if code, _, _ := f.get(p); code != http.StatusServiceUnavailable {
			t.Errorf("%s: %d, want 503", p, code)
		}
	}
}

func TestPrefixedLinks(t *testing.T) {
	f := newFixture(t, 3, Options{Prefix: "/ops/jobs", PageSize: 2})
	mux := http.NewServeMux()
	mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", f.h))
	f.h = nil
	get := func(p string) string {
		rec := newRecorder(mux, p)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", p, rec.Code)
		}
		return rec.Body.String()
	}
	body := get("/ops/jobs/")
	mustContain(t, body, `href="/ops/jobs/static/style.css"`, `data-counts-url="/ops/jobs/counts.json"`, `href="/ops/jobs/jobs?machine=queue"`)
	body = get("/ops/jobs/jobs")
	mustContain(t, body, `action="/ops/jobs/jobs"`, `<a class="job" href="/ops/jobs/jobs/`, `<a id="next" href="/ops/jobs/jobs?`)
	for _, m := range regexp.MustCompile(`(?:href|action|src)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[1], "/ops/jobs/") {
			t.Errorf("link %q is not under the prefix", m[1])
		}
	}
	get("/ops/jobs/jobs/" + uitest.MachineName[:0] + firstID(t, body))
	get("/ops/jobs/static/overview.js")
}

func firstID(t *testing.T, body string) string {
	m := jobLinkRE.FindStringSubmatch(strings.ReplaceAll(body, "/ops/jobs/jobs/", "/jobs/"))
	if m == nil {
		t.Fatal("no job link")
	}
	return m[1]
}

func TestNewRefusesBadOptions(t *testing.T) {
	f := newFixture(t, 0, Options{})
	e := f.env.Engine
	for _, o := range []Options{
		{Machines: []string{"queue"}},
		{Engine: e},
		{Engine: e, Machines: []string{"nope"}},
		{Engine: e, Machines: []string{"queue", "queue"}},
		{Engine: e, Machines: []string{"queue"}, Prefix: "ops"},
		{Engine: e, Machines: []string{"queue"}, Prefix: "/ops/"},
		{Engine: e, Machines: []string{"queue"}, PageSize: 1001},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// plainStore offers the Store contract only: no listing, no counts.
type plainStore struct{ jobstate.Store }

func TestStoreWithoutListingOrCounts(t *testing.T) {
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	env := jobstatetest.NewWithStore(t, plainStore{memstore.New()}, jobstate.WithMachines(def))
	job := env.Create(jobCreate("x"))
	h, err := New(Options{Engine: env.Engine, Machines: []string{uitest.MachineName}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, h: h}
	code, body, _ := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("overview: %d", code)
	}
	mustContain(t, body, "the store does not count jobs per state")
	if code, _, _ := f.get("/jobs"); code != http.StatusNotImplemented {
		t.Errorf("list without listing: %d, want 501", code)
	}
	if code, _, _ := f.get("/jobs/" + job.ID.String()); code != http.StatusOK {
		t.Errorf("a job's page: %d", code)
	}
}
