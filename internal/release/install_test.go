package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// serviceMain is a small service as a user writes it: it creates a job on
// pgstore, runs the worker runtime (with OpenTelemetry's handler and
// observer) until the job has finished, and prints the job's state.
const serviceMain = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate"
	jobstateotel "github.com/jobstate/jobstate/otel"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/worker"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: service DATABASE_URL SCHEMA")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, schema string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema}); err != nil {
		return err
	}
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	defer store.Close()
	tel, err := jobstateotel.New()
	if err != nil {
		return err
	}
	def, err := jobstate.NewDefinition(jobstate.Spec{
		Name: "queue",
		States: []jobstate.StateSpec{
			{Name: "QUEUED", Kind: jobstate.KindReady},
			{Name: "RUNNING", Kind: jobstate.KindActive},
			{Name: "SUCCEEDED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded},
			{Name: "FAILED", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed},
		},
		Initial: "QUEUED",
		Rules: []jobstate.Rule{
			{From: []jobstate.State{"QUEUED"}, Event: jobstate.EventClaim, To: "RUNNING"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventSucceed, To: "SUCCEEDED"},
			{From: []jobstate.State{"RUNNING"}, Event: jobstate.EventFail, To: "FAILED"},
		},
	})
	if err != nil {
		return err
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithObserver(tel.Observer()))
	if err != nil {
		return err
	}
	created, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Payload: []byte("report.pdf")})
	if err != nil {
		return err
	}
	handler := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
		return jobstate.CommitInput{Result: append([]byte("processed "), t.Job().Payload...)}, nil
	})
	w, err := worker.New(eng, worker.WithName("service-1"), worker.Handle("queue", tel.WrapHandler(handler), 1))
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	giveUp := time.After(2 * time.Minute)
	for {
		job, err := eng.Get(ctx, created.Job.ID)
		if err != nil {
			return err
		}
		if job.Terminal() {
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			fmt.Printf("job %s: %s, result %q\n", job.ID, job.State, job.Result)
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("the worker stopped before the job finished: %v", err)
		case <-giveUp:
			return fmt.Errorf("job %s still %s after two minutes", job.ID, job.State)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
`

// allowedRequirements are the modules a service using jobstate, pgstore
// and otel may require after go mod tidy: jobstate's modules, uuid, btree
// (memstore's, in the root module), pgx and its requirements, and
// OpenTelemetry and its requirements.
var allowedRequirements = []string{
	"github.com/jobstate/jobstate",
	"github.com/jobstate/jobstate/pgstore",
	"github.com/jobstate/jobstate/otel",
	"github.com/google/uuid",
	"github.com/google/btree",
	"github.com/jackc/pgx/v5",
	"github.com/jackc/pgpassfile",
	"github.com/jackc/pgservicefile",
	"github.com/jackc/puddle/v2",
	"golang.org/x/crypto",
	"golang.org/x/sync",
	"golang.org/x/text",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/metric",
	"go.opentelemetry.io/otel/trace",
	"go.opentelemetry.io/auto/sdk",
	"github.com/go-logr/logr",
	"github.com/go-logr/stdr",
	"golang.org/x/sys",
}

// testOnlyPackages are the prefixes of packages that only jobstate's own
// tests use: a user's build must have none of them.
var testOnlyPackages = []string{
	"github.com/stretchr/testify",
	"pgregory.net/rapid",
	"github.com/santhosh-tekuri/jsonschema",
	"go.uber.org/goleak",
}

// testOnlyModules are the modules only tests need: the libraries
// jobstate's tests use, and the Store suite and conformance vectors a
// store's tests import. No module of jobstate's that a user imports may
// require one.
var testOnlyModules = []string{
	"github.com/stretchr/testify",
	"pgregory.net/rapid",
	"github.com/santhosh-tekuri/jsonschema/v6",
	"go.uber.org/goleak",
	"github.com/jobstate/jobstate/storetest",
	"github.com/jobstate/jobstate/conformance",
}

// libraryModules are the modules of jobstate's libraries.
var libraryModules = []string{
	"github.com/jobstate/jobstate",
	"github.com/jobstate/jobstate/pgstore",
	"github.com/jobstate/jobstate/sqlitestore",
	"github.com/jobstate/jobstate/otel",
}

// libsMain imports every package of jobstate's libraries.
const libsMain = `package main

import (
	_ "github.com/jobstate/jobstate"
	_ "github.com/jobstate/jobstate/memstore"
	_ "github.com/jobstate/jobstate/otel"
	_ "github.com/jobstate/jobstate/pgstore"
	_ "github.com/jobstate/jobstate/sqlitestore"
	_ "github.com/jobstate/jobstate/worker"
)

func main() {}
`

// checkGraph fails t for each requirement, in the output of go mod graph,
// of a jobstate module on a test-only module (testOnlyModules), and for
// each test-only module of jobstate's in the graph at all. (The graph
// holds the requirements of every module's go.mod: other libraries'
// own test dependencies, such as those pgx's and OpenTelemetry's go.mod
// list, stay in it and are logged.)
func checkGraph(t *testing.T, graph string) {
	t.Helper()
	testOnly := func(p string) bool {
		for _, m := range testOnlyModules {
			if p == m {
				return true
			}
		}
		return false
	}
	others := make(map[string]bool)
	for _, line := range strings.Split(graph, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		from, _, _ := strings.Cut(f[0], "@")
		to, _, _ := strings.Cut(f[1], "@")
		switch {
		case strings.HasPrefix(to, "github.com/jobstate/") && testOnly(to):
			t.Errorf("the module graph holds %s (required by %s), a module only tests need", f[1], f[0])
		case strings.HasPrefix(from, "github.com/jobstate/") && testOnly(to):
			t.Errorf("%s requires %s, a module only tests need", f[0], f[1])
		case testOnly(to):
			others[f[0]+" -> "+f[1]] = true
		}
	}
	var edges []string
	for e := range others {
		edges = append(edges, e)
	}
	sort.Strings(edges)
	t.Logf("test-only modules other libraries' go.mod files require:\n  %s", strings.Join(edges, "\n  "))
}

// What the release test would meet if the check let a stray replace
// through: the go command refuses to install the jobstate command from a
// proxy whose cmd/jobstate has a replace directive. (A missing
// requirement is no such failure: go install looks the module up at its
// latest version, which only the check refuses.)
func TestInstallRefusesAStrayReplace(t *testing.T) {
	root := copyTree(t)
	editFile(t, filepath.Join(root, "cmd", "jobstate", "go.mod"), "\nrequire (", "\nreplace github.com/jobstate/jobstate => ../..\n\nrequire (")
	tree, err := LoadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	var ce *CheckError
	version, err := tree.Check()
	if !errors.As(err, &ce) {
		t.Fatalf("Check: %v, want a *CheckError", err)
	}
	tmp := t.TempDir()
	proxyDir := filepath.Join(tmp, "proxy")
	if _, err := tree.WriteProxy(version, proxyDir); err != nil {
		t.Fatal(err)
	}
	env, err := ProxyEnv(context.Background(), proxyDir, filepath.Join(tmp, "modcache"))
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "GOBIN="+filepath.Join(tmp, "bin"))
	out := runFailing(t, tmp, env, "go", "install", "github.com/jobstate/jobstate/cmd/jobstate@"+version)
	if !strings.Contains(out, "replace directives") {
		t.Errorf("go install failed with:\n%s\nwant the replace directive named", out)
	}
}

// A module outside the repository gets jobstate, pgstore and otel at the
// tree's version from a proxy of the tree, builds a service that runs a
// job on PostgreSQL, and installs the jobstate command, which reads the
// same database. Neither its module graph nor that of a module importing
// every package of jobstate's libraries holds a requirement, by one of
// jobstate's modules, of a module only tests need.
func TestInstallFromProxy(t *testing.T) {
	tree := loadRepo(t)
	version, err := tree.Check()
	if err != nil {
		t.Fatalf("the tree cannot be released:\n%v", err)
	}
	cluster, pool := pgtest.Shared(t)

	tmp := t.TempDir()
	if strings.HasPrefix(tmp, tree.Root+string(filepath.Separator)) {
		t.Fatalf("temporary directory %s is inside the repository", tmp)
	}
	proxyDir := filepath.Join(tmp, "proxy")
	if _, err := tree.WriteProxy(version, proxyDir); err != nil {
		t.Fatal(err)
	}
	env, err := ProxyEnv(context.Background(), proxyDir, filepath.Join(tmp, "modcache"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	env = append(env, "GOBIN="+bin)

	svc := filepath.Join(tmp, "service")
	if err := os.MkdirAll(svc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(svc, "go.mod"), []byte("module example.com/service\n\ngo 1.23\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(svc, "main.go"), []byte(serviceMain), 0o644); err != nil {
		t.Fatal(err)
	}
	runCmd(t, svc, env, "go", "get",
		"github.com/jobstate/jobstate@"+version,
		"github.com/jobstate/jobstate/pgstore@"+version,
		"github.com/jobstate/jobstate/otel@"+version)
	runCmd(t, svc, env, "go", "mod", "tidy")

	t.Run("requirements", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(svc, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse("go.mod", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		allowed := make(map[string]bool)
		for _, p := range allowedRequirements {
			allowed[p] = true
		}
		got := make(map[string]string)
		for _, r := range f.Require {
			got[r.Mod.Path] = r.Mod.Version
			if !allowed[r.Mod.Path] {
				t.Errorf("the service requires %s %s, which is neither jobstate's nor pgx's nor OpenTelemetry's", r.Mod.Path, r.Mod.Version)
			}
		}
		for _, p := range []string{"github.com/jobstate/jobstate", "github.com/jobstate/jobstate/pgstore", "github.com/jobstate/jobstate/otel"} {
			if got[p] != version {
				t.Errorf("the service requires %s at %q, want %s", p, got[p], version)
			}
		}
		if len(f.Replace) > 0 {
			t.Errorf("the service's go.mod has replace directives: %v", f.Replace)
		}
	})

	t.Run("no test-only packages", func(t *testing.T) {
		deps := runCmd(t, svc, env, "go", "list", "-deps", ".")
		for _, p := range strings.Fields(deps) {
			for _, prefix := range testOnlyPackages {
				if strings.HasPrefix(p, prefix) {
					t.Errorf("the service builds %s, a package only jobstate's tests use", p)
				}
			}
		}
	})

	t.Run("no test-only modules in the graph", func(t *testing.T) {
		checkGraph(t, runCmd(t, svc, env, "go", "mod", "graph"))
	})

	// A module that imports every package of jobstate's libraries:
	// jobstate, memstore, worker, pgstore, sqlitestore and otel.
	t.Run("no test-only modules in the graph of every library", func(t *testing.T) {
		libs := filepath.Join(tmp, "libs")
		if err := os.MkdirAll(libs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(libs, "go.mod"), []byte("module example.com/libs\n\ngo 1.23\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(libs, "main.go"), []byte(libsMain), 0o644); err != nil {
			t.Fatal(err)
		}
		var get []string
		for _, p := range libraryModules {
			get = append(get, p+"@"+version)
		}
		runCmd(t, libs, env, "go", append([]string{"get"}, get...)...)
		runCmd(t, libs, env, "go", "mod", "tidy")
		runCmd(t, libs, env, "go", "build", "-o", os.DevNull, ".")
		checkGraph(t, runCmd(t, libs, env, "go", "mod", "graph"))
	})

	schema := fmt.Sprintf("release_test_%d", os.Getpid())
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	runCmd(t, svc, env, "go", "build", "-o", filepath.Join(bin, "service"), ".")
	out := runCmd(t, svc, env, filepath.Join(bin, "service"), cluster.URL, schema)
	if !strings.Contains(out, ": SUCCEEDED, result \"processed report.pdf\"") {
		t.Errorf("the service printed %q, want its job SUCCEEDED with its result", out)
	}

	runCmd(t, tmp, env, "go", "install", "github.com/jobstate/jobstate/cmd/jobstate@"+version)
	status := runCmd(t, tmp, env, filepath.Join(bin, "jobstate"), "migrate", "status", "--database-url", cluster.URL, "--schema", schema)
	if !strings.Contains(status, fmt.Sprintf("schema %q is at version", schema)) || !strings.Contains(status, ": current") {
		t.Errorf("jobstate migrate status printed %q, want the service's schema current", status)
	}
}
