package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestMigrateFromVersion5: a schema written by version 5 (executions in
// a table of their own), holding jobs in every state an execution can
// leave them (leased, started, committed, done, failed, retried after
// errors and lapsed leases, snoozed, redriven, never claimed), at
// instants with nanoseconds, is brought to the current version: every
// job reads back as it was, with its executions (order, statuses,
// errors, owners and every instant to the nanosecond), history and
// effects; the one-commit rule holds in the new rows; and every job runs
// to its end.
func TestMigrateFromVersion5(t *testing.T) { migrateExecutions(t, 5) }

// TestMigrateFromVersion6: as TestMigrateFromVersion5, from a schema
// written by version 6 (every execution in the JSON list of the job's
// row), brought to version 7 (the last execution in columns of its own).
func TestMigrateFromVersion6(t *testing.T) { migrateExecutions(t, 6) }

// migrateExecutions runs TestMigrateFromVersion5 from version v.
func migrateExecutions(t *testing.T, v int) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema, src := olderSchema(t, pool, fmt.Sprintf("_v%d", v), v)
	clock := jobstate.NewManualClock(epoch.Add(123 * time.Nanosecond))
	open := keyedOpener(t, pool, clock)
	_, eng := open(src)
	tick := func() { clock.Advance(time.Millisecond + 7*time.Nanosecond) }
	var all []uuid.UUID
	create := func(key string) uuid.UUID {
		t.Helper()
		tick()
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "free", ConcurrencyKey: key})
		must(t, err)
		all = append(all, c.Job.ID)
		return c.Job.ID
	}
	claim := func(id uuid.UUID, worker string) jobstate.Lease {
		t.Helper()
		tick()
		c, err := eng.ClaimJob(ctx, id, jobstate.ClaimRequest{Machine: "free", Worker: worker})
		must(t, err)
		tick()
		return c.Lease
	}
	var open5 []jobstate.Lease // leases left live in version 5

	// Never claimed; leased; started.
	create("")
	open5 = append(open5, claim(create(""), "w-leased"))
	l := claim(create("k"), "w-started")
	_, err := eng.Start(ctx, l)
	must(t, err)
	open5 = append(open5, l)
	// Committed, and done.
	l = claim(create(""), "w-committed")
	_, err = eng.Commit(ctx, l, jobstate.CommitInput{Result: []byte("half")})
	must(t, err)
	open5 = append(open5, l)
	l = claim(create("k"), "w-done")
	_, err = eng.Succeed(ctx, l, jobstate.CommitInput{Result: []byte("all")})
	must(t, err)
	// Failed for good; failed, then redriven (an effect recorded); retried twice (an error, then a lapsed lease
	// swept), then leased again; snoozed.
	l = claim(create(""), "w-failed")
	_, err = eng.Fail(ctx, l, jobstate.Permanent(errors.New("broken input")))
	must(t, err)
	redriven := create("")
	_, err = eng.Fail(ctx, claim(redriven, "w-redriven"), jobstate.Permanent(errors.New("bad config")))
	must(t, err)
	_, err = eng.Redrive(ctx, redriven, jobstate.Call{Actor: "ops", Reason: "config fixed"})
	must(t, err)
	retried := create("")
	_, err = eng.Fail(ctx, claim(retried, "w-r1"), errors.New("flaky"))
	must(t, err)
	clock.Advance(time.Hour)
	_, err = eng.Sweep(ctx)
	must(t, err)
	claim(retried, "w-r2")
	clock.Advance(time.Hour)
	_, err = eng.Sweep(ctx)
	must(t, err)
	clock.Advance(time.Hour)
	_, err = eng.Sweep(ctx)
	must(t, err)
	open5 = append(open5, claim(retried, "w-r3"))
	l = claim(create(""), "w-snoozed")
	_, err = eng.Snooze(ctx, l, time.Minute)
	must(t, err)

	before := readRecords(t, eng.Store(), all)
	var execs, nanos int
	for _, r := range before {
		execs += len(r.Execs)
		for _, x := range r.Execs {
			if x.ClaimedAt.Nanosecond()%1000 != 0 {
				nanos++
			}
		}
	}
	if execs < 10 || nanos == 0 {
		t.Fatalf("the jobs hold %d executions, %d claimed at an instant with nanoseconds", execs, nanos)
	}

	copyRows(t, pool, src, schema)
	applied, err := pgstore.Migrate(ctx, pool, pgstore.Options{Schema: schema})
	must(t, err)
	var want []int
	for n := v + 1; n <= pgstore.SchemaVersion; n++ {
		want = append(want, n)
	}
	if !reflect.DeepEqual(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	var tables int
	must(t, pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'executions'", schema).Scan(&tables))
	if tables != 0 {
		t.Fatal("the table of executions is left after the migration")
	}

	_, eng = open(schema)
	after := readRecords(t, eng.Store(), all)
	for id, want := range before {
		if got := after[id]; !reflect.DeepEqual(want, got) {
			t.Errorf("job %s does not read back as it was:\nbefore %+v\nafter  %+v", id, want, got)
		}
	}
	// A second commit is refused by the database in the migrated rows too.
	_, err = pool.Exec(ctx, "UPDATE "+schema+".jobs SET earlier_execs = earlier_execs || jsonb_build_object('id', gen_random_uuid(), 'attempt', 99, 'status', 'DONE') WHERE id = $1", all[3])
	if err == nil {
		t.Fatal("a second commit was written")
	}

	// Every job runs to its end: a lease still live ends now, one that
	// lapsed meanwhile is swept and its job claimed again.
	for _, l := range open5 {
		if _, err := eng.Succeed(ctx, l, jobstate.CommitInput{}); err != nil && !errors.Is(err, jobstate.ErrLeaseLost) {
			if _, ferr := eng.Finish(ctx, l); ferr != nil {
				t.Fatalf("ending a lease: %v, %v", err, ferr)
			}
		}
	}
	for round := 0; round < 3; round++ {
		clock.Advance(24 * time.Hour)
		_, err = eng.Sweep(ctx)
		must(t, err)
		for {
			c, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "free", Worker: "w"})
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
			t.Errorf("job %s is %s, not at its end: %+v", id, j.State, j)
		}
	}
}
