package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// envRunMain, set to 1, makes the test binary run the command's main
// instead of the tests, so that tests can run the command as a process.
const envRunMain = "JOBSTATE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	pgtest.Main(m)
}

// outcome is what one run of the command printed and returned.
type outcome struct {
	code           int
	stdout, stderr string
}

// testApp returns an app writing to buffers, with a fixed environment:
// USER=tester, host "testhost", no JOBSTATE_* variables unless env sets
// them.
func testApp(env map[string]string) (*app, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	a := &app{
		stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "USER" {
				return "tester"
			}
			return ""
		},
		hostname: func() (string, error) { return "testhost", nil },
	}
	return a, &stdout, &stderr
}

// runArgs runs the command line on a fresh test app.
func runArgs(t *testing.T, args ...string) outcome {
	t.Helper()
	a, stdout, stderr := testApp(nil)
	return runOn(t, a, stdout, stderr, args...)
}

func runOn(t *testing.T, a *app, stdout, stderr *bytes.Buffer, args ...string) outcome {
	t.Helper()
	code := a.run(context.Background(), args)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantCode fails the test unless the run ended with code; a failing run
// must have written exactly one line on stderr.
func (o outcome) wantCode(t *testing.T, code int) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
	}
	if code != exitOK {
		if n := strings.Count(o.stderr, "\n"); n != 1 || !strings.HasSuffix(o.stderr, "\n") {
			t.Fatalf("stderr holds %d lines, want one:\n%s", n, o.stderr)
		}
	}
}

// db is a migrated schema of the test binary's PostgreSQL server, with an
// engine over it that knows the test definitions (their guards allow,
// their effects do nothing), for setting jobs up and checking them.
type db struct {
	url, schema string
	pool        *pgxpool.Pool
	eng         *jobstate.Engine
	flags       []string // --database-url, --schema, --definitions
}

// newDB returns a fresh migrated schema.
func newDB(t *testing.T) *db {
	t.Helper()
	cluster, pool := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	var defs []*jobstate.Definition
	for _, f := range []string{"testdata/queue.json", "testdata/guarded.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code := scanCodeNames(data)
		reg := jobstate.Registry{Guards: map[string]jobstate.Guard{}}
		for _, g := range code.guards {
			reg.Guards[g] = func(context.Context, jobstate.GuardInput) error { return nil }
		}
		def, err := jobstate.ParseDefinition(data, reg)
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, def)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(defs...))
	if err != nil {
		t.Fatal(err)
	}
	return &db{
		url: cluster.URL, schema: schema, pool: pool, eng: eng,
		flags: []string{"--database-url", cluster.URL, "--schema", schema, "--definitions", "testdata/queue.json", "--definitions", "testdata/guarded.json"},
	}
}

// run runs a command with the database's flags after args.
func (d *db) run(t *testing.T, args ...string) outcome {
	t.Helper()
	return runArgs(t, append(args, d.flags...)...)
}

// create makes n jobs of machine.
func (d *db) create(t *testing.T, machine string, n int) []jobstate.Job {
	t.Helper()
	var out []jobstate.Job
	for len(out) < n {
		batch := make([]jobstate.NewJob, min(1000, n-len(out)))
		for i := range batch {
			batch[i] = jobstate.NewJob{Machine: machine, Payload: []byte("p"), Owner: "acme"}
		}
		created, err := d.eng.CreateMany(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range created {
			out = append(out, c.Job)
		}
	}
	return out
}

// fail claims the job and fails it, permanently or to be retried.
func (d *db) fail(t *testing.T, job jobstate.Job, permanent bool) jobstate.Job {
	t.Helper()
	ctx := context.Background()
	c, err := d.eng.ClaimJob(ctx, job.ID, jobstate.ClaimRequest{Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	cause := jobstate.Retryable(errString("transient"))
	if permanent {
		cause = jobstate.Permanent(errString("broken input"))
	}
	out, err := d.eng.Fail(ctx, c.Lease, cause)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type errString string

func (e errString) Error() string { return string(e) }

// histories reads the history of every job, a few at a time.
func (d *db) histories(t *testing.T, jobs []jobstate.Job) [][]jobstate.Transition {
	t.Helper()
	out := make([][]jobstate.Transition, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = d.eng.History(context.Background(), jobs[i].ID)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
