package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// RunContract checks each clause of the Store contract by calling the
// store directly with hand-made writes.
func RunContract(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s jobstate.Store)
	}{
		{"CreateThenRead", testCreateThenRead},
		{"UnknownJob", testUnknownJob},
		{"CreateErrorWritesNothing", testCreateErrorWritesNothing},
		{"CreateDuplicateID", testCreateDuplicateID},
		{"CreateKeyExistingAndTakeover", testCreateKey},
		{"UpdateApplies", testUpdateApplies},
		{"UpdateRefusals", testUpdateRefusals},
		{"UpdateNoChange", testUpdateNoChange},
		{"ReturnedValuesAreCopies", testReturnedCopies},
		{"ClaimNextOrder", testClaimNextOrder},
		{"ClaimNextSkipAndStop", testClaimNextSkip},
		{"Due", testDue},
		{"Stale", testStale},
		{"CancelledContext", testCancelledContext},
		{"CounterIfOffered", testCounter},
		{"PrunerIfOffered", testPruner},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// mkJob returns version 1 of a job of machine "m" in ready state "q".
func mkJob(at time.Time) jobstate.Job {
	return jobstate.Job{
		ID: uuid.New(), Machine: "m", State: "q", Kind: jobstate.KindReady, Version: 1,
		Payload: []byte("payload"), CreatedAt: at, UpdatedAt: at,
	}
}

func creation(j jobstate.Job) jobstate.Write {
	return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: j.Version, Event: jobstate.EventCreate, To: j.State, At: j.CreatedAt}}}
}

func insert(t *testing.T, s jobstate.Store, j jobstate.Job) jobstate.Job {
	t.Helper()
	got, created, err := s.Create(context.Background(), j.Machine, "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
		return creation(j), nil
	})
	require.NoError(t, err)
	require.True(t, created)
	return got
}

// state is everything a store holds about one job.
type state = enginesuite.State

// load reads everything s holds about the job id, failing t on any error.
func load(t *testing.T, s jobstate.Store, id uuid.UUID) state {
	t.Helper()
	return enginesuite.Load(t, s, id)
}

// next returns cur moved to state to at version+1 with its transition.
func next(cur jobstate.Job, to jobstate.State, kind jobstate.Kind) jobstate.Write {
	j := cur
	j.Version++
	j.State, j.Kind = to, kind
	return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: j.Version, From: cur.State, Event: "go", To: to}}}
}

func testCreateThenRead(t *testing.T, s jobstate.Store) {
	j := mkJob(Epoch)
	got := insert(t, s, j)
	assert.Equal(t, j.ID, got.ID)
	st := load(t, s, j.ID)
	assert.Equal(t, j.ID, st.Job.ID)
	assert.Equal(t, int64(1), st.Job.Version)
	assert.Equal(t, []byte("payload"), st.Job.Payload)
	assert.True(t, st.Job.CreatedAt.Equal(Epoch))
	require.Len(t, st.History, 1)
	assert.Equal(t, jobstate.EventCreate, st.History[0].Event)
	assert.Empty(t, st.Execs)
	assert.Empty(t, st.Effects)
}

func testUnknownJob(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	id := uuid.New()
	_, err := s.Get(ctx, id)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	_, err = s.Executions(ctx, id)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	_, err = s.History(ctx, id)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	_, err = s.Effects(ctx, id)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	called := false
	_, err = s.Update(ctx, id, func(context.Context, jobstate.Snapshot) (jobstate.Write, error) {
		called = true
		return jobstate.Write{}, nil
	})
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	assert.False(t, called, "fn must not run for an unknown job")
}

func testCreateErrorWritesNothing(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	boom := errors.New("boom")
	j := mkJob(Epoch)
	_, _, err := s.Create(ctx, "m", "k", func(context.Context, *jobstate.Job) (jobstate.Write, error) { return jobstate.Write{}, boom })
	assert.ErrorIs(t, err, boom)
	_, err = s.Get(ctx, j.ID)
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
	// The key is still free.
	var seen *jobstate.Job
	_, created, err := s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		seen = ex
		return creation(j), nil
	})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Nil(t, seen)
}

