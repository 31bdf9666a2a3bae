package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/jobstatetest"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

// fixture is a handler on a memstore holding the uitest jobs.
type fixture struct {
	t     *testing.T
	env   *jobstatetest.Env
	h     *Handler
	jobs  uitest.Jobs
	store *flakyStore
}

// flakyStore is a memstore that answers ErrUnavailable while down is set.
type flakyStore struct {
	*memstore.Store
	down atomic.Bool
}

func (s *flakyStore) Get(ctx context.Context, id uuid.UUID) (jobstate.Job, error) {
	if s.down.Load() {
		return jobstate.Job{}, jobstate.ErrUnavailable
	}
	return s.Store.Get(ctx, id)
}

func (s *flakyStore) List(ctx context.Context, q jobstate.ListQuery) ([]jobstate.Job, error) {
	if s.down.Load() {
		return nil, jobstate.ErrUnavailable
	}
	return s.Store.List(ctx, q)
}

func (s *flakyStore) Count(ctx context.Context, machine string) (map[jobstate.State]int, error) {
	if s.down.Load() {
		return nil, jobstate.ErrUnavailable
	}
	return s.Store.Count(ctx, machine)
}

// newFixture creates n plain jobs besides the named ones and builds a
// handler with opt (Engine and Machines filled in).
func newFixture(t *testing.T, n int, opt Options) *fixture {
	t.Helper()
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	st := &flakyStore{Store: memstore.New()}
	env := jobstatetest.NewWithStore(t, st, jobstate.WithMachines(def))
	jobs, err := uitest.Populate(env.Ctx, env.Engine, n, func() { env.Advance(time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	opt.Engine = env.Engine
	opt.Machines = []string{uitest.MachineName}
	h, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, env: env, h: h, jobs: jobs, store: st}
}

// get serves a GET of path and returns the status and body.
func (f *fixture) get(path string) (int, string, http.Header) {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://ui.test"+path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body), rec.Result().Header
}

// post serves a same-origin POST of form to path.
func (f *fixture) post(path string, form url.Values, headers map[string]string) *httptest.ResponseRecorder {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://ui.test"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://ui.test")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}

func mustNotContain(t *testing.T, body string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(body, b) {
			t.Errorf("the page holds %q", b)
		}
	}
}

func jobCreate(payload string) jobstate.NewJob {
	return jobstate.NewJob{Machine: uitest.MachineName, Payload: []byte(payload)}
}
