package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// api is the marketplace's HTTP API under test, served by httptest, with
// the background judging queued until the test runs it.
type api struct {
	*world
	srv     *httptest.Server
	mu      sync.Mutex
	pending []func()
}

// newAPI serves a fresh world's market over HTTP.
func newAPI(t *testing.T) *api {
	a := &api{world: newWorld(t)}
	s := NewServer(a.m)
	s.Background = func(judge func()) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.pending = append(a.pending, judge)
	}
	a.srv = httptest.NewServer(s)
	t.Cleanup(a.srv.Close)
	return a
}

// judgeAll runs the queued background judging.
func (a *api) judgeAll() {
	a.mu.Lock()
	p := a.pending
	a.pending = nil
	a.mu.Unlock()
	for _, judge := range p {
		judge()
	}
}

// do sends a request as actor ("" for none) with body encoded as JSON, and
// returns the status and the decoded reply.
func (a *api) do(method, path, actor string, body any) (int, map[string]any) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, r)
	require.NoError(a.t, err)
	if actor != "" {
		req.Header.Set(ActorHeader, actor)
	}
	res, err := a.srv.Client().Do(req)
	require.NoError(a.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(a.t, err)
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(a.t, json.Unmarshal(raw, &out))
	} else {
		out = map[string]any{"raw": string(raw)}
	}
	return res.StatusCode, out
}

// postBounty posts a bounty as the buyer over HTTP and returns its id.
func (a *api) postBounty(expiry time.Time) string {
	a.t.Helper()
	code, body := a.do("POST", "/jobs", buyerName, map[string]any{"title": "say hello", "reward": reward, "rubric": []string{pass}, "expiry": expiry})
	require.Equal(a.t, http.StatusCreated, code, body)
	require.Equal(a.t, "open", body["status"])
	id := body["id"].(string)
	a.world.mu.Lock()
	a.world.jobs = append(a.world.jobs, mustID(a.t, id))
	a.world.mu.Unlock()
	return id
}

// fundBounty funds a bounty as the buyer over HTTP.
func (a *api) fundBounty(id string) {
	a.t.Helper()
	d := a.deposit()
	code, body := a.do("POST", "/jobs/"+id+"/fund", buyerName, map[string]string{"tx_hash": d.TxHash, "depositor_address": d.From})
	require.Equal(a.t, http.StatusOK, code, body)
	require.Equal(a.t, "funded", body["status"])
}