func testCreateDuplicateID(t *testing.T, s jobstate.Store) {
	j := insert(t, s, mkJob(Epoch))
	dup := mkJob(Epoch)
	dup.ID = j.ID
	dup.State = "other"
	_, _, err := s.Create(context.Background(), "m", "", func(context.Context, *jobstate.Job) (jobstate.Write, error) {
		return creation(dup), nil
	})
	assert.ErrorIs(t, err, jobstate.ErrDuplicateJob)
	assert.Equal(t, jobstate.State("q"), load(t, s, j.ID).Job.State)
}

func testCreateKey(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	first := mkJob(Epoch)
	first.IdempotencyKey = "k"
	_, created, err := s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		assert.Nil(t, ex)
		return creation(first), nil
	})
	require.NoError(t, err)
	require.True(t, created)

	// Keeping the holder.
	got, created, err := s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		require.NotNil(t, ex)
		assert.Equal(t, first.ID, ex.ID)
		return jobstate.Write{}, nil
	})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first.ID, got.ID)

	// The same key on another machine is another key.
	other := mkJob(Epoch)
	other.Machine = "m2"
	_, created, err = s.Create(ctx, "m2", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		assert.Nil(t, ex)
		return creation(other), nil
	})
	require.NoError(t, err)
	assert.True(t, created)

	// Taking the key over.
	second := mkJob(Epoch.Add(time.Minute))
	_, created, err = s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		return creation(second), nil
	})
	require.NoError(t, err)
	assert.True(t, created)
	_, _, err = s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		require.NotNil(t, ex)
		assert.Equal(t, second.ID, ex.ID, "the key now names the newer job")
		return jobstate.Write{}, nil
	})
	require.NoError(t, err)
	// The old holder still exists.
	assert.Equal(t, first.ID, load(t, s, first.ID).Job.ID)
}

func testUpdateApplies(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	j := insert(t, s, mkJob(Epoch))
	x := jobstate.Execution{ID: uuid.New(), JobID: j.ID, Attempt: 1, Owner: "w", Status: jobstate.ExecLeased, LeaseExpiresAt: Epoch.Add(time.Minute)}
	got, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		assert.Equal(t, int64(1), cur.Job.Version)
		w := next(cur.Job, "r", jobstate.KindActive)
		w.Executions = []jobstate.Execution{x}
		w.Effects = []jobstate.EffectRecord{{Name: "fx", ExecID: x.ID, At: Epoch}}
		return w, nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Version)
	assert.Equal(t, jobstate.State("r"), got.State)

	// Replace the execution by id.
	_, err = s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		require.Len(t, cur.Executions, 1)
		require.Len(t, cur.Effects, 1)
		y := cur.Executions[0]
		y.Status = jobstate.ExecInProgress
		j := cur.Job
		j.Version += 2 // a write may skip versions when it has no transition for them
		return jobstate.Write{Job: j, Executions: []jobstate.Execution{y}}, nil
	})
	require.NoError(t, err)
	st := load(t, s, j.ID)
	assert.Equal(t, int64(4), st.Job.Version)
	require.Len(t, st.Execs, 1)
	assert.Equal(t, jobstate.ExecInProgress, st.Execs[0].Status)
	require.Len(t, st.History, 2)
	assert.Equal(t, int64(2), st.History[1].Version)
	require.Len(t, st.Effects, 1)
	assert.Equal(t, "fx", st.Effects[0].Name)
}

