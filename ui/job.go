package ui

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
)

// bytesView is a payload or result as a page shows it: text when the bytes
// are valid UTF-8, else a hex dump, cut to the display limit.
type bytesView struct {
	Text    string
	Hex     bool
	Len     int
	Shown   int
	Cut     bool
	Present bool
}

// viewBytes prepares b for display, showing at most limit bytes (cut at a
// character boundary for text).
func viewBytes(b []byte, limit int) bytesView {
	v := bytesView{Len: len(b), Present: len(b) > 0}
	shown := b
	if len(shown) > limit {
		shown = shown[:limit]
		v.Cut = true
	}
	if utf8.Valid(b) {
		for len(shown) > 0 && !utf8.Valid(shown) {
			shown = shown[:len(shown)-1]
		}
		v.Text = string(shown)
	} else {
		v.Hex = true
		v.Text = hex.Dump(shown)
	}
	v.Shown = len(shown)
	return v
}

// field is one labelled value of the job's table.
type field struct {
	Name, Value string
}

// actionForm is one action button of a job's page.
type actionForm struct {
	Action string
	Label  string
	URL    string
	Token  string
}

// jobPage is the data of a job's page.
type jobPage struct {
	Base       base
	Job        jobstate.Job
	ID         string
	Fields     []field
	Payload    bytesView
	Result     bytesView
	LastError  string
	History    []jobstate.Transition
	Executions []jobstate.Execution
	Effects    []jobstate.EffectRecord
	Diagram    diagram
	Actions    []actionForm
	ListLink   string
	Note       string
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		h.fail(w, r, http.StatusNotFound, "No such job.")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	e := h.opt.Engine
	job, err := e.Get(ctx, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	hist, err := e.History(ctx, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	execs, err := e.Executions(ctx, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	effects, err := e.Effects(ctx, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	p := jobPage{
		Base: h.base("Job " + job.ID.String()), Job: job, ID: job.ID.String(),
		Payload: viewBytes(job.Payload, h.opt.PayloadLimit), Result: viewBytes(job.Result, h.opt.PayloadLimit),
		LastError: job.LastError, History: hist, Executions: execs, Effects: effects,
		ListLink: h.jobsLink(nil),
	}
	switch r.URL.Query().Get("done") {
	case ActionCancel:
		p.Note = "The job was cancelled."
	case ActionRedrive, ActionRetry:
		p.Note = "This job was created by a " + r.URL.Query().Get("done") + " of a finished job."
	}
	p.Fields = jobFields(job)
	if def, ok := e.Machine(job.Machine); ok {
		p.Diagram = layout(def, job.State, hist)
		p.ListLink = h.jobsLink(map[string][]string{"machine": {job.Machine}})
		p.Actions = h.actionsFor(r, def, job, effects)
	}
	h.render(w, http.StatusOK, "job", p)
}

// jobFields lists the job's fields for its table, as text.
func jobFields(j jobstate.Job) []field {
	b := func(v bool) string { return strconv.FormatBool(v) }
	fs := []field{
		{"Machine", j.Machine}, {"State", string(j.State)}, {"Kind", j.Kind.String()},
		{"Outcome", string(j.Outcome)}, {"Version", strconv.FormatInt(j.Version, 10)},
		{"Attempt", strconv.Itoa(j.Attempt)},
		{"Retries", fmt.Sprintf("%d of %d", j.RetryCount, j.MaxRetries)},
		{"Error class", string(j.ErrorClass)},
		{"Owner", j.Owner}, {"Idempotency key", j.IdempotencyKey}, {"Concurrency key", j.ConcurrencyKey},
		{"Priority", strconv.Itoa(j.Priority)},
		{"Created", showTime(j.CreatedAt)}, {"Updated", showTime(j.UpdatedAt)},
		{"Started", showTime(j.StartedAt)}, {"Completed", showTime(j.CompletedAt)},
		{"Not before", showTime(j.NotBefore)}, {"Deadline", showTime(j.Deadline)},
		{"Live leases", strconv.Itoa(j.Leases)}, {"Lease expires", showTime(j.LeaseExpiresAt)},
		{"Last heartbeat", showTime(j.HeartbeatAt)}, {"Cancel requested", b(j.CancelRequested)},
		{"Wakes at", showTime(j.WakeAt)},
	}
	return fs
}
