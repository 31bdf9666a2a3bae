package enginesuite

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/assert"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/internal/machines/bounty"
	"github.com/jobstate/jobstate/internal/machines/hook"
	"github.com/jobstate/jobstate/internal/machines/imagegen"
	"github.com/jobstate/jobstate/internal/require"
)

func testIdempotency(t *testing.T, newStore NewStore) {
	f := NewFixture(t, newStore, nil, imagegen.Spec(imagegen.Plain()))
	key := jobstate.KeyAt(f.Clock.Now(), time.Minute, "user-1", "a cat", "512x512")
	c1, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.False(t, c1.Existing)
	c2, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.True(t, c2.Existing)
	assert.Equal(t, c1.Job.ID, c2.Job.ID)

	before := f.Snapshot(c1.Job.ID)
	_, err = f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a dog")})
	var kc *jobstate.KeyConflictError
	require.ErrorAs(t, err, &kc)
	assert.Equal(t, c1.Job.ID, kc.Holder)
	assert.Equal(t, before, f.Snapshot(c1.Job.ID))

	// A failed job frees its key (image generation).
	c := f.Claim(imagegen.Name, "w")
	_, err = f.Eng.Fail(f.Ctx, c.Lease, errors.New("API 500"))
	require.NoError(t, err)
	assert.Equal(t, imagegen.Failed, f.Get(c1.Job.ID).State)
	c3, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Key: key, Payload: []byte("a cat")})
	require.NoError(t, err)
	assert.False(t, c3.Existing)
	assert.NotEqual(t, c1.Job.ID, c3.Job.ID)

	// The next minute is another key.
	f.Clock.Advance(time.Minute)
	assert.NotEqual(t, key, jobstate.KeyAt(f.Clock.Now(), time.Minute, "user-1", "a cat", "512x512"))
	assert.NotEqual(t, jobstate.Key("ab", "c"), jobstate.Key("a", "bc"))

	// Retention.
	g := NewFixture(t, newStore, nil, withRetention(m.QueueSpec(), time.Hour))
	r1, err := g.Eng.Create(g.Ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	g.Clock.Advance(59 * time.Minute)
	r2, err := g.Eng.Create(g.Ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, r1.Job.ID, r2.Job.ID)
	g.Clock.Advance(time.Minute)
	r3, err := g.Eng.Create(g.Ctx, jobstate.NewJob{Machine: "queue", Key: "k"})
	require.NoError(t, err)
	assert.False(t, r3.Existing, "the key is released when its retention ends")
}

func withRetention(s jobstate.Spec, d time.Duration) jobstate.Spec {
	s.Policy.Idempotency.Retention = d
	return s
}

func testCreationGuardAndEffect(t *testing.T, newStore NewStore) {
	var credits Counter
	quota := errors.New("quota exceeded")
	h := imagegen.Plain()
	h.Create = hook.Guard{Name: "quota", Func: func(_ context.Context, in jobstate.GuardInput) error {
		if in.Actor == "broke" {
			return quota
		}
		return nil
	}}
	h.ReserveCredits = hook.Effect{Name: "reserve credits", Func: credits.Effect}
	f := NewFixture(t, newStore, nil, imagegen.Spec(h))
	_, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Actor: "broke", Key: "k1"})
	assert.ErrorIs(t, err, jobstate.ErrGuardRefused)
	assert.ErrorIs(t, err, quota)
	assert.Zero(t, credits.Get(), "no effect when the guard refuses")

	var wg sync.WaitGroup
	ids := make([]uuid.UUID, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := f.Eng.Create(f.Ctx, jobstate.NewJob{Machine: imagegen.Name, Actor: "alice", Key: "k2", Payload: []byte("p")})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = c.Job.ID
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int64(1), credits.Get(), "concurrent creates with one key: one credit reservation")
	for _, id := range ids {
		assert.Equal(t, ids[0], id)
	}

	boom := errors.New("ledger down")
	h.ReserveCredits.Func = func(context.Context, jobstate.Job) error { return boom }
	g := NewFixture(t, newStore, nil, imagegen.Spec(h))
	_, err = g.Eng.Create(g.Ctx, jobstate.NewJob{Machine: imagegen.Name, Key: "k3"})
	assert.ErrorIs(t, err, boom)
	_, err = g.Eng.Claim(g.Ctx, jobstate.ClaimRequest{Machine: imagegen.Name, Worker: "w"})
	assert.ErrorIs(t, err, jobstate.ErrNoJob, "a failed creation effect leaves no job")
}

