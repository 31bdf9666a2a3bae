// Package pgtest gives tests a PostgreSQL server: the one named by
// JOBSTATE_DATABASE_URL, or a throwaway cluster started for the test
// binary from the PostgreSQL server binaries installed on the machine
// (initdb, pg_ctl), listening on a free loopback port, removed when the
// binary ends. Tests then get a schema of their own, migrated, on one
// shared pool, so that creating a store costs a few milliseconds.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and in tests pgtest.Store(t) or pgtest.Pool(t). When no server can be
// had, tests that ask for one are skipped with the reason, unless
// JOBSTATE_REQUIRE_PG=1, when they fail.
//
// NewEnv gives jobstatetest's helpers on PostgreSQL: an Env with the
// manual clock on a store in a fresh schema, where the test creates the
// service's own tables so that a handler's commit effect can write them in
// the store's transaction:
//
//	e, store := pgtest.NewEnv(t, jobstate.WithMachines(def))
//	store.Pool().Exec(e.Ctx, `CREATE TABLE shipments (order_id text NOT NULL)`)
//	job := e.Create(jobstate.NewJob{Machine: "ship", Payload: []byte("o-1")})
//	e.Run("ship", worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (jobstate.CommitInput, error) {
//		return jobstate.CommitInput{Effect: func(ctx context.Context, j jobstate.Job) error {
//			tx, _ := pgstore.Tx(ctx)
//			_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id) VALUES ($1)`, string(j.Payload))
//			return err
//		}}, nil
//	}))
//	e.AssertCommittedOnce(job.ID)
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobstate/jobstate/pgstore"
)

// Cluster is a running PostgreSQL server for tests.
type Cluster struct {
	// URL is the connection string of the cluster's database.
	URL string
	// Dir is the data directory of a cluster started here ("" for an
	// external server).
	Dir string

	bin      string
	asUser   string // run the server binaries as this user ("" : as we are)
	port     int
	sockDir  string
	external bool
}

// Env names.
const (
	// EnvURL names an existing server to use instead of starting one.
	EnvURL = "JOBSTATE_DATABASE_URL"
	// EnvRequire, set to 1, turns a missing server into a failure.
	EnvRequire = "JOBSTATE_REQUIRE_PG"
)

// state is the test binary's cluster, set by Main.
type state struct {
	cluster *Cluster
	pool    *pgxpool.Pool
	err     error // why there is no server
	schemas atomic.Int64

	mu      sync.Mutex
	free    []string // migrated schemas emptied by their last test
	created []string // every schema made, to drop on an external server
}

var (
	sharedMu sync.Mutex
	shared   *state
)

// Main starts (or connects to) the test binary's server, runs the tests
// and stops the server. Call it from TestMain.
func Main(m *testing.M) {
	st := &state{}
	// The suites check behaviour, not durability: commits need not wait
	// for the WAL flush (fsync stays on; tests of crashes and restarts
	// start a cluster of their own with synchronous_commit on).
	c, err := Start(context.Background(), Settings{Params: map[string]string{"synchronous_commit": "off"}})
	if err == nil {
		st.cluster = c
		st.pool, err = NewPool(context.Background(), c.URL, 24)
	}
	st.err = err
	sharedMu.Lock()
	shared = st
	sharedMu.Unlock()
	code := m.Run()
	if st.pool != nil && c != nil && c.external {
		// A throwaway cluster is removed whole; an external server keeps
		// nothing of the tests.
		for _, name := range st.created {
			if _, err := st.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
				fmt.Fprintln(os.Stderr, "pgtest: dropping schema", name+":", err)
			}
		}
	}
	if st.pool != nil {
		st.pool.Close()
	}
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stopping the cluster:", err)
		}
	}
	os.Exit(code)
}

func current(t testing.TB) *state {
	t.Helper()
	sharedMu.Lock()
	st := shared
	sharedMu.Unlock()
	if st == nil {
		t.Fatal("pgtest: call pgtest.Main from TestMain")
	}
	if st.err != nil {
		Unavailable(t, st.err)
	}
	return st
}

// Unavailable skips t because no server could be had, or fails it when
// JOBSTATE_REQUIRE_PG=1.
func Unavailable(t testing.TB, why error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("pgtest: no PostgreSQL server (%s=1): %v", EnvRequire, why)
	}
	t.Skipf("pgtest: no PostgreSQL server, skipping (set %s, or install the server binaries; %s=1 makes this a failure): %v", EnvURL, EnvRequire, why)
}

// Shared returns the test binary's cluster and pool.
func Shared(t testing.TB) (*Cluster, *pgxpool.Pool) {
	t.Helper()
	st := current(t)
	return st.cluster, st.pool
}

// Pool returns the test binary's shared pool.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	_, p := Shared(t)
	return p
}

// Schema migrates a fresh schema on the shared pool and returns its name;
// it is dropped when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	st := current(t)
	name := fmt.Sprintf("jobstate_test_%d_%d", os.Getpid(), st.schemas.Add(1))
	ctx := context.Background()
	if _, err := pgstore.Migrate(ctx, st.pool, pgstore.Options{Schema: name}); err != nil {
		t.Fatalf("pgtest: migrating schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := st.pool.Exec(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Errorf("pgtest: dropping schema %s: %v", name, err)
		}
	})
	return name
}

// Store returns a store in an empty schema of its own on the shared
// pool, closed when t ends. Schemas are recycled: when t ends the store's
// jobs are deleted and its schema handed to a later Store, since
// migrating a schema costs far more than emptying one. A test that
// creates tables of its own uses Schema instead.
func Store(t testing.TB) *pgstore.Store {
	t.Helper()
	return StoreWith(t, pgstore.Options{})
}

