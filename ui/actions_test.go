package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

func newRecorder(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://ui.test"+path, nil))
	return rec
}

// allowAll lets operator-ann perform every action.
func allowAll(r *http.Request, action string, job jobstate.Job) (string, bool) {
	return "operator-ann", true
}

// formFor is the form a job's page posts for action.
func formFor(h *Handler, action string, id uuid.UUID) url.Values {
	return url.Values{"token": {h.token(action, id)}, "reason": {"stuck upstream"}}
}

func TestReadOnlyByDefault(t *testing.T) {
	f := newFixture(t, 0, Options{})
	_, body, _ := f.get("/jobs/" + f.jobs.Queued.String())
	mustNotContain(t, body, "<form method=\"post\"", `id="action-cancel"`)
	rec := f.post("/jobs/"+f.jobs.Queued.String()+"/cancel", formFor(f.h, "cancel", f.jobs.Queued), nil)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "read-only") {
		t.Fatalf("POST on a read-only handler: %d %s", rec.Code, rec.Body)
	}
	if got := f.env.Get(f.jobs.Queued).State; got != "QUEUED" {
		t.Fatalf("the job moved to %s", got)
	}
}

func TestCancelRecordsTheOperator(t *testing.T) {
	f := newFixture(t, 0, Options{Authorize: allowAll})
	_, body, _ := f.get("/jobs/" + f.jobs.Queued.String())
	mustContain(t, body, `<form method="post" action="/jobs/`+f.jobs.Queued.String()+`/cancel"`,
		`name="token" value="`+f.h.token("cancel", f.jobs.Queued)+`"`, `id="action-cancel"`)
	mustNotContain(t, body, `id="action-redrive"`)

	rec := f.post("/jobs/"+f.jobs.Queued.String()+"/cancel", formFor(f.h, "cancel", f.jobs.Queued), nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/jobs/"+f.jobs.Queued.String()+"?done=cancel" {
		t.Fatalf("cancel: %d %v", rec.Code, rec.Header())
	}
	f.env.AssertState(f.jobs.Queued, "CANCELLED")
	hist, err := f.env.Engine.History(f.env.Ctx, f.jobs.Queued)
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.Event != jobstate.EventCancel || last.Actor != "operator-ann" || last.Reason != "stuck upstream" {
		t.Fatalf("last transition %+v", last)
	}
	_, body, _ = f.get("/jobs/" + f.jobs.Queued.String() + "?done=cancel")
	mustContain(t, body, `<p class="notice" id="notice">The job was cancelled.</p>`, `<span class="actor">operator-ann</span>`)
	mustNotContain(t, body, `id="action-cancel"`)
	// Cancelling again: the job is terminal, 409.
	if rec := f.post("/jobs/"+f.jobs.Queued.String()+"/cancel", formFor(f.h, "cancel", f.jobs.Queued), nil); rec.Code != http.StatusConflict {
		t.Fatalf("second cancel: %d", rec.Code)
	}
}

func TestRetryCreatesANewJob(t *testing.T) {
	f := newFixture(t, 0, Options{Authorize: allowAll})
	_, body, _ := f.get("/jobs/" + f.jobs.Failed.String())
	mustContain(t, body, `id="action-retry"`)
	mustNotContain(t, body, `id="action-cancel"`, `id="action-redrive"`)
	// A failed job is retried, not redriven: the page offers retry only.
	if rec := f.post("/jobs/"+f.jobs.Failed.String()+"/redrive", formFor(f.h, "redrive", f.jobs.Failed), nil); rec.Code != http.StatusConflict {
		t.Fatalf("redrive of a failed job: %d", rec.Code)
	}
	// Neither runs a job that has not finished.
	if rec := f.post("/jobs/"+f.jobs.Queued.String()+"/retry", formFor(f.h, "retry", f.jobs.Queued), nil); rec.Code != http.StatusConflict {
		t.Fatalf("retry of a queued job: %d", rec.Code)
	}
	rec := f.post("/jobs/"+f.jobs.Failed.String()+"/retry", formFor(f.h, "retry", f.jobs.Failed), nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("redrive: %d %s", rec.Code, rec.Body)
	}
	loc := rec.Header().Get("Location")
	if !strings.HasSuffix(loc, "?done=retry") || strings.Contains(loc, f.jobs.Failed.String()) {
		t.Fatalf("redrive redirects to %q", loc)
	}
	code, body, _ := f.get(loc)
	if code != http.StatusOK {
		t.Fatalf("new job: %d", code)
	}
	mustContain(t, body, "This job was created by a retry of a finished job.", "QUEUED", "redrive of job "+f.jobs.Failed.String()+": stuck upstream", `<span class="actor">operator-ann</span>`)
	// Run again once: the old job offers it no more, and a second post
	// is refused.
	_, body, _ = f.get("/jobs/" + f.jobs.Failed.String())
	mustNotContain(t, body, `id="action-retry"`)
	if rec := f.post("/jobs/"+f.jobs.Failed.String()+"/retry", formFor(f.h, "retry", f.jobs.Failed), nil); rec.Code != http.StatusConflict {
		t.Fatalf("second retry: %d", rec.Code)
	}
}

