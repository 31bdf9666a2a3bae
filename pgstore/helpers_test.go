package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// workSpec is a small machine: queued → running → done, with retries
// (the work machine of internal/machines).
func workSpec() jobstate.Spec { return machines.WorkSpec("work") }

// workEngine is an engine on store with the work machine, its clock a
// manual one at epoch.
func workEngine(t *testing.T, store jobstate.Store) *jobstate.Engine {
	t.Helper()
	def, err := jobstate.NewDefinition(workSpec())
	require.NoError(t, err)
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(jobstate.NewManualClock(epoch)))
	require.NoError(t, err)
	return eng
}

// sharedPool is a pool on the shared test cluster, its configuration
// changed by configure before it connects; closed when the test ends.
func sharedPool(t *testing.T, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cl, _ := pgtest.Shared(t)
	cfg, err := pgxpool.ParseConfig(cl.URL)
	require.NoError(t, err)
	configure(cfg)
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// env is an engine on a fresh store, with a manual clock, and a schema of
// its own for the test's tables.
type env struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *pgstore.Store
	eng    *jobstate.Engine
	clock  *jobstate.ManualClock
	schema string // for the test's own tables
}

func newEnv(t *testing.T, specs ...jobstate.Spec) *env {
	t.Helper()
	if len(specs) == 0 {
		specs = []jobstate.Spec{workSpec()}
	}
	e := &env{t: t, ctx: context.Background(), pool: pgtest.Pool(t), store: pgtest.Store(t), clock: jobstate.NewManualClock(epoch)}
	var defs []*jobstate.Definition
	for _, s := range specs {
		d, err := jobstate.NewDefinition(s)
		require.NoError(t, err)
		defs = append(defs, d)
	}
	eng, err := jobstate.New(e.store, jobstate.WithMachines(defs...), jobstate.WithClock(e.clock))
	require.NoError(t, err)
	e.eng = eng
	return e
}

// table creates a table of the test's own (in a schema of its own) and
// returns its qualified name.
func (e *env) table(name, columns string) string {
	e.t.Helper()
	if e.schema == "" {
		e.schema = pgtest.Schema(e.t)
	}
	q := e.schema + "." + name
	_, err := e.pool.Exec(e.ctx, "CREATE TABLE "+q+" ("+columns+")")
	require.NoError(e.t, err)
	return q
}

func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// execRows is SQL reading the executions kept in the rows of jobs of
// schema as a table: job_id, id, attempt, owner, status, claimed_at and
// error (owner and error empty strings when unset).
func execRows(schema string) string {
	return `(SELECT j.id AS job_id, x.id, x.attempt, coalesce(x.owner, '') AS owner, x.status, x.claimed_at, coalesce(x.error, '') AS error
 FROM ` + schema + `.jobs j, jsonb_to_recordset(j.earlier_execs) AS x(id uuid, attempt bigint, owner text, status text, claimed_at timestamptz, error text)
 UNION ALL
 SELECT id, exec_id, exec_attempt, exec_owner, exec_status,
        CASE WHEN isfinite(exec_claimed_at) THEN exec_claimed_at END, exec_error
 FROM ` + schema + `.jobs WHERE exec_id IS NOT NULL)`
}

// must fails the test at once with err, unless it is nil.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// versionsAfter returns the schema versions Migrate applies to a schema
// at version v: v+1 to SchemaVersion.
func versionsAfter(v int) []int {
	var out []int
	for n := v + 1; n <= pgstore.SchemaVersion; n++ {
		out = append(out, n)
	}
	return out
}