// StoreWith is Store with options; opts.Schema is ignored.
func StoreWith(t testing.TB, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	st := current(t)
	opts.Schema = st.take(t)
	s, err := pgstore.New(st.pool, opts)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		st.recycle(t, opts.Schema)
	})
	return s
}

// take returns an empty migrated schema: a recycled one, or a new one.
func (st *state) take(t testing.TB) string {
	st.mu.Lock()
	if n := len(st.free); n > 0 {
		name := st.free[n-1]
		st.free = st.free[:n-1]
		st.mu.Unlock()
		return name
	}
	st.mu.Unlock()
	name := fmt.Sprintf("jobstate_store_%d_%d", os.Getpid(), st.schemas.Add(1))
	if _, err := pgstore.Migrate(context.Background(), st.pool, pgstore.Options{Schema: name}); err != nil {
		t.Fatalf("pgtest: migrating schema %s: %v", name, err)
	}
	st.mu.Lock()
	st.created = append(st.created, name)
	st.mu.Unlock()
	return name
}

// recycle empties a schema and hands it to later stores. A schema that
// held a large store is not handed on: emptying it would keep the
// planner's statistics of its rows, and a later test must start from a
// schema whose statistics say nothing (the cluster drops it at the end).
func (st *state) recycle(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var large bool
	if err := st.pool.QueryRow(ctx, `SELECT count(*) > 20000 FROM (SELECT 1 FROM `+name+`.jobs LIMIT 20001) j`).Scan(&large); err != nil {
		t.Errorf("pgtest: emptying schema %s: %v", name, err)
		return
	}
	if large {
		return
	}
	// Every table is emptied (the schema has no foreign keys to cascade).
	var tables []string
	for _, table := range []string{"jobs", "transitions", "effects", "idempotency_keys", "key_heads"} {
		tables = append(tables, name+"."+table)
	}
	if _, err := st.pool.Exec(ctx, `DELETE FROM `+strings.Join(tables, `; DELETE FROM `)); err != nil {
		t.Errorf("pgtest: emptying schema %s: %v", name, err)
		return
	}
	st.mu.Lock()
	st.free = append(st.free, name)
	st.mu.Unlock()
}

// NewPool opens a pool of at most maxConns connections on url.
func NewPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cfg.MaxConns = maxConns
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return p, nil
}

// Settings tune a cluster started by Start.
type Settings struct {
	// Own, when true, ignores JOBSTATE_DATABASE_URL and always starts a
	// cluster (a test that restarts the server needs its own).
	Own bool
	// Params are extra server parameters (name → value), after
	// fsync=on, listen_addresses and max_connections=200.
	Params map[string]string
}

// Start returns the server named by JOBSTATE_DATABASE_URL (unless
// s.Own), or starts a throwaway cluster in a temporary directory: as the
// postgres user when running as root, since the server refuses to run as
// root.
func Start(ctx context.Context, s Settings) (*Cluster, error) {
	if url := os.Getenv(EnvURL); url != "" && !s.Own {
		return &Cluster{URL: url, external: true}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("pgtest: running as root and there is no postgres user to run the server as: %w", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("pgtest: running as root and runuser is missing: %w", err)
		}
		c.asUser = "postgres"
	}
	root, err := os.MkdirTemp("", "jobstate-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c.Dir = filepath.Join(root, "data")
	c.sockDir = root
	if c.asUser != "" {
		u, _ := user.Lookup(c.asUser)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(root, uid, gid); err != nil {
			os.RemoveAll(root)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	if c.port, err = freePort(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	params := map[string]string{
		"fsync": "on", "listen_addresses": "127.0.0.1", "max_connections": "200",
		"unix_socket_directories": c.sockDir,
	}
	for k, v := range s.Params {
		params[k] = v
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	conf := filepath.Join(c.Dir, "postgresql.auto.conf")
	var auto strings.Builder
	auto.WriteString("port = " + strconv.Itoa(c.port) + "\n")
	for _, k := range keys {
		fmt.Fprintf(&auto, "%s = '%s'\n", k, params[k])
	}
	if err := os.WriteFile(conf, []byte(auto.String()), 0o600); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if c.asUser != "" {
		u, _ := user.Lookup(c.asUser)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		_ = os.Chown(conf, uid, gid)
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-l", filepath.Join(root, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(root, "server.log"))
		os.RemoveAll(root)
		return nil, fmt.Errorf("pgtest: pg_ctl start: %w: %s %s", err, out, log)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c, nil
}

// Restart restarts a cluster started by Start: mode "immediate" kills it
// as a crash would (the next start recovers from the WAL), "fast" shuts
// it down cleanly first.
func (c *Cluster) Restart(ctx context.Context, mode string) error {
	if c.external {
		return errors.New("pgtest: cannot restart an external server")
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-l", filepath.Join(c.sockDir, "server.log"), "-w", "-t", "120", "-m", mode, "restart"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl restart: %w: %s", err, out)
	}
	return nil
}

// Stop stops a cluster started by Start and removes its directory.
func (c *Cluster) Stop() error {
	if c == nil || c.external {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-w", "-t", "60", "-m", "immediate", "stop")
	rmErr := os.RemoveAll(c.sockDir)
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w: %s", err, out)
	}
	return rmErr
}

// run runs one of the server binaries, as the server's user.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// findBin finds the directory of initdb and pg_ctl: on PATH, or in the
// usual places of Debian's and other packages.
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	globs := []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin", "/opt/homebrew/opt/postgresql*/bin"}
	var found []string
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		found = append(found, m...)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(found)))
	for _, dir := range found {
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("pgtest: the PostgreSQL server binaries (pg_ctl, initdb) are not installed")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