func testUpdateRefusals(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	j := insert(t, s, mkJob(Epoch))
	a := jobstate.Execution{ID: uuid.New(), JobID: j.ID, Attempt: 1, Status: jobstate.ExecCommitted}
	_, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		w := next(cur.Job, "r", jobstate.KindActive)
		w.Executions = []jobstate.Execution{a}
		w.Effects = []jobstate.EffectRecord{{Name: "refund"}}
		return w, nil
	})
	require.NoError(t, err)
	before := load(t, s, j.ID)

	boom := errors.New("boom")
	cases := map[string]struct {
		fn   jobstate.UpdateFunc
		want error
	}{
		"fn error": {func(context.Context, jobstate.Snapshot) (jobstate.Write, error) { return jobstate.Write{}, boom }, boom},
		"stale version": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Job.Version = cur.Job.Version - 1
			w.Transitions = nil
			return w, nil
		}, jobstate.ErrVersionConflict},
		"same version with change": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			j := cur.Job
			j.State = "x"
			return jobstate.Write{Job: j, Effects: []jobstate.EffectRecord{{Name: "y"}}}, nil
		}, jobstate.ErrVersionConflict},
		"transition version out of range": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Transitions[0].Version = cur.Job.Version
			return w, nil
		}, jobstate.ErrVersionConflict},
		"transition versions not increasing": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Job.Version++
			w.Transitions = append(w.Transitions, w.Transitions[0])
			return w, nil
		}, jobstate.ErrVersionConflict},
		"second commit": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Executions = []jobstate.Execution{{ID: uuid.New(), JobID: cur.Job.ID, Attempt: 2, Status: jobstate.ExecDone}}
			return w, nil
		}, jobstate.ErrAlreadyCommitted},
		"effect again": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Effects = []jobstate.EffectRecord{{Name: "refund"}}
			return w, nil
		}, jobstate.ErrEffectApplied},
		"effect twice in one write": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Effects = []jobstate.EffectRecord{{Name: "z"}, {Name: "z"}}
			return w, nil
		}, jobstate.ErrEffectApplied},
		"other job's id": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Job.ID = uuid.New()
			return w, nil
		}, jobstate.ErrInvalidArgument},
		"execution of another job": {func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "x", jobstate.KindReady)
			w.Executions = []jobstate.Execution{{ID: uuid.New(), JobID: uuid.New(), Status: jobstate.ExecLeased}}
			return w, nil
		}, jobstate.ErrInvalidArgument},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.Update(ctx, j.ID, tc.fn)
			assert.ErrorIs(t, err, tc.want)
			assert.Equal(t, before, load(t, s, j.ID), "a refused write must change nothing")
		})
	}
	// A commit by the same execution moving on to DONE is no second commit.
	_, err = s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		w := next(cur.Job, "done", jobstate.KindTerminal)
		y := a
		y.Status = jobstate.ExecDone
		w.Executions = []jobstate.Execution{y}
		return w, nil
	})
	assert.NoError(t, err)
}

func testUpdateNoChange(t *testing.T, s jobstate.Store) {
	j := insert(t, s, mkJob(Epoch))
	before := load(t, s, j.ID)
	got, err := s.Update(context.Background(), j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		return jobstate.Write{Job: cur.Job}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, before.Job, got)
	assert.Equal(t, before, load(t, s, j.ID))
}

func testClaimNextOrder(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	now := Epoch.Add(time.Hour)
	mk := func(notBefore time.Time, prio int, created time.Time) jobstate.Job {
		j := mkJob(created)
		j.NotBefore, j.Priority = notBefore, prio
		return insert(t, s, j)
	}
	late := mk(now.Add(time.Second), 100, Epoch)           // not due
	far := mk(jobstate.MaxTime, 100, Epoch)                // not due before year 9999
	b := mk(time.Time{}, 0, Epoch.Add(2*time.Minute))      // due since 00:02, low priority
	a := mk(time.Time{}, 5, Epoch.Add(3*time.Minute))      // due, high priority
	c := mk(time.Time{}, 0, Epoch.Add(time.Minute))        // due since 00:01, low priority
	d := mk(now, 9, Epoch)                                 // due exactly now, highest due priority
	r := mk(Epoch.Add(90*time.Second), 0, Epoch)           // a retry due since 00:01:30
	old := mk(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), // due since creation
		0, Epoch.Add(4*time.Minute))
	other := mkJob(Epoch)
	other.Machine = "elsewhere"
	insert(t, s, other)
	active := mkJob(Epoch)
	active.Kind, active.State = jobstate.KindActive, "r"
	insert(t, s, active)

	var order []uuid.UUID
	for {
		got, err := s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: now}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			return next(cur.Job, "r", jobstate.KindActive), nil
		})
		if errors.Is(err, jobstate.ErrNoJob) {
			break
		}
		require.NoError(t, err)
		assert.Equal(t, jobstate.KindActive, got.Kind)
		order = append(order, got.ID)
	}
	assert.Equal(t, []uuid.UUID{d.ID, a.ID, c.ID, r.ID, b.ID, old.ID}, order, "claim order: priority, then due time, then age")
	assert.Equal(t, jobstate.KindReady, load(t, s, late.ID).Job.Kind, "a job is never offered before its not-before")
	assert.Equal(t, jobstate.KindReady, load(t, s, far.ID).Job.Kind, "a job is never offered before its not-before")
}