// TestHTTPAPI serves the lifecycle's endpoints through a real net/http
// handler and checks each answer's status code: the success codes, 403 for
// a caller the rules do not allow, 409 for a move the bounty's state
// refuses (a cancel while judging among them), 429 for the submission
// limits, 413 for content over 50KB, 400 for a malformed request, 404 for
// an unknown bounty, 401 without a caller.
func TestHTTPAPI(t *testing.T) {
	t.Run("POST_/agents_registers_the_caller_201", func(t *testing.T) {
		a := newAPI(t)
		code, body := a.do("POST", "/agents", "zoe", nil)
		assert.Equal(t, http.StatusCreated, code)
		assert.Equal(t, "zoe", body["Name"])
		_, ok := a.db.Agent("zoe")
		assert.True(t, ok)
		code, _ = a.do("POST", "/agents", "", nil)
		assert.Equal(t, http.StatusUnauthorized, code, "no caller")
	})
	t.Run("POST_/jobs_posts_an_open_bounty_201_or_400", func(t *testing.T) {
		a := newAPI(t)
		a.postBounty(time.Time{})
		code, _ := a.do("POST", "/jobs", buyerName, map[string]any{"title": "free work", "reward": 0})
		assert.Equal(t, http.StatusBadRequest, code, "invalid terms")
		req, err := http.NewRequest("POST", a.srv.URL+"/jobs", strings.NewReader("{not json"))
		require.NoError(t, err)
		req.Header.Set(ActorHeader, buyerName)
		res, err := a.srv.Client().Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "malformed JSON")
	})
	t.Run("T1_fund_200_403_for_a_non_buyer_400_409", func(t *testing.T) {
		a := newAPI(t)
		id, other := a.postBounty(time.Time{}), a.postBounty(time.Time{})
		d := a.deposit()
		deposit := map[string]string{"tx_hash": d.TxHash, "depositor_address": d.From}
		before := a.snap(mustID(t, id))
		code, _ := a.do("POST", "/jobs/"+id+"/fund", "mallory", deposit)
		assert.Equal(t, http.StatusForbidden, code, "only the buyer funds")
		code, _ = a.do("POST", "/jobs/"+id+"/fund", buyerName, map[string]string{"tx_hash": "nope", "depositor_address": d.From})
		assert.Equal(t, http.StatusBadRequest, code, "an invalid deposit")
		assert.Equal(t, before, a.snap(mustID(t, id)), "refusals change nothing")
		code, body := a.do("POST", "/jobs/"+id+"/fund", buyerName, deposit)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "funded", body["status"])
		code, _ = a.do("POST", "/jobs/"+other+"/fund", buyerName, deposit)
		assert.Equal(t, http.StatusConflict, code, "the tx hash funded a bounty already (UNIQUE)")
		code, _ = a.do("POST", "/jobs/"+id+"/fund", buyerName, map[string]string{"tx_hash": "0xabc", "depositor_address": d.From})
		assert.Equal(t, http.StatusConflict, code, "only an open bounty is funded")
	})
	t.Run("GET_/jobs/{id}_200_404", func(t *testing.T) {
		a := newAPI(t)
		id := a.postBounty(time.Time{})
		code, body := a.do("GET", "/jobs/"+id, "", nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, id, body["id"])
		assert.Equal(t, buyerName, body["buyer_id"])
		code, _ = a.do("GET", "/jobs/0190c4c4-0000-7000-8000-000000000000", "", nil)
		assert.Equal(t, http.StatusNotFound, code)
		code, _ = a.do("GET", "/jobs/not-an-id", "", nil)
		assert.Equal(t, http.StatusNotFound, code)
	})
	t.Run("claim_then_submit_200_202_403_409_413", func(t *testing.T) {
		a := newAPI(t)
		a.m.Register(buyerName)
		id := a.postBounty(time.Time{})
		code, _ := a.do("POST", "/jobs/"+id+"/claim", "alice", nil)
		assert.Equal(t, http.StatusConflict, code, "an open bounty cannot be claimed")
		a.fundBounty(id)
		code, _ = a.do("POST", "/jobs/"+id+"/claim", "zoe", nil)
		assert.Equal(t, http.StatusForbidden, code, "not registered")
		code, _ = a.do("POST", "/jobs/"+id+"/claim", buyerName, nil)
		assert.Equal(t, http.StatusForbidden, code, "no self-dealing")
		code, _ = a.do("POST", "/jobs/"+id+"/submit", "alice", map[string]string{"content": pass})
		assert.Equal(t, http.StatusForbidden, code, "a worker submits after claiming")
		code, body := a.do("POST", "/jobs/"+id+"/claim", "alice", nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, []any{"alice"}, body["participants"])
		code, _ = a.do("POST", "/jobs/"+id+"/claim", "alice", nil)
		assert.Equal(t, http.StatusConflict, code, "claimed already")
		code, _ = a.do("POST", "/jobs/"+id+"/submit", "alice", map[string]string{"content": strings.Repeat("a", MaxContentBytes+1)})
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "over 50KB")
		code, body = a.do("POST", "/jobs/"+id+"/submit", "alice", map[string]string{"content": pass})
		assert.Equal(t, http.StatusAccepted, code)
		assert.Equal(t, "judging", body["status"])
		assert.NotEmpty(t, body["submission_id"])
		assert.Equal(t, []string{"alice judging"}, a.statuses(mustID(t, id)), "judged in the background, not yet")
		a.judgeAll()
		code, body = a.do("GET", "/jobs/"+id, "", nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "resolved", body["status"])
		assert.Equal(t, "alice", body["resolution"].(map[string]any)["winner_id"])
		code, _ = a.do("POST", "/jobs/"+id+"/submit", "alice", map[string]string{"content": pass})
		assert.Equal(t, http.StatusConflict, code, "a resolved bounty takes no submission")
	})
	t.Run("submission_limits_429", func(t *testing.T) {
		a := newAPI(t)
		id := a.postBounty(time.Time{})
		a.fundBounty(id)
		code, _ := a.do("POST", "/jobs/"+id+"/claim", "bob", nil)
		require.Equal(t, http.StatusOK, code)
		for i := 0; i < 1+DefaultMaxRetries; i++ {
			code, _ := a.do("POST", "/jobs/"+id+"/submit", "bob", map[string]string{"content": fail})
			require.Equal(t, http.StatusAccepted, code)
			a.judgeAll()
		}
		code, body := a.do("POST", "/jobs/"+id+"/submit", "bob", map[string]string{"content": pass})
		assert.Equal(t, http.StatusTooManyRequests, code, "max retries per worker")
		assert.Equal(t, "guard_refused", body["code"])
	})
	t.Run("T2_T5_cancel_200_403_for_a_non_buyer_409_while_judging", func(t *testing.T) {
		a := newAPI(t)
		id := a.postBounty(time.Time{})
		a.fundBounty(id)
		code, _ := a.do("POST", "/jobs/"+id+"/claim", "carol", nil)
		require.Equal(t, http.StatusOK, code)
		code, _ = a.do("POST", "/jobs/"+id+"/submit", "carol", map[string]string{"content": fail})
		require.Equal(t, http.StatusAccepted, code)
		before := a.snap(mustID(t, id))
		code, _ = a.do("POST", "/jobs/"+id+"/cancel", "mallory", nil)
		assert.Equal(t, http.StatusForbidden, code, "only the buyer cancels")
		code, body := a.do("POST", "/jobs/"+id+"/cancel", buyerName, nil)
		assert.Equal(t, http.StatusConflict, code, "cancel while judging")
		assert.Contains(t, body["error"], "being judged")
		assert.Equal(t, before, a.snap(mustID(t, id)))
		a.judgeAll()
		code, body = a.do("POST", "/jobs/"+id+"/cancel", buyerName, nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "cancelled", body["status"])
		code, _ = a.do("POST", "/jobs/"+id+"/cancel", buyerName, nil)
		assert.Equal(t, http.StatusConflict, code, "cancelled already")
	})
	t.Run("T6_T7_refund_200_403_409", func(t *testing.T) {
		a := newAPI(t)
		id := a.postBounty(epoch.Add(time.Hour))
		a.fundBounty(id)
		code, _ := a.do("POST", "/jobs/"+id+"/refund", buyerName, nil)
		assert.Equal(t, http.StatusConflict, code, "a funded bounty is not refunded")
		a.clock.Advance(time.Hour)
		code, _ = a.do("POST", "/jobs/"+id+"/refund", "mallory", nil)
		assert.Equal(t, http.StatusForbidden, code, "only the buyer is refunded")
		code, body := a.do("POST", "/jobs/"+id+"/refund", buyerName, nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "expired", body["status"], "the refund is not a state")
		assert.Equal(t, "off-chain", body["refund_tx_hash"])
		code, _ = a.do("POST", "/jobs/"+id+"/refund", buyerName, nil)
		assert.Equal(t, http.StatusConflict, code, "refunded once")
		open := a.postBounty(time.Time{})
		code, _ = a.do("POST", "/jobs/"+open+"/cancel", buyerName, nil)
		require.Equal(t, http.StatusOK, code)
		code, _ = a.do("POST", "/jobs/"+open+"/refund", buyerName, nil)
		assert.Equal(t, http.StatusConflict, code, "never funded: nothing to refund")
	})
	t.Run("T4_GET_/jobs_and_GET_/jobs/{id}_expire_lazily", func(t *testing.T) {
		a := newAPI(t)
		listed, read := a.postBounty(epoch.Add(time.Hour)), a.postBounty(epoch.Add(time.Hour))
		a.fundBounty(listed)
		a.fundBounty(read)
		a.clock.Advance(time.Hour)
		require.Equal(t, Funded, a.snap(mustID(t, listed)).Job.State)
		code, body := a.do("GET", "/jobs/"+read, "", nil)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "expired", body["status"])
		req, err := http.NewRequest("GET", a.srv.URL+"/jobs", nil)
		require.NoError(t, err)
		res, err := a.srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		var jobs []JobView
		require.NoError(t, json.NewDecoder(res.Body).Decode(&jobs))
		require.Len(t, jobs, 2)
		for _, j := range jobs {
			assert.Equal(t, "expired", j.Status)
		}
		assert.Equal(t, Expired, a.snap(mustID(t, listed)).Job.State, "listing expired it")
	})
	t.Run("StatusOf_maps_every_refusal", func(t *testing.T) {
		for err, want := range map[error]int{
			jobstate.ErrNotFound: 404, ErrNotBuyer: 403, ErrNotRegistered: 403, ErrSelfDealing: 403, ErrReputation: 403,
			ErrNotParticipant: 403, ErrJudging: 409, ErrAlreadyJoined: 409, ErrDuplicateDeposit: 409, ErrNotFunded: 409,
			jobstate.ErrEffectApplied: 409, jobstate.ErrTerminal: 409, jobstate.ErrNotClaimable: 409, ErrTooLarge: 413,
			ErrMaxSubmissions: 429, ErrMaxRetries: 429, ErrBadDeposit: 400, ErrBadTerms: 400, io.ErrUnexpectedEOF: 500,
		} {
			assert.Equal(t, want, StatusOf(err), "%v", err)
		}
	})
}

// mustID parses a bounty id from a reply.
func mustID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}
