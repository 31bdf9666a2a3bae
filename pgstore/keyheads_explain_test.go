package pgstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate/pgstore"
)

// requireClaimPlan fails unless the plan's nodes (plan's) walk the claim
// index of the jobs without a key and the index of the keys' heads, scan
// no table, and sort only once: the merge of the two walks' rows, at
// most twice the jobs asked for.
func requireClaimPlan(t *testing.T, nodes []string) {
	t.Helper()
	joined := strings.Join(nodes, ", ")
	sorts := 0
	for _, n := range nodes {
		if strings.Contains(n, "Seq Scan") {
			t.Fatalf("claim: a sequential scan: %s", joined)
		}
		if n == "Sort" || n == "Incremental Sort" {
			sorts++
		}
	}
	if sorts > 1 {
		t.Fatalf("claim: %d sorts: %s", sorts, joined)
	}
	for _, ix := range []string{"jobs_claim", "key_heads_claim"} {
		if !strings.Contains(joined, ix) {
			t.Fatalf("claim: %s not walked: %s", ix, joined)
		}
	}
}

// pinnedPlan returns the node types (with their index names) of the plan
// of sql with args, planned as the store plans it (after pinPlans).
func pinnedPlan(t *testing.T, s *pgstore.Store, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, pgstore.PinPlansSQL); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Plan explainNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	var walk func(n explainNode)
	walk = func(n explainNode) {
		name := n.NodeType
		if n.Index != "" {
			name += " " + n.Index
		}
		nodes = append(nodes, name)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return nodes
}

// explainNode is a node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
type explainNode struct {
	NodeType   string        `json:"Node Type"`
	Relation   string        `json:"Relation Name"`
	Index      string        `json:"Index Name"`
	Rows       float64       `json:"Actual Rows"`
	Loops      float64       `json:"Actual Loops"`
	SharedHit  int64         `json:"Shared Hit Blocks"`
	SharedRead int64         `json:"Shared Read Blocks"`
	Plans      []explainNode `json:"Plans"`
}

// TestKeyedClaimPassesHotKeyInOneEntry: a machine limited to one live
// execution per key, whose key "hot" holds 100,000 ready jobs that come
// first in claim order and one running job, and a few jobs of other keys
// after them. The limited claim takes an other key's job, and
// EXPLAIN (ANALYZE, BUFFERS) of its statement shows that no node reads
// more than a few rows and the whole statement a few hundred blocks: the
// hot key costs the walk its one entry in key_heads, not its backlog.
func TestKeyedClaimPassesHotKeyInOneEntry(t *testing.T) {
	const backlog = 100_000
	s := freshStore(t, pgstore.Options{})
	ctx := context.Background()
	jobs := pgx.Identifier{s.Schema(), "jobs"}.Sanitize()
	heads := pgx.Identifier{s.Schema(), "key_heads"}.Sanitize()
	// The hot key's backlog, its running job, then one job of each of
	// three other keys, created after the backlog.
	_, err := s.Pool().Exec(ctx, `INSERT INTO `+jobs+` (id, machine, state, kind, version, priority,
 created_at, updated_at, due_at, concurrency_key)
SELECT gen_random_uuid(), 'q', 'queued', 'ready', 1, 0, t, t, t, 'hot'
  FROM generate_series(1, $1::int) i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 millisecond' AS t) x`, backlog)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(ctx, `INSERT INTO `+jobs+` (id, machine, state, kind, version, priority,
 created_at, updated_at, due_at, concurrency_key, leases)
VALUES (gen_random_uuid(), 'q', 'running', 'active', 2, 0, '2026-01-01', '2026-01-01', '2026-01-01', 'hot', 1)`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(ctx, `INSERT INTO `+jobs+` (id, machine, state, kind, version, priority,
 created_at, updated_at, due_at, concurrency_key)
SELECT gen_random_uuid(), 'q', 'queued', 'ready', 1, 0, t, t, t, 'k' || i
  FROM generate_series(1, 3) i, LATERAL (SELECT timestamptz '2026-02-01' + i * interval '1 millisecond' AS t) x`)
	if err != nil {
		t.Fatal(err)
	}
	// The heads, as the store keeps them.
	_, err = s.Pool().Exec(ctx, `INSERT INTO `+heads+` (machine, concurrency_key, priority, job_id, due_at, due_ns,
 created_at, created_ns, not_before, not_before_ns)
SELECT DISTINCT ON (machine, concurrency_key, priority) machine, concurrency_key, priority, id, due_at, due_ns,
       created_at, created_ns, not_before, not_before_ns
  FROM `+jobs+` WHERE kind = 'ready' AND concurrency_key <> ''
 ORDER BY machine, concurrency_key, priority, due_at, due_ns, created_at, created_ns, id`)
	if err != nil {
		t.Fatal(err)
	}
	requireHeads(t, s, "the load")
	if _, err := s.Pool().Exec(ctx, "ANALYZE "+jobs+"; ANALYZE "+heads); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	args := []any{"q", now, int16(0), []uuid.UUID{}, 1, 1, []string{}, pgstore.KeyLockPrefix(s, "q")}

	// Each in a transaction of its own, rolled back: the claim locks.
	pinned := func() pgx.Tx {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, pgstore.PinPlansSQL); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	var key string
	tx := pinned()
	if err := tx.QueryRow(ctx, `SELECT concurrency_key FROM (`+pgstore.ClaimKeyedSQL(s)+`) c`, args...).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if key != "k1" {
		t.Fatalf("the claim took a job of key %q, want k1", key)
	}
	var raw []byte
	if err := pinned().QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+pgstore.ClaimKeyedSQL(s), args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Plan explainNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	top := doc[0].Plan
	var walk func(n explainNode)
	walk = func(n explainNode) {
		if n.Rows*max(n.Loops, 1) > 100 {
			t.Errorf("%s %s %s read %.0f rows (%0.f loops): the backlog is walked\n%s", n.NodeType, n.Relation, n.Index, n.Rows*n.Loops, n.Loops, raw)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(top)
	if blocks := top.SharedHit + top.SharedRead; blocks > 300 {
		t.Errorf("the claim read %d blocks; want a few (the backlog's jobs fill thousands)\n%s", blocks, raw)
	}
	t.Logf("the limited claim at a hot key of %d ready jobs read %d blocks", backlog, top.SharedHit+top.SharedRead)
}