func testClaimNextSkip(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	j1 := insert(t, s, mkJob(Epoch))
	j2 := insert(t, s, mkJob(Epoch.Add(time.Second)))
	j3 := insert(t, s, mkJob(Epoch.Add(2*time.Second)))
	var offered []uuid.UUID
	got, err := s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: Epoch}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		offered = append(offered, cur.Job.ID)
		if cur.Job.ID == j1.ID {
			return jobstate.Write{}, errors.Join(jobstate.ErrSkip, errors.New("guard said no"))
		}
		return next(cur.Job, "r", jobstate.KindActive), nil
	})
	require.NoError(t, err)
	assert.Equal(t, j2.ID, got.ID)
	assert.Equal(t, []uuid.UUID{j1.ID, j2.ID}, offered)
	assert.Equal(t, jobstate.KindReady, load(t, s, j1.ID).Job.Kind, "a skipped job is unchanged")

	boom := errors.New("boom")
	offered = nil
	_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: Epoch}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		offered = append(offered, cur.Job.ID)
		return jobstate.Write{}, boom
	})
	assert.ErrorIs(t, err, boom)
	assert.Len(t, offered, 1, "a non-skip error stops the search")

	offered = nil
	_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "m", Now: Epoch, Limit: 1}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		offered = append(offered, cur.Job.ID)
		return jobstate.Write{}, jobstate.ErrSkip
	})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
	assert.Len(t, offered, 1, "Limit bounds the offers")
	assert.Equal(t, jobstate.KindReady, load(t, s, j3.ID).Job.Kind)

	_, err = s.ClaimNext(ctx, jobstate.ClaimQuery{Machine: "none", Now: Epoch}, func(context.Context, jobstate.Snapshot) (jobstate.Write, error) {
		t.Fatal("no job of that machine exists")
		return jobstate.Write{}, nil
	})
	assert.ErrorIs(t, err, jobstate.ErrNoJob)
}

// dueIDs pages through s.Due with the given page size and returns the ids
// in order.
func dueIDs(t *testing.T, s jobstate.Store, q jobstate.DueQuery) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for {
		page, err := s.Due(context.Background(), q)
		require.NoError(t, err)
		for _, d := range page {
			out = append(out, d.ID)
		}
		if q.Limit <= 0 || len(page) < q.Limit {
			return out
		}
		require.NotEmpty(t, page)
		q.AfterWake, q.AfterID = page[len(page)-1].WakeAt, page[len(page)-1].ID
	}
}

func testDue(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	now := Epoch.Add(time.Hour)
	mk := func(machine string, wake time.Time) jobstate.Job {
		j := mkJob(Epoch)
		j.Machine, j.WakeAt = machine, wake
		return insert(t, s, j)
	}
	mk("m", time.Time{})
	mk("m", now.Add(time.Nanosecond))
	mk("m", jobstate.MaxTime)
	b := mk("m", now)
	a := mk("m", now.Add(-time.Minute))
	ancient := mk("m", time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC))
	x := mk("x", now.Add(-time.Second))
	all := dueIDs(t, s, jobstate.DueQuery{Now: now})
	assert.Equal(t, []uuid.UUID{ancient.ID, a.ID, x.ID, b.ID}, all, "earliest wake first, years outside 1678-2262 included")
	assert.Equal(t, []uuid.UUID{ancient.ID, a.ID, b.ID}, dueIDs(t, s, jobstate.DueQuery{Now: now, Machines: []string{"m"}}), "only the machines asked for")
	assert.Equal(t, []uuid.UUID{x.ID}, dueIDs(t, s, jobstate.DueQuery{Now: now, Machines: []string{"x", "y"}}))
	for _, limit := range []int{1, 2, 3} {
		assert.Equal(t, all, dueIDs(t, s, jobstate.DueQuery{Now: now, Limit: limit}), "paging by %d visits each job once", limit)
	}
	page, err := s.Due(ctx, jobstate.DueQuery{Now: now, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, jobstate.DueJob{ID: ancient.ID, WakeAt: ancient.WakeAt}, jobstate.DueJob{ID: page[0].ID, WakeAt: page[0].WakeAt.UTC()})
	// Moving the wake time moves the job in the index.
	_, err = s.Update(ctx, a.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		j := cur.Job
		j.Version++
		j.WakeAt = time.Time{}
		return jobstate.Write{Job: j}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{ancient.ID, x.ID, b.ID}, dueIDs(t, s, jobstate.DueQuery{Now: now}))
}