// testRedrive: an operator runs a dead-lettered image generation job again
// (its literal machine allows it from dead_letter); the dead letter stays
// final, a new job takes its place, once.
func testRedrive(t *testing.T, newStore NewStore) {
	var credits Counter
	hooks := imagegen.Plain()
	hooks.ReserveCredits = hook.Effect{Name: "reserve credits", Func: credits.Effect}
	f := NewFixture(t, newStore, nil, imagegen.Spec(hooks))
	j := f.Create(imagegen.Name, jobstate.NewJob{Payload: []byte("a fox"), Owner: "alice", Priority: 3})
	_, err := f.Eng.Redrive(f.Ctx, j.ID, jobstate.Call{Actor: "ops"})
	assert.ErrorIs(t, err, jobstate.ErrInvalidTransition, "only from the states the machine names")
	for i := 0; i < imagegen.MaxRetries; i++ {
		c := f.Claim(imagegen.Name, "w")
		_, err := f.Eng.Fail(f.Ctx, c.Lease, errors.New("API 500"))
		require.NoError(t, err)
		f.Clock.Advance(time.Minute)
		f.Sweep()
	}
	dead := f.Snapshot(j.ID)
	require.Equal(t, imagegen.DeadLetter, dead.Job.State)

	n, err := f.Eng.Redrive(f.Ctx, j.ID, jobstate.Call{Actor: "ops", Reason: "API fixed"})
	require.NoError(t, err)
	assert.NotEqual(t, j.ID, n.ID)
	assert.Equal(t, imagegen.Queued, n.State)
	assert.Equal(t, []byte("a fox"), n.Payload)
	assert.Equal(t, "alice", n.Owner)
	assert.Equal(t, 3, n.Priority)
	assert.Equal(t, imagegen.EngineMaxRetries, n.MaxRetries)
	assert.Equal(t, int64(2), credits.Get(), "the new job goes through the creation effect")
	h, err := f.Eng.History(f.Ctx, n.ID)
	require.NoError(t, err)
	assert.Equal(t, "ops", h[0].Actor)
	assert.Contains(t, h[0].Reason, j.ID.String())
	assert.Contains(t, h[0].Reason, "API fixed")

	after := f.Snapshot(j.ID)
	assert.Equal(t, imagegen.DeadLetter, after.Job.State, "the dead letter stays final")
	assert.Equal(t, dead.History, after.History)
	require.Len(t, after.Effects, 1)
	assert.Equal(t, jobstate.RedriveEffect, after.Effects[0].Name)
	assert.Equal(t, "ops", after.Effects[0].Actor)

	_, err = f.Eng.Redrive(f.Ctx, j.ID, jobstate.Call{Actor: "ops"})
	assert.ErrorIs(t, err, jobstate.ErrEffectApplied, "a job is redriven once")
	assert.Equal(t, int64(2), credits.Get())
}

// testRedriveObserverAndFiring: observers hear of the new job after the
// old job's update, so they may act on the old job; the creation effect
// sees the creation record through FiringOf. It runs the parking machine,
// redriven from rejected.
func testRedriveObserverAndFiring(t *testing.T, newStore NewStore) {
	var reasons []string
	spec := m.ParkingSpec()
	spec.Policy.RedriveFrom = []jobstate.State{m.PRejected}
	spec.Create.Effect = func(ctx context.Context, j jobstate.Job) error {
		f, ok := jobstate.FiringOf(ctx)
		require.True(t, ok)
		reasons = append(reasons, f.Transition.Actor+": "+f.Transition.Reason)
		return nil
	}
	var f *Fixture
	var old uuid.UUID
	var touched bool
	obs := jobstate.WithObserver(func(ctx context.Context, j jobstate.Job, tr jobstate.Transition) {
		if tr.Event == jobstate.EventCreate && j.ID != old && old != uuid.Nil {
			_, err := f.Eng.Apply(ctx, old, "nothing", jobstate.Call{}) // takes the old job's lock
			touched = errors.Is(err, jobstate.ErrUnknownEffect)
		}
	})
	f = NewFixture(t, newStore, []jobstate.Option{obs}, spec)
	j := f.Create("parking", jobstate.NewJob{Actor: "alice", Reason: "first"})
	f.Fire(j.ID, m.Reject, "moderator")
	old = j.ID
	_, err := f.Eng.Redrive(f.Ctx, j.ID, jobstate.Call{Actor: "ops"})
	require.NoError(t, err)
	assert.True(t, touched, "the observer ran, and could use the old job")
	require.Len(t, reasons, 2)
	assert.Equal(t, "alice: first", reasons[0])
	assert.Contains(t, reasons[1], "ops: redrive of job")
}

// bountySpec is the bounty marketplace's literal machine with its Plain
// hooks, the refund counted by refunds.
func bountySpec(refunds *Counter) jobstate.Spec {
	h := bounty.Plain()
	h.Refund = hook.Effect{Name: "refund", Func: refunds.Effect}
	return bounty.Spec(h)
}
