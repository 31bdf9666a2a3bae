package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
)

func TestValidateGoodFiles(t *testing.T) {
	o := runArgs(t, "validate", "testdata/queue.json", "testdata/guarded.json")
	o.wantCode(t, exitOK)
	for _, want := range []string{
		`testdata/queue.json: machine "queue" is valid (6 states, 6 rules)`,
		`testdata/guarded.json: machine "payout" is valid (5 states, 4 rules)`,
		`testdata/guarded.json: names code the service registers: guards "owner_only", "within_quota"`,
	} {
		if !strings.Contains(o.stdout, want+"\n") {
			t.Errorf("stdout lacks %q:\n%s", want, o.stdout)
		}
	}
}

func TestValidatePrintsEveryProblem(t *testing.T) {
	data, err := os.ReadFile("testdata/bad.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = jobstate.ParseDefinition(data, jobstate.Registry{})
	de, ok := err.(*jobstate.DefinitionError)
	if !ok || len(de.Problems) < 5 {
		t.Fatalf("testdata/bad.json should have several problems, got %v", err)
	}
	o := runArgs(t, "validate", "testdata/queue.json", "testdata/bad.json", "testdata/truncated.json")
	o.wantCode(t, exitRefused)
	for _, p := range de.Problems {
		if !strings.Contains(o.stdout, "testdata/bad.json: "+p+"\n") {
			t.Errorf("stdout lacks the problem %q:\n%s", p, o.stdout)
		}
	}
	if got := strings.Count(o.stdout, "testdata/bad.json: "); got != len(de.Problems) {
		t.Errorf("%d lines about bad.json, want %d", got, len(de.Problems))
	}
	if !strings.Contains(o.stdout, "testdata/truncated.json: invalid JSON") {
		t.Errorf("stdout lacks the JSON error:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "2 of 3 file(s) are not valid definitions") {
		t.Errorf("stderr: %s", o.stderr)
	}
}

func TestValidateMissingFile(t *testing.T) {
	o := runArgs(t, "validate", "testdata/absent.json")
	o.wantCode(t, exitRefused)
	if !strings.Contains(o.stdout, "no such file") {
		t.Errorf("stdout: %s", o.stdout)
	}
}

func TestDiagram(t *testing.T) {
	o := runArgs(t, "diagram", "testdata/queue.json")
	o.wantCode(t, exitOK)
	df, err := parseDefinitionFile("testdata/queue.json")
	if err != nil {
		t.Fatal(err)
	}
	if o.stdout != df.def.Mermaid() {
		t.Errorf("diagram differs from the definition's Mermaid:\n%s", o.stdout)
	}
	if !strings.HasPrefix(o.stdout, "stateDiagram-v2\n") || !strings.Contains(o.stdout, "cancel") {
		t.Errorf("not a diagram of the queue machine:\n%s", o.stdout)
	}

	bad := runArgs(t, "diagram", "testdata/bad.json")
	bad.wantCode(t, exitRefused)
	if bad.stdout != "" || !strings.Contains(bad.stderr, "is not a valid definition") {
		t.Errorf("stdout %q, stderr %q", bad.stdout, bad.stderr)
	}
	runArgs(t, "diagram", "testdata/queue.json", "testdata/guarded.json").wantCode(t, exitUsage)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestBadInputIsOneLineAndAnExitCode(t *testing.T) {
	url := "postgres://u:secret@" + closedPort(t) + "/db"
	defs := []string{"--definitions", "testdata/queue.json"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "Usage: jobstate"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"list", "--colour"}, exitUsage, "flag provided but not defined: -colour"},
		{"flag without value", []string{"list", "--machine"}, exitUsage, "flag needs an argument"},
		{"bad limit", []string{"list", "--limit", "0", "--database-url", url}, exitUsage, "--limit 0 is outside"},
		{"malformed id", []string{"get", "not-a-uuid", "--database-url", url}, exitUsage, `malformed job id "not-a-uuid"`},
		{"malformed id of an action", append([]string{"cancel", "12345", "--database-url", url}, defs...), exitUsage, "malformed job id"},
		{"no database", []string{"list"}, exitUsage, "no database: give --database-url or set JOBSTATE_DATABASE_URL"},
		{"bad URL", []string{"list", "--database-url", "postgres://h:notaport/db"}, exitUsage, "bad database URL"},
		{"bad URL scheme", []string{"migrate", "status", "--database-url", "mysql://h/db"}, exitUsage, "bad database URL"},
		{"unknown machine", append([]string{"list", "--machine", "nope", "--database-url", url}, defs...), exitUsage, `unknown machine "nope" (the definitions hold "queue")`},
		{"machine without definitions", []string{"list", "--machine", "queue", "--database-url", url}, exitUsage, "no definitions given"},
		{"unknown state", append([]string{"list", "--machine", "queue", "--state", "QUEUED,LIMBO", "--database-url", url}, defs...), exitUsage, `machine "queue" has no state "LIMBO"`},
		{"unknown state of any machine", append([]string{"cancel", "--state", "LIMBO", "--database-url", url}, defs...), exitUsage, `no registered machine has a state "LIMBO"`},
		{"unknown kind", []string{"list", "--kind", "sleeping", "--database-url", url}, exitUsage, `--kind "sleeping"`},
		{"unknown outcome", []string{"list", "--outcome", "won", "--database-url", url}, exitUsage, `--outcome "won"`},
		{"bad time", []string{"list", "--created-from", "yesterday", "--database-url", url}, exitUsage, `--created-from: "yesterday" is neither`},
		{"empty range", []string{"list", "--created-from", "2026-01-02T00:00:00Z", "--created-to", "2026-01-01T00:00:00Z", "--database-url", url}, exitUsage, "created range ends"},
		{"bad cursor", []string{"list", "--cursor", "xyz", "--database-url", url}, exitUsage, "cursor was not made by List"},
		{"cursor with all", []string{"list", "--cursor", "xyz", "--all", "--database-url", url}, exitUsage, "exclude each other"},
		{"id and filter", append([]string{"cancel", "0190f5e4-8c3b-7a6e-9d1f-2b4c6d8e0f12", "--machine", "queue", "--database-url", url}, defs...), exitUsage, "not both"},
		{"neither id nor filter", append([]string{"redrive", "--yes", "--database-url", url}, defs...), exitUsage, "name a job id, or select jobs"},
		{"action without definitions", []string{"cancel", "--machine", "queue", "--database-url", url}, exitUsage, "no definitions given"},
		{"order on an action", append([]string{"retry", "--machine", "queue", "--order", "updated", "--database-url", url}, defs...), exitUsage, "flag provided but not defined: -order"},
		{"actor with NUL", append([]string{"cancel", "--machine", "queue", "--actor", "a\x00b", "--database-url", url}, defs...), exitUsage, "--actor holds a NUL"},
		{"bad parallel", append([]string{"cancel", "--machine", "queue", "--parallel", "0", "--database-url", url}, defs...), exitUsage, "--parallel 0"},
		{"invalid definition", []string{"list", "--definitions", "testdata/bad.json", "--database-url", url}, exitUsage, "testdata/bad.json is not a valid definition"},
		{"definition twice", []string{"list", "--definitions", "testdata/queue.json", "--definitions", "testdata/queue.json", "--database-url", url}, exitUsage, `machine "queue" is defined twice`},
		{"migrate what", []string{"migrate", "down", "--database-url", url}, exitUsage, "say `migrate up` or `migrate status`"},
		{"unreachable server", []string{"list", "--database-url", url, "--connect-timeout", "2s"}, exitDatabase, "cannot reach the database at 127.0.0.1:"},
		{"unreachable server, migrate", []string{"migrate", "up", "--database-url", url, "--connect-timeout", "2s"}, exitDatabase, "cannot reach the database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := runArgs(t, c.args...)
			if c.name == "no command" {
				if o.code != c.code || !strings.Contains(o.stderr, c.want) {
					t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
				}
				return
			}
			o.wantCode(t, c.code)
			if !strings.Contains(o.stderr, c.want) || !strings.HasPrefix(o.stderr, "jobstate: ") {
				t.Errorf("stderr %q, want it to hold %q", o.stderr, c.want)
			}
			if strings.Contains(o.stderr, "secret") {
				t.Errorf("stderr shows the password: %q", o.stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	o := runArgs(t, "help")
	o.wantCode(t, exitOK)
	last := -1
	for _, c := range commands() {
		at := strings.Index(o.stdout, "  "+c.name+" ")
		if at < 0 {
			t.Errorf("help lacks %s:\n%s", c.name, o.stdout)
			continue
		}
		if at < last {
			t.Errorf("help lists %s out of order:\n%s", c.name, o.stdout)
		}
		last = at
		if got, ok := lookupCommand(c.name); !ok || got.summary != c.summary {
			t.Errorf("command %s not found by its name", c.name)
		}
	}
	h := runArgs(t, "cancel", "-h")
	h.wantCode(t, exitOK)
	if !strings.Contains(h.stdout, "-yes") || !strings.Contains(h.stdout, "-actor") {
		t.Errorf("cancel -h:\n%s", h.stdout)
	}
}

func TestDatabaseURLFromEnvironment(t *testing.T) {
	a, stdout, stderr := testApp(map[string]string{"JOBSTATE_DATABASE_URL": "postgres://u@" + closedPort(t) + "/db"})
	o := runOn(t, a, stdout, stderr, "migrate", "status", "--connect-timeout", "2s")
	o.wantCode(t, exitDatabase)
}

func TestDefaultActor(t *testing.T) {
	a, _, _ := testApp(nil)
	if got := a.defaultActor(); got != "tester@testhost" {
		t.Errorf("default actor %q", got)
	}
	a, _, _ = testApp(map[string]string{"USER": "", "LOGNAME": "ops"})
	if got := a.defaultActor(); got != "ops@testhost" {
		t.Errorf("default actor %q", got)
	}
}

func TestParseInterspersed(t *testing.T) {
	a, _, _ := testApp(nil)
	fs := a.newFlags("get", "ID")
	j := fs.Bool("json", false, "")
	pos, err := parse(fs, []string{"first", "--json", "second", "--", "--third"})
	if err != nil {
		t.Fatal(err)
	}
	if !*j || strings.Join(pos, " ") != "first second --third" {
		t.Errorf("json %v, positional %q", *j, pos)
	}
}

func Example_validate() {
	run(context.Background(), []string{"validate", "testdata/queue.json"}, os.Stdout, os.Stdout)
	// Output:
	// testdata/queue.json: machine "queue" is valid (6 states, 6 rules)
}

func Example_cancelNeedsAFilter() {
	code := run(context.Background(), []string{"cancel", "--yes", "--database-url", "postgres://localhost/jobs", "--definitions", "testdata/queue.json"}, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// jobstate: cancel: name a job id, or select jobs with filters (--machine, --state, ...)
	// exit 2
}

// The command as a process: its exit code and its one line on stderr.
func TestProcessExitCodes(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"validate", "testdata/queue.json"}, exitOK, `machine "queue" is valid`, ""},
		{[]string{"validate", "testdata/bad.json"}, exitRefused, "has no outcome", "jobstate: validate: 1 of 1 file(s) are not valid definitions\n"},
		{[]string{"list", "--nope"}, exitUsage, "", "jobstate: list: flag provided but not defined: -nope\n"},
		{[]string{"get", "x", "--database-url", "postgres://u@" + closedPort(t) + "/db", "--connect-timeout", "2s"}, exitUsage, "", `jobstate: malformed job id "x"`},
		{[]string{"counts", "--definitions", "testdata/queue.json", "--database-url", "postgres://u@" + closedPort(t) + "/db", "--connect-timeout", "2s"}, exitDatabase, "", "jobstate: cannot reach the database at 127.0.0.1:"},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), envRunMain+"=1", "JOBSTATE_DATABASE_URL=", "JOBSTATE_DEFINITIONS=")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.HasPrefix(stderr.String(), c.stderr) || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, code, stdout.String(), stderr.String())
		}
	}
}