func testStale(t *testing.T, s jobstate.Store) {
	ctx := context.Background()
	mk := func(machine string, leases int, hb time.Time) jobstate.Job {
		j := mkJob(Epoch)
		j.Machine, j.Leases, j.HeartbeatAt = machine, leases, hb
		if leases > 0 {
			j.Kind, j.State = jobstate.KindActive, "r"
		}
		return insert(t, s, j)
	}
	cut := Epoch.Add(time.Minute)
	old := mk("m", 1, Epoch)
	older := mk("m", 2, Epoch.Add(-time.Minute))
	mk("m", 1, cut)            // heartbeat not before the cut
	mk("m", 0, Epoch)          // no lease
	other := mk("n", 1, Epoch) // other machine
	got, err := s.Stale(ctx, "m", cut, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, older.ID, got[0].ID)
	assert.Equal(t, old.ID, got[1].ID)
	got, err = s.Stale(ctx, "", cut, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, older.ID, got[0].ID)
	got, err = s.Stale(ctx, "n", cut, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, other.ID, got[0].ID)
}

func testCancelledContext(t *testing.T, s jobstate.Store) {
	j := insert(t, s, mkJob(Epoch))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		return next(cur.Job, "r", jobstate.KindActive), nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(1), load(t, s, j.ID).Job.Version, "a cancelled context writes nothing")
}

func testCounter(t *testing.T, s jobstate.Store) {
	c, ok := s.(jobstate.Counter)
	if !ok {
		t.Skip("the store does not offer jobstate.Counter")
	}
	ctx := context.Background()
	a := insert(t, s, mkJob(Epoch))
	insert(t, s, mkJob(Epoch))
	other := mkJob(Epoch)
	other.Machine = "other"
	insert(t, s, other)
	_, err := s.Update(ctx, a.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		return next(cur.Job, "r", jobstate.KindActive), nil
	})
	require.NoError(t, err)
	got, err := c.Count(ctx, "m")
	require.NoError(t, err)
	assert.Equal(t, map[jobstate.State]int{"q": 1, "r": 1}, got)
	got, err = c.Count(ctx, "none")
	require.NoError(t, err)
	assert.Empty(t, got)
}

func testPruner(t *testing.T, s jobstate.Store) {
	p, ok := s.(jobstate.Pruner)
	if !ok {
		t.Skip("the store does not offer jobstate.Pruner")
	}
	ctx := context.Background()
	finish := func(j jobstate.Job, at time.Time) {
		_, err := s.Update(ctx, j.ID, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			w := next(cur.Job, "done", jobstate.KindTerminal)
			w.Job.CompletedAt = at
			return w, nil
		})
		require.NoError(t, err)
	}
	oldKeyed := mkJob(Epoch)
	oldKeyed.IdempotencyKey = "k"
	_, _, err := s.Create(ctx, "m", "k", func(context.Context, *jobstate.Job) (jobstate.Write, error) { return creation(oldKeyed), nil })
	require.NoError(t, err)
	finish(oldKeyed, Epoch)
	old := insert(t, s, mkJob(Epoch))
	finish(old, Epoch.Add(time.Minute))
	recent := insert(t, s, mkJob(Epoch))
	finish(recent, Epoch.Add(time.Hour))
	live := insert(t, s, mkJob(Epoch)) // not terminal

	n, err := p.Prune(ctx, Epoch.Add(30*time.Minute), 1)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "limit bounds the deletions")
	n, err = p.Prune(ctx, Epoch.Add(30*time.Minute), 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for _, id := range []uuid.UUID{oldKeyed.ID, old.ID} {
		_, err := s.Get(ctx, id)
		assert.ErrorIs(t, err, jobstate.ErrNotFound)
		_, err = s.History(ctx, id)
		assert.ErrorIs(t, err, jobstate.ErrNotFound)
		_, err = s.Update(ctx, id, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
			return jobstate.Write{Job: cur.Job}, nil
		})
		assert.ErrorIs(t, err, jobstate.ErrNotFound)
	}
	assert.Len(t, load(t, s, recent.ID).History, 2, "younger jobs and their history stay")
	assert.Equal(t, int64(1), load(t, s, live.ID).Job.Version)
	_, _, err = s.Create(ctx, "m", "k", func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		assert.Nil(t, ex, "a pruned job's key is free")
		return creation(mkJob(Epoch)), nil
	})
	require.NoError(t, err)
}
