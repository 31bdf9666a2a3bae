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
// same database.
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

	// The module graph still holds the libraries the root's, pgstore's and
	// otel's go.mod list for their own tests (and what those require);
	// only their go.mod files are read. The test logs them.
	graph := runCmd(t, svc, env, "go", "mod", "graph")
	allowed := make(map[string]bool)
	for _, p := range allowedRequirements {
		allowed[p] = true
	}
	var edges []string
	beyond := make(map[string]bool)
	for _, line := range strings.Split(graph, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		to, _, _ := strings.Cut(f[1], "@")
		if allowed[to] || to == "go" || to == "toolchain" {
			continue
		}
		beyond[to] = true
		if strings.HasPrefix(f[0], "github.com/jobstate/") {
			edges = append(edges, f[0]+" -> "+f[1])
		}
	}
	var mods []string
	for p := range beyond {
		mods = append(mods, p)
	}
	sort.Strings(mods)
	t.Logf("go mod graph of the service: jobstate's modules require, beyond what the service builds:\n  %s\nand the graph holds %d such modules in all: %s",
		strings.Join(edges, "\n  "), len(mods), strings.Join(mods, " "))

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
