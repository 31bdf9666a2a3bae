package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// machineCounts is one machine's row of the overview.
type machineCounts struct {
	Name   string       `json:"machine"`
	States []stateCount `json:"states"`
	Total  int          `json:"total"`
	Error  string       `json:"error,omitempty"`
	Link   string       `json:"-"`
}

// stateCount is the number of a machine's jobs in one state.
type stateCount struct {
	State string `json:"state"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	Link  string `json:"-"`
}

// counts reads every machine's counts. A machine whose counts cannot be
// read carries the reason; an unavailable store fails the whole call.
func (h *Handler) counts(r *http.Request) ([]machineCounts, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	out := make([]machineCounts, 0, len(h.machines))
	for _, def := range h.machines {
		mc := machineCounts{Name: def.Name(), Link: h.jobsLink(url.Values{"machine": {def.Name()}})}
		n, err := h.opt.Engine.Counts(ctx, def.Name())
		if err != nil && !errors.Is(err, jobstate.ErrUnsupported) {
			return nil, err
		}
		if err != nil {
			mc.Error = "the store does not count jobs per state"
		}
		for _, st := range def.States() {
			c := n[st.Name]
			mc.Total += c
			mc.States = append(mc.States, stateCount{
				State: string(st.Name), Kind: st.Kind.String(), Count: c,
				Link: h.jobsLink(url.Values{"machine": {def.Name()}, "state": {string(st.Name)}}),
			})
		}
		out = append(out, mc)
	}
	return out, nil
}

func (h *Handler) jobsLink(v url.Values) string {
	if len(v) == 0 {
		return h.link("/jobs")
	}
	return h.link("/jobs") + "?" + v.Encode()
}

// overviewPage is the data of the overview.
type overviewPage struct {
	Base      base
	Machines  []machineCounts
	CountsURL string
	RefreshMS int64
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	mc, err := h.counts(r)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "overview", overviewPage{
		Base: h.base("Overview"), Machines: mc,
		CountsURL: h.link("/counts.json"), RefreshMS: h.opt.Refresh.Milliseconds(),
	})
}

// countsJSON answers the overview's script: {"machines": [...]}.
func (h *Handler) countsJSON(w http.ResponseWriter, r *http.Request) {
	mc, err := h.counts(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status, msg := statusOf(err)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"machines": mc})
}

// jobsPage is the data of the job list.
type jobsPage struct {
	Base     base
	Filter   filter
	Machines []machineOption
	States   []machineOption
	Jobs     []jobRow
	Next     string
	First    string
	Sort     map[string]string
	Paged    bool
}

// machineOption is a machine or a state in the list's filter form.
type machineOption struct {
	Name     string
	Selected bool
}

// jobRow is one job of the list.
type jobRow struct {
	Link    string
	ID      string
	Machine string
	State   string
	Kind    string
	Owner   string
	Key     string
	Attempt int
	Created string
	Updated string
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), h.machines, h.opt.PageSize)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	page, err := h.opt.Engine.List(ctx, f.query, f.Cursor)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	p := jobsPage{Base: h.base("Jobs"), Filter: f, Paged: f.Cursor != ""}
	seenState := make(map[string]bool)
	for _, d := range h.machines {
		p.Machines = append(p.Machines, machineOption{Name: d.Name(), Selected: d.Name() == f.Machine})
		if f.Machine != "" && d.Name() != f.Machine {
			continue
		}
		for _, st := range d.States() {
			if !seenState[string(st.Name)] {
				seenState[string(st.Name)] = true
				p.States = append(p.States, machineOption{Name: string(st.Name), Selected: slices.Contains(f.States, string(st.Name))})
			}
		}
	}
	for _, j := range page.Jobs {
		p.Jobs = append(p.Jobs, jobRow{
			Link: h.jobLink(j.ID), ID: j.ID.String(), Machine: j.Machine, State: string(j.State), Kind: j.Kind.String(),
			Owner: j.Owner, Key: j.IdempotencyKey, Attempt: j.Attempt,
			Created: showTime(j.CreatedAt), Updated: showTime(j.UpdatedAt),
		})
	}
	cur := f.values(f.Order, f.Desc)
	p.First = h.jobsLink(cur)
	if page.Next != "" {
		next := f.values(f.Order, f.Desc)
		next.Set("cursor", page.Next)
		p.Next = h.jobsLink(next)
	}
	p.Sort = map[string]string{
		"created_desc": h.jobsLink(f.values("created", true)),
		"created_asc":  h.jobsLink(f.values("created", false)),
		"updated_desc": h.jobsLink(f.values("updated", true)),
		"updated_asc":  h.jobsLink(f.values("updated", false)),
	}
	h.render(w, http.StatusOK, "jobs", p)
}

func (h *Handler) jobLink(id uuid.UUID) string { return h.link("/jobs/" + id.String()) }

// parseID reads the job id of a path; a malformed one is a 404, as no job
// has it.
func parseID(s string) (uuid.UUID, bool) {
	id, err := uuid.Parse(s)
	return id, err == nil && len(s) == 36
}
