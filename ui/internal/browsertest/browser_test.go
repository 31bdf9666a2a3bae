package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/ui"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// prefix is where the tests mount the interface.
const prefix = "/ops"

// chromium returns the path of a Chromium binary. Without one the test is
// skipped, or fails when CI=true or JOBSTATE_REQUIRE_BROWSER=1.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" || os.Getenv("JOBSTATE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium on PATH (install the chromium package)")
	}
	t.Skip("no Chromium on PATH; set JOBSTATE_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// browser starts one headless Chromium for the test and returns a context
// of a tab of it.
func browser(t *testing.T) context.Context {
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// server serves the interface on env's engine, with actions allowed to
// the operator named by the cookie "operator".
func server(t *testing.T, env *jobstatetest.Env) *httptest.Server {
	h, err := ui.New(ui.Options{
		Engine: env.Engine, Machines: []string{uitest.MachineName}, Prefix: prefix, PageSize: 5,
		Refresh: 100 * time.Millisecond,
		Authorize: func(r *http.Request, action string, job jobstate.Job) (string, bool) {
			c, err := r.Cookie("operator")
			if err != nil || c.Value == "" {
				return "", false
			}
			return c.Value, true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowser drives the pages in one headless Chromium, a tab for each
// store: memstore (which also writes the screenshots when
// JOBSTATE_UI_SCREENSHOTS=1) and PostgreSQL.
func TestBrowser(t *testing.T) {
	browserCtx := browser(t)
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("memstore", func(t *testing.T) {
		ctx, cancel := chromedp.NewContext(browserCtx)
		defer cancel()
		env := jobstatetest.New(t, jobstate.WithMachines(def))
		run(t, ctx, env, os.Getenv("JOBSTATE_UI_SCREENSHOTS") == "1")
	})
	t.Run("postgres", func(t *testing.T) {
		ctx, cancel := chromedp.NewContext(browserCtx)
		defer cancel()
		env, _ := pgtest.NewEnv(t, jobstate.WithMachines(def))
		run(t, ctx, env, false)
	})
}

// run fills env with jobs and drives the three pages and the actions in the browser.
func run(t *testing.T, ctx context.Context, env *jobstatetest.Env, screenshots bool) {
	jobs, err := uitest.Populate(env.Ctx, env.Engine, 12, func() { env.Advance(time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	srv := server(t, env)
	base := srv.URL + prefix
	// A bound on the whole run, so that a browser or page that stops
	// answering fails the test instead of holding it until the test
	// binary's timeout; it is several times the run's usual time (see
	// docs/ui.md), so that a loaded machine slows the test without
	// failing it.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		t.Logf("%6.2fs %s", time.Since(start).Seconds(), what)
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}
	noPwn := func(where string) {
		t.Helper()
		if got := eval(`typeof window.pwned`); got != "undefined" {
			t.Errorf("%s: a payload's script ran (window.pwned is %s)", where, got)
		}
	}
	// clickAndLoad clicks the element with id and waits for the page it
	// leads to: a new document, without the mark set on the old one.
	clickAndLoad := func(what, id string) {
		t.Helper()
		eval(`window.oldPage = true; "ok"`)
		do(what, chromedp.Click(chromedp.ID(id)))
		// The old document's context goes away during the navigation:
		// an evaluation failing then is retried.
		for {
			done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.oldPage && document.readyState === "complete"`))
			if err == nil && done {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the page did not load: %v", what, ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	shot := func(name string) {
		t.Helper()
		if !screenshots {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "ui", name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Overview: the counts, then refreshed in place by the script.
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`section.machine`)))
	if got := eval(`document.querySelector('td[data-state="QUEUED"]').textContent`); got != "16" {
		t.Fatalf("overview: QUEUED count %q, want 16", got)
	}
	shot("overview")
	if _, err := env.Engine.Create(env.Ctx, jobstate.NewJob{Machine: uitest.MachineName, Payload: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	env.Advance(time.Millisecond)
	do("overview refresh", chromedp.Poll[chromedp.Void](`document.querySelector('td[data-state="QUEUED"]').textContent === "17"`))
	if got := eval(`document.getElementById("refreshed").textContent`); !strings.HasPrefix(got, "Counts refreshed at") {
		t.Errorf("overview: refresh note %q", got)
	}

	// Jobs: pages of 5 by the Next link, a filter by the form, sorting.
	rows := `String(document.querySelectorAll("#jobs a.job").length)`
	do("jobs", chromedp.Navigate(base+"/jobs?order=created&dir=asc"), chromedp.WaitVisible(chromedp.ID("jobs")))
	if got := eval(rows); got != "5" {
		t.Fatalf("jobs: %s rows, want 5", got)
	}
	if got := eval(`document.querySelector("#jobs a.job").textContent`); got != jobs.Queued.String() {
		t.Fatalf("jobs: first row %s, want the oldest job %s", got, jobs.Queued)
	}
	noPwn("jobs")
	seen := map[string]bool{}
	for page := 1; ; page++ {
		for _, id := range strings.Fields(eval(`Array.from(document.querySelectorAll("#jobs a.job")).map(a => a.textContent).join(" ")`)) {
			if seen[id] {
				t.Fatalf("jobs: %s listed twice", id)
			}
			seen[id] = true
		}
		if eval(`document.getElementById("next") ? "yes" : "no"`) == "no" {
			break
		}
		clickAndLoad("next page", "next")
		if page > 10 {
			t.Fatal("jobs: paging does not end")
		}
	}
	if len(seen) != 21 {
		t.Fatalf("jobs: %d jobs over the pages, want 21", len(seen))
	}
	do("filter", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.ID("jobs")),
		chromedp.SetValue(chromedp.CSS(`input[name="owner"]`), "alice"))
	clickAndLoad("filter", "filter")
	if got := eval(`location.search`); !strings.Contains(got, "owner=alice") {
		t.Fatalf("the filter form went to %q", got)
	}
	if got := eval(rows); got != "2" {
		t.Fatalf("filter owner=alice: %s rows, want 2", got)
	}
	do("failed jobs", chromedp.Navigate(base+"/jobs?state=FAILED"), chromedp.WaitVisible(chromedp.ID("jobs")))
	clickAndLoad("sort", "sort-updated-desc")
	if got := eval(`document.querySelector("#jobs a.job").textContent`); got != jobs.Img.String() {
		t.Fatalf("sorted by update: first %s, want %s", got, jobs.Img)
	}
	do("jobs page for the screenshot", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.ID("jobs")))
	shot("jobs")

	// A bad filter: one line, 400.
	do("bad filter", chromedp.Navigate(base+"/jobs?created_from=yesterday"), chromedp.WaitVisible(chromedp.ID("error-message")))
	if got := eval(`document.getElementById("error-message").textContent`); !strings.Contains(got, "is not a time") {
		t.Errorf("bad filter: %q", got)
	}

	// Hostile payloads, owners, keys and errors stay text.
	for _, id := range []string{jobs.Script.String(), jobs.Img.String(), jobs.Failed.String(), jobs.Binary.String(), jobs.Big.String()} {
		do("job "+id, chromedp.Navigate(base+"/jobs/"+id), chromedp.WaitVisible(chromedp.ID("job-state")))
		noPwn("job " + id)
		if got := eval(`String(document.querySelectorAll("script:not([src]), img").length)`); got != "0" {
			t.Errorf("job %s: %s script or img elements", id, got)
		}
	}
	do("script job", chromedp.Navigate(base+"/jobs/"+jobs.Script.String()), chromedp.WaitVisible(chromedp.ID("fields")))
	if got := eval(`document.querySelector("pre.text").textContent`); got != uitest.ScriptPayload {
		t.Errorf("script payload shown as %q", got)
	}
	do("jobs of the hostile owner", chromedp.Navigate(base+"/jobs?owner="+strings.ReplaceAll(uitest.HostileOwner, "<", "%3C")), chromedp.WaitVisible(chromedp.ID("jobs")))
	noPwn("hostile owner list")

	// Job page: state, history, the diagram with the current state.
	do("job", chromedp.Navigate(base+"/jobs/"+jobs.Succeeded.String()), chromedp.WaitVisible(chromedp.ID("diagram")))
	if got := eval(`document.querySelector("#diagram g.current").dataset.state`); got != "SUCCEEDED" {
		t.Errorf("diagram: current %q", got)
	}
	if got := eval(`String(document.querySelectorAll("#diagram g.edge.taken").length)`); got != "2" {
		t.Errorf("diagram: %s taken arrows, want 2", got)
	}
	if got := eval(`document.getElementById("history").textContent`); !strings.Contains(got, "claim") || !strings.Contains(got, "succeed") {
		t.Errorf("history %q", got)
	}
	if got := eval(`String(document.querySelector("#diagram").getBoundingClientRect().width > 100)`); got != "true" {
		t.Errorf("the diagram is not drawn")
	}
	shot("job")

	// Without the operator cookie no action is offered; with it, a cancel
	// from the page moves the job and appears in its history.
	jobURL := base + "/jobs/" + jobs.Queued.String()
	do("job without operator", chromedp.Navigate(jobURL), chromedp.WaitVisible(chromedp.ID("job-state")))
	if got := eval(`document.getElementById("action-cancel") ? "shown" : "none"`); got != "none" {
		t.Fatalf("cancel offered to a visitor")
	}
	eval(`document.cookie = "operator=operator-ann; path=/"; "ok"`)
	do("cancel", chromedp.Navigate(jobURL), chromedp.WaitVisible(chromedp.ID("action-cancel")),
		chromedp.SetValue(chromedp.CSS(`form[action$="/cancel"] input[name="reason"]`), "customer asked"),
	)
	clickAndLoad("cancel post", "action-cancel")
	if got := eval(`document.getElementById("job-state").textContent`); got != "CANCELLED" {
		t.Fatalf("after cancel the page shows %q", got)
	}
	if got := eval(`document.querySelector("#history li:last-child").textContent`); !strings.Contains(got, "operator-ann") || !strings.Contains(got, "customer asked") || !strings.Contains(got, "cancel") {
		t.Errorf("history's last move %q", got)
	}
	env.AssertState(jobs.Queued, "CANCELLED")

	// An action whose authorization is gone by the time it is posted is
	// refused, and nothing moves.
	runURL := base + "/jobs/" + jobs.Running.String()
	do("refused", chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.ID("action-cancel")))
	eval(`document.cookie = "operator=; max-age=0; path=/"; "ok"`)
	clickAndLoad("refused post", "action-cancel")
	if got := eval(`document.querySelector("h1").textContent`); !strings.HasPrefix(got, "403") {
		t.Errorf("refused action answered %q", got)
	}
	env.AssertState(jobs.Running, "RUNNING")
	noPwn("end")
}
