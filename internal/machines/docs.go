// Package machines holds the definitions of the five example lifecycles, shared
// by the library's own tests, the conformance suite and the benchmarks.
package machines

import (
	"time"

	"github.com/jobstate/jobstate"
)

// Document processing (document processing) states.
const (
	Created   jobstate.State = "CREATED"
	Queued    jobstate.State = "QUEUED"
	Running   jobstate.State = "RUNNING"
	Retrying  jobstate.State = "RETRYING"
	Succeeded jobstate.State = "SUCCEEDED"
	Failed    jobstate.State = "FAILED"
)

// Submit is document processing's submission event (CREATED → QUEUED).
const Submit jobstate.Event = "submit"

// DocsSpec is document processing's document processing machine: max 3 retries with a
// fixed 1 s backoff; cancellation (out of band in the lifecycle) ends in FAILED.
func DocsSpec() jobstate.Spec {
	return jobstate.Spec{
		Name: "docs",
		States: []jobstate.StateSpec{
			{Name: Created, Kind: jobstate.KindInitial, Description: "created, not yet submitted"},
			{Name: Queued, Kind: jobstate.KindReady, Description: "waiting in the processing queue"},
			{Name: Running, Kind: jobstate.KindActive, Description: "being processed"},
			{Name: Retrying, Kind: jobstate.KindWaiting, Description: "scheduled for retry"},
			{Name: Succeeded, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: Failed, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{Created}, Event: Submit, To: Queued},
			{From: []jobstate.State{Queued}, Event: jobstate.EventClaim, To: Running},
			{From: []jobstate.State{Running}, Event: jobstate.EventSucceed, To: Succeeded},
			{From: []jobstate.State{Running}, Event: jobstate.EventFail, To: Failed},
			{From: []jobstate.State{Running}, Event: jobstate.EventRetry, To: Retrying},
			{From: []jobstate.State{Retrying}, Event: jobstate.EventRequeue, To: Queued},
			{From: []jobstate.State{Queued}, Event: jobstate.EventCancel, To: Failed},
		},
		Policy: jobstate.Policy{
			LeaseTTL: 30 * time.Second,
			Retry:    jobstate.RetryPolicy{MaxRetries: 3, Backoff: jobstate.FixedBackoff(time.Second)},
		},
	}
}

// Docs returns document processing's machine as a validated Definition.
func Docs() *jobstate.Definition {
	d, err := jobstate.NewDefinition(DocsSpec())
	if err != nil {
		panic(err) // the spec is a constant of this package
	}
	return d
}
