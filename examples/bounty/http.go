package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// ActorHeader names the caller of a request. It stands in for the
// marketplace's authentication: the endpoints read who is calling from it.
const ActorHeader = "X-Actor"

// Server is the marketplace's HTTP API, a net/http handler over a Market:
//
//	POST /agents                 register a worker          201
//	POST /jobs                   post a bounty (open)       201
//	GET  /jobs                   list bounties              200
//	GET  /jobs/{id}              read a bounty              200
//	POST /jobs/{id}/fund         T1, the buyer funds        200
//	POST /jobs/{id}/cancel       T2, T5, the buyer cancels  200
//	POST /jobs/{id}/claim        a worker claims (joins)    200
//	POST /jobs/{id}/submit       a participant submits      202, judged in the background
//	GET  /jobs/{id}/submissions  the bounty's submissions   200
//	POST /jobs/{id}/refund       T6, T7, the buyer          200
//
// Reads (the list and a single bounty) apply lazy expiry. Refusals map to
// status codes by StatusOf: 403 for a caller the rules do not allow (a
// non-buyer, an unregistered worker, self-dealing, the reputation gate, a
// worker who has not claimed), 409 for a move the bounty's state refuses
// (a cancel while judging, a second funding with the same transaction, a
// second refund, a second claim), 429 for the submission limits, 413 for
// content over 50KB, 400 for a malformed request, 404 for an unknown
// bounty, 401 without a caller.
type Server struct {
	Market *Market
	// Background runs the judging of a submission, which the API does not
	// wait for (the lifecycle's oracle thread). Nil runs it in a new
	// goroutine; tests pass a function that queues it.
	Background func(judge func())
	mux        *http.ServeMux
}

// NewServer returns the HTTP API of m.
func NewServer(m *Market) *Server {
	s := &Server{Market: m, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /agents", s.register)
	s.mux.HandleFunc("POST /jobs", s.post)
	s.mux.HandleFunc("GET /jobs", s.list)
	s.mux.HandleFunc("GET /jobs/{id}", s.get)
	s.mux.HandleFunc("POST /jobs/{id}/fund", s.fund)
	s.mux.HandleFunc("POST /jobs/{id}/cancel", s.cancel)
	s.mux.HandleFunc("POST /jobs/{id}/claim", s.claim)
	s.mux.HandleFunc("POST /jobs/{id}/submit", s.submit)
	s.mux.HandleFunc("GET /jobs/{id}/submissions", s.submissions)
	s.mux.HandleFunc("POST /jobs/{id}/refund", s.refund)
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// JobView is a bounty as the API shows it.
type JobView struct {
	ID           uuid.UUID   `json:"id"`
	Status       string      `json:"status"`
	Buyer        string      `json:"buyer_id"`
	Terms        Terms       `json:"terms"`
	Expiry       *time.Time  `json:"expiry,omitempty"`
	Participants []string    `json:"participants"`
	Resolution   *Resolution `json:"resolution,omitempty"`
	RefundTx     string      `json:"refund_tx_hash,omitempty"`
}

// view presents a bounty.
func (s *Server) view(job jobstate.Job) JobView {
	v := JobView{ID: job.ID, Status: string(job.State), Buyer: job.Owner, Participants: s.Market.db.Participants(job.ID)}
	if v.Participants == nil {
		v.Participants = []string{}
	}
	v.Terms, _ = TermsOf(job)
	if !job.Deadline.IsZero() {
		d := job.Deadline
		v.Expiry = &d
	}
	if job.State == Resolved {
		if res, err := ResolutionOf(job); err == nil {
			v.Resolution = &res
		}
	}
	if e, ok := s.Market.db.Escrow(job.ID); ok {
		v.RefundTx = e.RefundTx
	}
	return v
}

// errStatus is an error the handler itself raises, with its status.
type errStatus struct {
	status int
	msg    string
}

// Error returns the message.
func (e *errStatus) Error() string { return e.msg }

// StatusOf maps an error of the market to the status code the API answers
// with.
func StatusOf(err error) int {
	var es *errStatus
	switch {
	case errors.As(err, &es):
		return es.status
	case errors.Is(err, jobstate.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrNotBuyer), errors.Is(err, ErrNotRegistered), errors.Is(err, ErrSelfDealing),
		errors.Is(err, ErrReputation), errors.Is(err, ErrNotParticipant):
		return http.StatusForbidden
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrMaxSubmissions), errors.Is(err, ErrMaxRetries):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrBadDeposit), errors.Is(err, ErrBadTerms):
		return http.StatusBadRequest
	case errors.Is(err, ErrJudging), errors.Is(err, ErrDuplicateDeposit), errors.Is(err, ErrAlreadyJoined),
		errors.Is(err, ErrNotFunded), errors.Is(err, ErrAlreadyRefunded), errors.Is(err, jobstate.ErrEffectApplied),
		errors.Is(err, jobstate.ErrInvalidTransition), errors.Is(err, jobstate.ErrTerminal), errors.Is(err, jobstate.ErrNotClaimable),
		errors.Is(err, jobstate.ErrAlreadyCommitted), errors.Is(err, jobstate.ErrLeaseLost):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// reply writes v as JSON with the status.
func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// replyErr writes err as a JSON error with its status.
func replyErr(w http.ResponseWriter, err error) {
	code := jobstate.Code(err)
	var te *jobstate.TransitionError
	msg := err.Error()
	if errors.As(err, &te) && te.Cause != nil {
		msg = te.Cause.Error()
	}
	reply(w, StatusOf(err), map[string]string{"error": msg, "code": code})
}

// caller returns the request's actor, or an error for a request without
// one.
func caller(r *http.Request) (string, error) {
	a := r.Header.Get(ActorHeader)
	if a == "" {
		return "", &errStatus{http.StatusUnauthorized, "no " + ActorHeader + " header"}
	}
	return a, nil
}

// decode reads the request's JSON body into v.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 2*MaxContentBytes))
	if err != nil {
		return &errStatus{http.StatusBadRequest, err.Error()}
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &errStatus{http.StatusBadRequest, "malformed JSON: " + err.Error()}
	}
	return nil
}

// jobID reads the {id} of the path.
func jobID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, &errStatus{http.StatusNotFound, "no such bounty"}
	}
	return id, nil
}

