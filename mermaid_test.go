package jobstate_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/mermaid")

// TestMermaid compares Definition.Mermaid with testdata/mermaid/<name>.mmd.
// Run `go test -run TestMermaid -update` to rewrite the golden files.
func TestMermaid(t *testing.T) {
	cases := []struct {
		name string
		def  func(t *testing.T) *jobstate.Definition
	}{
		{"queue", func(*testing.T) *jobstate.Definition { return machines.Queue() }},
		{"review", mermaidReviewMachine},
		{"names", mermaidNamesMachine},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def := c.def(t)
			got := def.Mermaid()
			if again := def.Mermaid(); again != got {
				t.Fatalf("Mermaid is not deterministic:\n%s", mermaidDiff(got, again))
			}
			path := filepath.Join("testdata", "mermaid", c.name+".mmd")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run `go test -run TestMermaid -update` to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Mermaid() of %q differs from %s (-want +got; run `go test -run TestMermaid -update` if the change is intended):\n%s",
					def.Name(), path, mermaidDiff(string(want), got))
			}
		})
	}
}

// TestMermaidShape checks properties of the output that the golden files
// only show: one edge per (from, rule), aliases for awkward names, guards.
func TestMermaidShape(t *testing.T) {
	out := mermaidReviewMachine(t).Mermaid()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "stateDiagram-v2" {
		t.Fatalf("first line = %q, want stateDiagram-v2", lines[0])
	}
	firstEdge := ""
	for _, l := range lines {
		if strings.Contains(l, "-->") {
			firstEdge = strings.TrimSpace(l)
			break
		}
	}
	if firstEdge != "[*] --> draft" {
		t.Errorf("first edge = %q, want [*] --> draft", firstEdge)
	}
	for _, want := range []string{
		`state "dead letter" as s6`,
		`state "a-b#58;c" as s1`,
		`draft --> s1 : submit [has_payload]`,
		`draft --> rejected : submit`,
		`draft --> withdrawn : cancel [guard]`,
		`s1 --> withdrawn : cancel [guard]`,
		`backoff --> withdrawn : cancel [guard]`,
		`s6 --> [*]`,
		`class s6 terminal`,
		`class s6 outcome_dead_lettered`,
	} {
		if !mermaidHasLine(lines, want) {
			t.Errorf("output has no line %q:\n%s", want, out)
		}
	}
	edges := 0
	for _, l := range lines {
		if strings.Contains(l, "-->") && !strings.Contains(l, "[*]") {
			edges++
		}
	}
	if want := 11; edges != want {
		t.Errorf("%d rule edges, want %d (one per from state and rule)", edges, want)
	}
}

func mermaidHasLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// mermaidReviewMachine has guarded rules, a guarded rule with an unguarded
// fallback, a rule with several From states and state names that are not
// Mermaid identifiers.
func mermaidReviewMachine(t *testing.T) *jobstate.Definition {
	t.Helper()
	const (
		draft     jobstate.State = "draft"
		waiting   jobstate.State = "a-b:c"
		reviewing jobstate.State = "reviewing"
		backoff   jobstate.State = "backoff"
		approved  jobstate.State = "approved"
		rejected  jobstate.State = "rejected"
		dead      jobstate.State = "dead letter"
		withdrawn jobstate.State = "withdrawn"
	)
	allow := func(context.Context, jobstate.GuardInput) error { return nil }
	hasPayload := func(_ context.Context, in jobstate.GuardInput) error {
		if len(in.Job.Payload) == 0 {
			return errors.New("empty payload")
		}
		return nil
	}
	d, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "review",
		States: []jobstate.StateSpec{
			{Name: draft, Kind: jobstate.KindInitial, Description: "written, not yet submitted"},
			{Name: waiting, Kind: jobstate.KindReady, Description: "queue: waiting for a reviewer; #1 first"},
			{Name: reviewing, Kind: jobstate.KindActive, Description: "a reviewer holds the lease"},
			{Name: backoff, Kind: jobstate.KindWaiting},
			{Name: approved, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: rejected, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
			{Name: dead, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeDeadLettered, Description: "retries spent"},
			{Name: withdrawn, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{draft}, Event: "submit", To: waiting, Guard: hasPayload, GuardName: "has_payload"},
			{From: []jobstate.State{draft}, Event: "submit", To: rejected},
			{From: []jobstate.State{waiting}, Event: jobstate.EventClaim, To: reviewing},
			{From: []jobstate.State{reviewing}, Event: jobstate.EventSucceed, To: approved},
			{From: []jobstate.State{reviewing}, Event: jobstate.EventRetry, To: backoff},
			{From: []jobstate.State{reviewing}, Event: jobstate.EventFail, To: dead},
			{From: []jobstate.State{backoff}, Event: jobstate.EventRequeue, To: waiting},
			{From: []jobstate.State{draft, waiting, backoff}, Event: jobstate.EventCancel, To: withdrawn, Guard: allow},
			{From: []jobstate.State{waiting}, Event: "reject", To: rejected, Guard: allow, GuardName: "owner_only"},
		},
		Policy: jobstate.Policy{Retry: jobstate.RetryPolicy{MaxRetries: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mermaidNamesMachine has state names that clash with Mermaid's keywords, its own
// node ids, the alias scheme, and characters its syntax gives a meaning.
func mermaidNamesMachine(t *testing.T) *jobstate.Definition {
	t.Helper()
	const (
		s1      jobstate.State = "s1"
		dir     jobstate.State = "direction LR"
		quoted  jobstate.State = `say "hi" <<fork>> 100%`
		def     jobstate.State = "default"
		fork    jobstate.State = "[[fork]]; end"
		rootEnd jobstate.State = "root_end"
		expired jobstate.State = "état"
		state   jobstate.State = "state"
	)
	d, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "names",
		States: []jobstate.StateSpec{
			{Name: s1, Kind: jobstate.KindInitial, Description: "line one\nline two"},
			{Name: dir, Kind: jobstate.KindReady, Description: "set direction TB"},
			{Name: quoted, Kind: jobstate.KindActive},
			{Name: def, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: fork, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
			{Name: rootEnd, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeCancelled},
			{Name: expired, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeExpired},
			{Name: state, Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeRejected},
		},
		Rules: []jobstate.Rule{
			{From: []jobstate.State{s1}, Event: "go: now", To: dir},
			{From: []jobstate.State{s1}, Event: "refuse", To: state},
			{From: []jobstate.State{dir}, Event: jobstate.EventClaim, To: quoted},
			{From: []jobstate.State{quoted}, Event: jobstate.EventSucceed, To: def},
			{From: []jobstate.State{quoted}, Event: jobstate.EventFail, To: fork},
			{From: []jobstate.State{s1, dir}, Event: jobstate.EventCancel, To: rootEnd, GuardName: "a;b #c"},
			{From: []jobstate.State{s1, dir, quoted}, Event: jobstate.EventExpire, To: expired},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mermaidDiff describes how got differs from want, line by line: lines only
// in want are marked "-", lines only in got "+", common lines " ".
func mermaidDiff(want, got string) string {
	a := strings.Split(want, "\n")
	b := strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(&sb, "  %s\n", a[i])
			i++
			j++
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+ %q\n", b[j])
			j++
		default:
			fmt.Fprintf(&sb, "- %q\n", a[i])
			i++
		}
	}
	return sb.String()
}
