package ui_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
	"github.com/jobstate/jobstate/ui"
)

// Example mounts the interface under /admin/jobs on a service's own mux,
// allowing actions to the operators the service's own authentication
// recognises.
func Example() {
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "DONE", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: "CANCELLED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "DONE"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
			{From: []jobstate.State{"QUEUED", "RUNNING"}, Event: jobstate.EventCancel, To: "CANCELLED"},
		},
		Policy: jobstate.Policy{RedriveFrom: []jobstate.State{"FAILED"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	engine, err := jobstate.New(memstore.New(), jobstate.WithMachines(def))
	if err != nil {
		log.Fatal(err)
	}
	h, err := ui.New(ui.Options{
		Engine:   engine,
		Machines: []string{"queue"},
		Prefix:   "/admin/jobs",
		Authorize: func(r *http.Request, action string, job jobstate.Job) (string, bool) {
			// The service's authentication: here a header a proxy sets.
			user := r.Header.Get("X-Operator")
			return user, user != ""
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", http.StripPrefix("/admin/jobs", h))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/jobs/", nil))
	fmt.Println(rec.Code, rec.Header().Get("X-Content-Type-Options"))
	// Output: 200 nosniff
}
