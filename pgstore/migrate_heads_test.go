package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestMigrateFromVersion4: a schema written by version 4 (its rows
// written by the store in a current schema and copied into it), holding
// jobs with keys of several keys and priorities in every state (ready,
// due later, leased, committed, retried, done, failed), is brought to
// version 5: key_heads holds exactly the first ready job of each
// (machine, key, priority), jobs_claim holds only the jobs without a key,
// every job reads back as it was, and every job runs to its end.
func TestMigrateFromVersion4(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema, src := olderSchema(t, pool, "_v4", 4)
	clock := jobstate.NewManualClock(epoch)
	open := keyedOpener(t, pool, clock)
	_, eng := open(src)
	var all []uuid.UUID
	create := func(machine, key string, priority int, notBefore time.Time) uuid.UUID {
		t.Helper()
		clock.Advance(time.Millisecond)
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: machine, ConcurrencyKey: key, Priority: priority, NotBefore: notBefore})
		must(t, err)
		all = append(all, c.Job.ID)
		return c.Job.ID
	}
	claim := func(machine string) jobstate.Claimed {
		t.Helper()
		clock.Advance(time.Millisecond)
		c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: machine, Worker: "w"})
		must(t, err)
		return c
	}
	// In "free" (no limit): per key, one job done, one failed, one
	// committed, one leased, one retried, then ready jobs at two
	// priorities, one of them due later; and jobs without a key.
	var leases []jobstate.Lease
	for _, key := range []string{"a", "b", "c"} {
		create("free", key, 0, time.Time{})
		c := claim("free")
		_, err := eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
		must(t, err)
		create("free", key, 0, time.Time{})
		c = claim("free")
		_, err = eng.Fail(ctx, c.Lease, jobstate.Permanent(errors.New("broken")))
		must(t, err)
		create("free", key, 0, time.Time{})
		c = claim("free")
		_, err = eng.Commit(ctx, c.Lease, jobstate.CommitInput{Result: []byte("half")})
		must(t, err)
		leases = append(leases, c.Lease)
		create("free", key, 0, time.Time{})
		leases = append(leases, claim("free").Lease)
		create("free", key, 0, time.Time{})
		c = claim("free")
		_, err = eng.Fail(ctx, c.Lease, errors.New("flaky"))
		must(t, err)
		for p := 0; p < 2; p++ {
			create("free", key, p, time.Time{})
			create("free", key, p, time.Time{})
			create("free", key, p, epoch.Add(time.Minute))
		}
	}
	create("free", "", 0, time.Time{})
	create("free", "", 1, time.Time{})
	// In "lim" (one per key): a running job of key a, and ready jobs of
	// keys a and b.
	create("lim", "a", 0, time.Time{})
	leases = append(leases, claim("lim").Lease)
	for i := 0; i < 3; i++ {
		create("lim", "a", i%2, time.Time{})
		create("lim", "b", i%2, time.Time{})
	}
	read := func(eng *jobstate.Engine) map[uuid.UUID]jobstate.Job {
		out := map[uuid.UUID]jobstate.Job{}
		for _, id := range all {
			j, err := eng.Get(ctx, id)
			must(t, err)
			out[id] = j
		}
		return out
	}
	before := read(eng)

	copyRows(t, pool, src, schema)
	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	must(t, err)
	if !reflect.DeepEqual(applied, versionsAfter(4)) {
		t.Fatalf("applied %v, want %v", applied, versionsAfter(4))
	}
	if bad := headsMismatch(t, pool, schema); len(bad) > 0 {
		t.Fatalf("key_heads after the migration:\n%s", strings.Join(bad, "\n"))
	}
	var heads int
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".key_heads").Scan(&heads))
	// free: 3 keys × 2 priorities; lim: 2 keys × 2 priorities.
	if heads != 10 {
		t.Fatalf("%d rows in key_heads, want 10", heads)
	}
	var def string
	must(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'jobs_claim'`, schema).Scan(&def))
	if !strings.Contains(def, "concurrency_key = ''::text") {
		t.Fatalf("jobs_claim holds jobs with a key: %s", def)
	}

	store, eng := open(schema)
	if after := read(eng); !reflect.DeepEqual(before, after) {
		t.Fatal("the jobs do not read back as they were")
	}
	// Every job runs to its end.
	for _, l := range leases {
		if _, err := eng.Succeed(ctx, l, jobstate.CommitInput{}); err != nil && !errors.Is(err, jobstate.ErrAlreadyCommitted) {
			if _, ferr := eng.Finish(ctx, l); ferr != nil {
				t.Fatalf("ending a lease: %v, %v", err, ferr)
			}
		}
	}
	clock.Set(epoch.Add(time.Hour))
	_, err = eng.Sweep(ctx)
	must(t, err)
	for _, m := range []string{"free", "lim"} {
		for {
			c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: m, Worker: "w"})
			if errors.Is(err, jobstate.ErrNoJob) {
				break
			}
			must(t, err)
			_, err = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
			must(t, err)
		}
	}
	for _, id := range all {
		j, err := eng.Get(ctx, id)
		must(t, err)
		if j.Kind != jobstate.KindTerminal {
			t.Errorf("job %s (%s, key %q) is %s, not at its end", id, j.Machine, j.ConcurrencyKey, j.State)
		}
	}
	requireHeads(t, store, "the run")
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".key_heads").Scan(&heads))
	if heads != 0 {
		t.Fatalf("%d rows left in key_heads", heads)
	}
}
