package ui

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
)

// Authorizer decides whether the request may perform action (ActionCancel,
// ActionRedrive or ActionRetry) on job. It returns the operator's name, recorded as the
// actor of the move, and whether the action is allowed. It is called to
// decide which action buttons a job's page shows and again when an action
// is posted; it must not write to the response.
type Authorizer func(r *http.Request, action string, job jobstate.Job) (actor string, ok bool)

// The actions a job's page may offer.
const (
	// ActionCancel fires the machine's cancel rule (jobstate.Engine.Cancel).
	ActionCancel = "cancel"
	// ActionRedrive runs a finished job again as a new job
	// (jobstate.Engine.Redrive), from the states the machine's
	// Policy.RedriveFrom lists. A job's page offers it for the jobs that
	// ActionRetry does not cover.
	ActionRedrive = "redrive"
	// ActionRetry is ActionRedrive restricted to a job whose outcome is a
	// failure (failed, dead-lettered or expired), as the jobstate
	// command's retry; a job's page offers it for those jobs.
	ActionRetry = "retry"
)

// Options configure a Handler.
type Options struct {
	// Engine is the engine whose jobs are shown. Required.
	Engine *jobstate.Engine
	// Machines names the machines the overview shows and the list offers,
	// in that order. Required: every name must be registered with Engine.
	Machines []string
	// Prefix is the path the handler is mounted under, as the browser
	// sees it ("/admin/jobs"), without a trailing slash; every link the
	// handler writes starts with it. Empty when mounted at the root.
	// Mount the handler with http.StripPrefix(Prefix, h).
	Prefix string
	// Title is the pages' title; "jobstate" when empty.
	Title string
	// Authorize allows actions. Nil makes the handler read-only: no
	// action is offered and every POST is refused with 403.
	Authorize Authorizer
	// Key is the secret the action tokens are made with. When empty the
	// handler draws 32 random bytes: tokens then stop being valid when
	// the process restarts, and handlers behind a load balancer need the
	// same Key.
	Key []byte
	// PageSize is the number of jobs a list page shows (50 when zero, at
	// most jobstate.MaxListLimit).
	PageSize int
	// PayloadLimit is the number of a payload's bytes a job's page shows
	// (4096 when zero); the full length is stated beside it.
	PayloadLimit int
	// Refresh is how often the overview's counts are refreshed in place
	// (5 seconds when zero).
	Refresh time.Duration
	// Timeout bounds each request's calls to the engine (10 seconds when
	// zero).
	Timeout time.Duration
}

// Handler serves the operator interface. It is safe for concurrent use.
type Handler struct {
	opt      Options
	key      []byte
	mux      *http.ServeMux
	tmpl     *template.Template
	machines []*jobstate.Definition
}

// ErrOptions is returned by New for options it refuses.
var ErrOptions = errors.New("ui: invalid options")

// New returns a Handler for the options. It refuses, with ErrOptions, a
// nil Engine, no machine, a machine the engine does not know, a Prefix
// that does not start with "/" or ends with one, and a PageSize outside
// 0..jobstate.MaxListLimit.
func New(opt Options) (*Handler, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...)
	}
	if opt.Engine == nil {
		return nil, bad("no engine")
	}
	if len(opt.Machines) == 0 {
		return nil, bad("no machine")
	}
	if opt.Prefix != "" && (!strings.HasPrefix(opt.Prefix, "/") || strings.HasSuffix(opt.Prefix, "/")) {
		return nil, bad("prefix %q must start with / and not end with one", opt.Prefix)
	}
	if opt.PageSize < 0 || opt.PageSize > jobstate.MaxListLimit {
		return nil, bad("page size %d is outside 0..%d", opt.PageSize, jobstate.MaxListLimit)
	}
	if opt.PageSize == 0 {
		opt.PageSize = 50
	}
	if opt.PayloadLimit <= 0 {
		opt.PayloadLimit = 4096
	}
	if opt.Refresh <= 0 {
		opt.Refresh = 5 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.Title == "" {
		opt.Title = "jobstate"
	}
	h := &Handler{opt: opt}
	seen := make(map[string]bool)
	for _, name := range opt.Machines {
		def, ok := opt.Engine.Machine(name)
		if !ok {
			return nil, bad("machine %q is not registered with the engine", name)
		}
		if seen[name] {
			return nil, bad("machine %q is listed twice", name)
		}
		seen[name] = true
		h.machines = append(h.machines, def)
	}
	h.key = opt.Key
	if len(h.key) == 0 {
		h.key = make([]byte, 32)
		if _, err := rand.Read(h.key); err != nil {
			return nil, fmt.Errorf("ui: drawing the token key: %w", err)
		}
	}
	t, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	h.tmpl = t
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("ui: embedded assets: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /counts.json", h.countsJSON)
	mux.HandleFunc("GET /jobs", h.jobs)
	mux.HandleFunc("GET /jobs/{id}", h.job)
	mux.HandleFunc("POST /jobs/{id}/{action}", h.action)
	mux.HandleFunc("GET /jobs/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, http.StatusMethodNotAllowed, "Actions are posted from a job's page.")
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "No such page.")
	})
	h.mux = mux
	return h, nil
}

// ServeHTTP serves the request, with the security headers on every
// response. The path is taken as relative to Options.Prefix (the mount
// prefix, already stripped).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	defer func() {
		// A failure in a template or a store must not take the host's
		// server down; the request ends with a 500.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	h.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the handler's own script and stylesheet,
// no inline script or style, no plugin, no framing, and forms posting only
// to the same origin.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ctx returns the request's context bounded by Options.Timeout.
func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opt.Timeout)
}

// link returns the path of a page of the handler as the browser sees it.
func (h *Handler) link(p string) string { return h.opt.Prefix + p }

// statusOf maps an engine error to an HTTP status and the line shown.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, jobstate.ErrNotFound):
		return http.StatusNotFound, "No such job."
	case errors.Is(err, jobstate.ErrInvalidArgument), errors.Is(err, jobstate.ErrUnknownMachine):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, jobstate.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "The job store is unavailable; try again shortly."
	case errors.Is(err, jobstate.ErrUnsupported):
		return http.StatusNotImplemented, "The job store does not offer this operation: " + err.Error()
	case errors.Is(err, jobstate.ErrInvalidTransition), errors.Is(err, jobstate.ErrGuardRefused),
		errors.Is(err, jobstate.ErrTerminal), errors.Is(err, jobstate.ErrVersionConflict),
		errors.Is(err, jobstate.ErrEffectApplied):
		return http.StatusConflict, err.Error()
	default:
		return http.StatusInternalServerError, "Internal error."
	}
}

// errorPage is the data of the error page.
type errorPage struct {
	Base    base
	Status  int
	Message string
}

// fail writes the error page with one line.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, status, "error", errorPage{Base: h.base(http.StatusText(status)), Status: status, Message: msg})
}

// failErr writes the error page for an engine error.
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err)
	h.fail(w, r, status, msg)
}
