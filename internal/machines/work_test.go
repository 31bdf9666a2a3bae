package machines

import (
	"testing"
	"time"

	"github.com/jobstate/jobstate"
)

func TestWorkSpecDefaults(t *testing.T) {
	s := WorkSpec("w")
	if s.Name != "w" || s.Initial != WQueued {
		t.Fatalf("name %q, initial %q", s.Name, s.Initial)
	}
	if s.Policy.LeaseTTL != time.Minute || s.Policy.Retry.MaxRetries != 3 {
		t.Fatalf("lease %v, retries %d; want a minute and 3", s.Policy.LeaseTTL, s.Policy.Retry.MaxRetries)
	}
	for _, r := range s.Rules {
		if r.Event == jobstate.EventAbandon {
			t.Fatalf("abandon rule %v without WorkAbandoning", r)
		}
	}
}

func TestWorkSpecOptions(t *testing.T) {
	s := WorkSpec("w", WorkLease(time.Second), WorkRetries(jobstate.Unlimited), WorkAbandoning())
	if s.Policy.LeaseTTL != time.Second || s.Policy.Retry.MaxRetries != jobstate.Unlimited {
		t.Fatalf("lease %v, retries %d", s.Policy.LeaseTTL, s.Policy.Retry.MaxRetries)
	}
	def, err := jobstate.NewDefinition(s)
	if err != nil {
		t.Fatal(err)
	}
	var events []jobstate.Event
	for _, r := range s.Rules {
		events = append(events, r.Event)
	}
	want := []jobstate.Event{jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventAbandon, jobstate.EventFail}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %v, want %v", events, want)
		}
	}
	if def.Name() != "w" {
		t.Fatalf("definition named %q", def.Name())
	}
	// The options change only the machine they are given to.
	if d := WorkSpec("w"); len(d.Rules) != 4 || d.Policy.LeaseTTL != time.Minute {
		t.Fatalf("default machine changed: %d rules, lease %v", len(d.Rules), d.Policy.LeaseTTL)
	}
}
