package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// maxForm bounds an action's form body.
const maxForm = 16 << 10

// maxReason bounds the reason an operator types.
const maxReason = 1024

// token returns the action token of action on job: an HMAC-SHA256 of both
// under the handler's key, base64url.
func (h *Handler) token(action string, id uuid.UUID) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte("jobstate-ui-action\x00"))
	m.Write([]byte(action))
	m.Write([]byte{0})
	m.Write(id[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validToken reports whether tok is the token of action on id.
func (h *Handler) validToken(tok, action string, id uuid.UUID) bool {
	got, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(h.token(action, id))
	return hmac.Equal(got, want)
}

// sameOrigin reports whether a POST comes from a page of this origin: a
// Sec-Fetch-Site header, when sent, must say same-origin, and an Origin
// header, when sent, must name the request's host. A request with
// neither is refused: every browser that runs the pages sends one.
func sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return site == "same-origin"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return u.Host == r.Host
}

// offers reports whether job's state allows action on its machine.
func offers(def *jobstate.Definition, job jobstate.Job, effects []jobstate.EffectRecord, action string) bool {
	switch action {
	case ActionCancel:
		return !job.Terminal() && def.Can(job.State, jobstate.EventCancel)
	case ActionRedrive, ActionRetry:
		if !slices.Contains(def.Policy().RedriveFrom, job.State) || job.Outcome.Failure() != (action == ActionRetry) {
			return false
		}
		for _, e := range effects {
			if e.Name == jobstate.RedriveEffect {
				return false
			}
		}
		return true
	}
	return false
}

// actionsFor returns the action forms the job's page shows: those its
// state allows and Options.Authorize allows the request.
func (h *Handler) actionsFor(r *http.Request, def *jobstate.Definition, job jobstate.Job, effects []jobstate.EffectRecord) []actionForm {
	if h.opt.Authorize == nil {
		return nil
	}
	var out []actionForm
	for _, a := range []struct{ action, label string }{{ActionCancel, "Cancel"}, {ActionRetry, "Retry"}, {ActionRedrive, "Redrive"}} {
		if !offers(def, job, effects, a.action) {
			continue
		}
		if _, ok := h.opt.Authorize(r, a.action, job); !ok {
			continue
		}
		out = append(out, actionForm{
			Action: a.action, Label: a.label,
			URL:   h.link("/jobs/" + job.ID.String() + "/" + a.action),
			Token: h.token(a.action, job.ID),
		})
	}
	return out
}

// action performs a posted action: same origin, a valid token, an
// Authorize hook that allows it; the operator it names is the actor. It
// answers 303 to the job's page (the new job's, for a redrive).
func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r.PathValue("id"))
	action := r.PathValue("action")
	if !ok || (action != ActionCancel && action != ActionRedrive && action != ActionRetry) {
		h.fail(w, r, http.StatusNotFound, "No such job or action.")
		return
	}
	if h.opt.Authorize == nil {
		h.fail(w, r, http.StatusForbidden, "This interface is read-only: no action is allowed.")
		return
	}
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "Refused: the request does not come from this site's pages.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !h.validToken(r.PostForm.Get("token"), action, id) {
		h.fail(w, r, http.StatusForbidden, "Refused: the form's token is missing or not valid for this action and job; reload the page.")
		return
	}
	reason := r.PostForm.Get("reason")
	if len(reason) > maxReason || !utf8.ValidString(reason) {
		h.fail(w, r, http.StatusBadRequest, "The reason must be valid text of at most 1024 bytes.")
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
	def, known := e.Machine(job.Machine)
	if !known {
		h.fail(w, r, http.StatusConflict, "The job's machine is not registered with this engine.")
		return
	}
	actor, ok := h.opt.Authorize(r, action, job)
	if !ok {
		h.fail(w, r, http.StatusForbidden, "You are not allowed to "+action+" this job.")
		return
	}
	if action != ActionCancel && !offers(def, job, nil, action) {
		h.fail(w, r, http.StatusConflict, "The job's state or outcome does not allow the action "+action+".")
		return
	}
	if reason == "" {
		reason = "operator " + action + " from the web interface"
	}
	c := jobstate.Call{Actor: actor, Reason: reason}
	target := job.ID
	switch action {
	case ActionCancel:
		_, err = e.Cancel(ctx, id, c)
	case ActionRedrive, ActionRetry:
		var nj jobstate.Job
		nj, err = e.Redrive(ctx, id, c)
		target = nj.ID
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, h.link("/jobs/"+target.String())+"?done="+action, http.StatusSeeOther)
}