// actorAndJob reads the caller and the job id of a request.
func actorAndJob(r *http.Request) (string, uuid.UUID, error) {
	a, err := caller(r)
	if err != nil {
		return "", uuid.Nil, err
	}
	id, err := jobID(r)
	return a, id, err
}

// register is POST /agents: the caller registers as a worker.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	a, err := caller(r)
	if err != nil {
		replyErr(w, err)
		return
	}
	s.Market.Register(a)
	ag, _ := s.Market.db.Agent(a)
	reply(w, http.StatusCreated, ag)
}

// postRequest is the body of POST /jobs.
type postRequest struct {
	Terms
	Expiry time.Time `json:"expiry"`
}

// post is POST /jobs: the caller posts a bounty, open until funded.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	a, err := caller(r)
	if err != nil {
		replyErr(w, err)
		return
	}
	var req postRequest
	if err := decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	job, err := s.Market.Post(r.Context(), a, req.Terms, req.Expiry)
	if err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusCreated, s.view(job))
}

// list is GET /jobs, with lazy expiry on every listed bounty.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	jobs, err := s.Market.List(r.Context())
	if err != nil {
		replyErr(w, err)
		return
	}
	out := make([]JobView, len(jobs))
	for i, j := range jobs {
		out[i] = s.view(j)
	}
	reply(w, http.StatusOK, out)
}

// get is GET /jobs/{id}, with lazy expiry.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err == nil {
		var job jobstate.Job
		if job, err = s.Market.Get(r.Context(), id); err == nil {
			reply(w, http.StatusOK, s.view(job))
			return
		}
	}
	replyErr(w, err)
}

// fundRequest is the body of POST /jobs/{id}/fund.
type fundRequest struct {
	TxHash string `json:"tx_hash"`
	From   string `json:"depositor_address"`
}

// fund is POST /jobs/{id}/fund (T1).
func (s *Server) fund(w http.ResponseWriter, r *http.Request) {
	a, id, err := actorAndJob(r)
	var req fundRequest
	if err == nil {
		err = decode(r, &req)
	}
	s.answer(w, r, err, func(ctx context.Context) (jobstate.Job, error) {
		return s.Market.Fund(ctx, id, a, Deposit{TxHash: req.TxHash, From: req.From})
	})
}

// cancel is POST /jobs/{id}/cancel (T2, T5).
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	a, id, err := actorAndJob(r)
	s.answer(w, r, err, func(ctx context.Context) (jobstate.Job, error) { return s.Market.Cancel(ctx, id, a) })
}

// claim is POST /jobs/{id}/claim: the caller joins the participants.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	a, id, err := actorAndJob(r)
	s.answer(w, r, err, func(ctx context.Context) (jobstate.Job, error) { return s.Market.Join(ctx, id, a) })
}

// refund is POST /jobs/{id}/refund (T6, T7).
func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	a, id, err := actorAndJob(r)
	s.answer(w, r, err, func(ctx context.Context) (jobstate.Job, error) { return s.Market.Refund(ctx, id, a) })
}

// answer runs op unless err is set, and replies with the bounty or the
// refusal.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error, op func(context.Context) (jobstate.Job, error)) {
	if err != nil {
		replyErr(w, err)
		return
	}
	job, err := op(r.Context())
	if err != nil {
		replyErr(w, err)
		return
	}
	reply(w, http.StatusOK, s.view(job))
}

// submitRequest is the body of POST /jobs/{id}/submit.
type submitRequest struct {
	Content string `json:"content"`
}

// SubmitReply is the answer to an accepted submission: it is judging.
type SubmitReply struct {
	Submission uuid.UUID `json:"submission_id"`
	Status     string    `json:"status"`
}

// submit is POST /jobs/{id}/submit: the submission is created judging and
// judged in the background.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	a, id, err := actorAndJob(r)
	var req submitRequest
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		replyErr(w, err)
		return
	}
	sub, err := s.Market.Submit(r.Context(), id, a, req.Content)
	if err != nil {
		replyErr(w, err)
		return
	}
	judge := func() { _, _ = s.Market.Judge(context.Background(), sub) }
	if s.Background != nil {
		s.Background(judge)
	} else {
		go judge()
	}
	reply(w, http.StatusAccepted, SubmitReply{Submission: sub.Lease.ExecID, Status: string(Judging)})
}

// SubmissionReply is one submission as GET /jobs/{id}/submissions shows it.
type SubmissionReply struct {
	Worker string `json:"worker_id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// submissions is GET /jobs/{id}/submissions. It reads the bounty first,
// so that an overdue one is expired (and its judging submissions failed).
func (s *Server) submissions(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err == nil {
		_, err = s.Market.Get(r.Context(), id)
	}
	var subs []SubmissionView
	if err == nil {
		subs, err = s.Market.Submissions(r.Context(), id)
	}
	if err != nil {
		replyErr(w, err)
		return
	}
	out := make([]SubmissionReply, len(subs))
	for i, v := range subs {
		out[i] = SubmissionReply{Worker: v.Worker, Status: string(v.Status), Reason: v.Reason}
	}
	reply(w, http.StatusOK, out)
}