func TestCSRFRefusals(t *testing.T) {
	f := newFixture(t, 0, Options{Authorize: allowAll})
	id := f.jobs.Queued
	path := "/jobs/" + id.String() + "/cancel"
	other, err := New(Options{Engine: f.env.Engine, Machines: []string{"queue"}, Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		form    url.Values
		headers map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"token of another job", formFor(f.h, "cancel", f.jobs.Running), nil},
		{"token of another action", formFor(f.h, "redrive", id), nil},
		{"token of another handler's key", formFor(other, "cancel", id), nil},
		{"garbage token", url.Values{"token": {"AAAA"}}, nil},
		{"cross-site fetch", formFor(f.h, "cancel", id), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site fetch", formFor(f.h, "cancel", id), map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"foreign origin", formFor(f.h, "cancel", id), map[string]string{"Origin": "https://evil.test", "Sec-Fetch-Site": ""}},
		{"null origin", formFor(f.h, "cancel", id), map[string]string{"Origin": "null", "Sec-Fetch-Site": ""}},
		{"no origin headers", formFor(f.h, "cancel", id), map[string]string{"Origin": "", "Sec-Fetch-Site": ""}},
	}
	for _, c := range cases {
		rec := f.post(path, c.form, c.headers)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, rec.Code)
		}
	}
	f.env.AssertState(id, "QUEUED")
	// GET on an action is not allowed.
	if code, _, _ := f.get(path); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", code)
	}
	// An Origin alone, of this host, is enough (older browsers).
	if rec := f.post(path, formFor(f.h, "cancel", id), map[string]string{"Sec-Fetch-Site": ""}); rec.Code != http.StatusSeeOther {
		t.Errorf("same Origin without Sec-Fetch-Site: %d", rec.Code)
	}
}

func TestAuthorizationRefusal(t *testing.T) {
	var asked []string
	f := newFixture(t, 0, Options{Authorize: func(r *http.Request, action string, job jobstate.Job) (string, bool) {
		asked = append(asked, action)
		return "viewer", action == ActionRedrive
	}})
	id := f.jobs.Queued
	_, body, _ := f.get("/jobs/" + id.String())
	mustNotContain(t, body, `id="action-cancel"`)
	if len(asked) != 1 || asked[0] != "cancel" {
		t.Fatalf("the hook was asked %v", asked)
	}
	rec := f.post("/jobs/"+id.String()+"/cancel", formFor(f.h, "cancel", id), nil)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "not allowed to cancel") {
		t.Fatalf("refused cancel: %d %s", rec.Code, rec.Body)
	}
	f.env.AssertState(id, "QUEUED")
	// Unknown action and unknown job.
	if rec := f.post("/jobs/"+id.String()+"/delete", formFor(f.h, "delete", id), nil); rec.Code != http.StatusNotFound {
		t.Errorf("unknown action: %d", rec.Code)
	}
	ghost := uuid.MustParse("00000000-0000-0000-0000-000000000009")
	if rec := f.post("/jobs/"+ghost.String()+"/cancel", formFor(f.h, "cancel", ghost), nil); rec.Code != http.StatusNotFound {
		t.Errorf("unknown job: %d", rec.Code)
	}
}
