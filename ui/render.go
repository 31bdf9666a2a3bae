package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

// assets holds the templates and the static files.
//
//go:embed assets
var assets embed.FS

// base is what every page's layout reads.
type base struct {
	Title    string
	Page     string
	Overview string
	Jobs     string
	Static   string
}

func (h *Handler) base(page string) base {
	return base{
		Title:    h.opt.Title,
		Page:     page,
		Overview: h.link("/"),
		Jobs:     h.link("/jobs"),
		Static:   h.link("/static/"),
	}
}

// timeFormat is how the pages show instants: UTC, to the millisecond.
const timeFormat = "2006-01-02 15:04:05.000Z"

// showTime formats an instant for a page; the zero time is "—".
func showTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(timeFormat)
}

func parseTemplates() (*template.Template, error) {
	funcs := template.FuncMap{"time": showTime}
	t, err := template.New("ui").Funcs(funcs).ParseFS(assets, "assets/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	return t, nil
}

// render executes the named template into a buffer, then writes it with
// status: a template failure gives a 500 and no partial page.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "internal error: rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
