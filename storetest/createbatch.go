package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
	m "github.com/jobstate/jobstate/internal/machines"
)

// RunCreateBatch checks the BatchCreator capability, directly and through
// Engine.CreateMany. It skips a store without it.
func RunCreateBatch(t *testing.T, newStore NewStore) {
	if _, ok := newStore(t).(jobstate.BatchCreator); !ok {
		t.Skip("the store has no BatchCreator capability")
	}
	t.Run("CreatesInOrder", func(t *testing.T) { testCreateManyOrder(t, newStore) })
	t.Run("RefusedBeforeTheStore", func(t *testing.T) { testCreateManyRefused(t, newStore) })
	t.Run("StopsAtAnError", func(t *testing.T) { testCreateManyStops(t, newStore) })
	t.Run("Direct", func(t *testing.T) { testCreateBatchDirect(t, newStore) })
	t.Run("DirectInvalid", func(t *testing.T) { testCreateBatchInvalid(t, newStore) })
	t.Run("ReturnedAreCreated", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propCreateMany(rt, t, newStore) })
	})
	runCreateBatchKeys(t, newStore)
}

// bulkSpec is the transfer machine with a creation guard that refuses
// the payload "bad" and a creation effect that fails on "boom" and counts
// its runs.
func bulkSpec(effects *enginesuite.Counter) jobstate.Spec {
	spec := m.TransferSpec()
	spec.Create = jobstate.CreateSpec{
		Guard: func(_ context.Context, in jobstate.GuardInput) error {
			if string(in.Job.Payload) == "bad" {
				return errBadPayload
			}
			return nil
		},
		Effect: func(ctx context.Context, j jobstate.Job) error {
			if string(j.Payload) == "boom" {
				return errBoom
			}
			return effects.Effect(ctx, j)
		},
	}
	return spec
}

var (
	errBadPayload = errors.New("bad payload")
	errBoom       = errors.New("boom")
)

// idSource hands out new ids and remembers them, so that a test can look
// up every job an engine may have created.
type idSource struct {
	mu   sync.Mutex
	ids  []uuid.UUID
	next func() uuid.UUID // nil: a new random id
}

func (s *idSource) gen() (uuid.UUID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := uuid.New()
	if s.next != nil {
		id = s.next()
	}
	s.ids = append(s.ids, id)
	return id, nil
}

func (s *idSource) drawn() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uuid.UUID(nil), s.ids...)
}

// tb is what the checks below need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// recorder is an observer remembering the jobs it was told of.
type recorder struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

// option returns the engine option adding r as an observer.
func (r *recorder) option() jobstate.Option {
	return jobstate.WithObserver(func(_ context.Context, j jobstate.Job, _ jobstate.Transition) {
		r.mu.Lock()
		r.ids = append(r.ids, j.ID)
		r.mu.Unlock()
	})
}

// told returns the ids of the jobs told of, in order (never nil).
func (r *recorder) told() []uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uuid.UUID{}, r.ids...)
}

// newIDs returns the ids of the results that are not Existing, in order
// (never nil).
func newIDs(got []jobstate.Created) []uuid.UUID {
	out := []uuid.UUID{}
	for _, c := range got {
		if !c.Existing {
			out = append(out, c.Job.ID)
		}
	}
	return out
}

// existing returns which of ids name a stored job.
func existing(t tb, s jobstate.Store, ids []uuid.UUID) map[uuid.UUID]bool {
	t.Helper()
	out := map[uuid.UUID]bool{}
	for _, id := range ids {
		_, err := s.Get(context.Background(), id)
		switch {
		case err == nil:
			out[id] = true
		case errors.Is(err, jobstate.ErrNotFound):
		default:
			t.Fatalf("Get %s: %v", id, err)
		}
	}
	return out
}

// testCreateManyOrder: jobs without keys are created in order, each as
// Create makes it (state, version, fields, creation record, effect,
// observers), the engine keeping its own copy of each payload; no jobs
// is nil and no error.
func testCreateManyOrder(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	var told []jobstate.Transition
	var mu sync.Mutex
	observer := jobstate.WithObserver(func(_ context.Context, _ jobstate.Job, tr jobstate.Transition) {
		mu.Lock()
		told = append(told, tr)
		mu.Unlock()
	})
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen), observer}, bulkSpec(&fx))
	payload := []byte("p1")
	jobs := []jobstate.NewJob{
		{Machine: "transfer", Payload: payload, Priority: 1, Actor: "importer", Reason: "bulk load"},
		{Machine: "transfer", Payload: []byte("p2"), Priority: 5, Owner: "alice"},
		{Machine: "transfer", Payload: []byte("p3"), NotBefore: Epoch.Add(time.Hour)},
	}
	got, err := f.Eng.CreateMany(f.Ctx, jobs)
	require.NoError(t, err)
	require.Len(t, got, 3)
	copy(payload, "XX") // the caller reuses its buffer
	for i, c := range got {
		assert.False(t, c.Existing, "no key: every job is new")
		j := c.Job
		assert.Equal(t, ids.drawn()[i], j.ID, "jobs in order")
		st := f.Snapshot(j.ID)
		assert.Equal(t, j, st.Job, "the job returned is the job stored")
		assert.Equal(t, m.TQueued, j.State)
		assert.Equal(t, int64(1), j.Version)
		assert.Equal(t, jobs[i].Priority, j.Priority)
		assert.Equal(t, jobs[i].Owner, j.Owner)
		require.Len(t, st.History, 1)
		assert.Equal(t, jobstate.EventCreate, st.History[0].Event)
		assert.Equal(t, jobs[i].Actor, st.History[0].Actor)
		assert.Equal(t, jobs[i].Reason, st.History[0].Reason)
	}
	assert.Equal(t, []byte("p1"), f.Get(got[0].Job.ID).Payload, "the engine keeps its own copy of the payload")
	assert.Equal(t, int64(3), fx.Get(), "one creation effect per job")
	assert.Len(t, told, 3, "observers told of each creation")

	// Claimable in claim order, the job not yet due left alone.
	claimed, err := f.Eng.ClaimMany(f.Ctx, jobstate.ClaimRequest{Machine: "transfer", Worker: "w"}, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	assert.Equal(t, got[1].Job.ID, claimed[0].Job.ID)
	assert.Equal(t, got[0].Job.ID, claimed[1].Job.ID)

	none, err := f.Eng.CreateMany(f.Ctx, nil)
	assert.NoError(t, err)
	assert.Empty(t, none)
}

// testCreateManyRefused: a job CreateMany refuses fails the whole call
// before the store is called: nothing is created and no effect runs.
func testCreateManyRefused(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen)}, bulkSpec(&fx))
	ok := jobstate.NewJob{Machine: "transfer"}
	for _, tc := range []struct {
		name string
		bad  jobstate.NewJob
		want error
	}{
		{"key with a NUL", jobstate.NewJob{Machine: "transfer", Key: "k\x00"}, jobstate.ErrInvalidArgument},
		{"keyed, negative TTL", jobstate.NewJob{Machine: "transfer", Key: "k", TTL: -time.Second}, jobstate.ErrInvalidArgument},
		{"negative TTL", jobstate.NewJob{Machine: "transfer", TTL: -time.Second}, jobstate.ErrInvalidArgument},
		{"time out of range", jobstate.NewJob{Machine: "transfer", NotBefore: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)}, jobstate.ErrInvalidArgument},
		{"unknown machine", jobstate.NewJob{Machine: "nope"}, jobstate.ErrUnknownMachine},
	} {
		_, err := f.Eng.CreateMany(f.Ctx, []jobstate.NewJob{ok, ok, tc.bad, ok})
		assert.ErrorIs(t, err, tc.want, tc.name)
		assert.Contains(t, fmt.Sprint(err), "job 2", "%s: the error names the job", tc.name)
	}
	assert.Empty(t, ids.drawn(), "no job was built")
	assert.Zero(t, fx.Get(), "no effect ran")
}

// testCreateManyStops: a refusal or an effect error during the batch is
// returned; the jobs returned beside it are exactly the jobs created
// (none on a store with transactions, those before it in memory).
func testCreateManyStops(t *testing.T, newStore NewStore) {
	for _, tc := range []struct {
		payload string
		want    error
	}{
		{"bad", jobstate.ErrGuardRefused},
		{"boom", errBoom},
	} {
		var fx enginesuite.Counter
		var ids idSource
		f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen)}, bulkSpec(&fx))
		jobs := []jobstate.NewJob{
			{Machine: "transfer", Payload: []byte("a")},
			{Machine: "transfer", Payload: []byte("b")},
			{Machine: "transfer", Payload: []byte(tc.payload)},
			{Machine: "transfer", Payload: []byte("d")},
		}
		got, err := f.Eng.CreateMany(f.Ctx, jobs)
		require.ErrorIs(t, err, tc.want)
		checkReturnedAreCreated(t, f.Store, ids.drawn(), got)
		assert.Len(t, ids.drawn(), 3, "%s: the batch stopped at the third job", tc.payload)
		if len(got) > 0 {
			require.Len(t, got, 2, "%s: a store without transactions keeps the jobs before the error", tc.payload)
			assert.Equal(t, []byte("b"), got[1].Job.Payload)
		}
	}
}

// checkReturnedAreCreated: of the ids drawn (the new ids a batch may
// have used), exactly those of the results that are not Existing name
// stored jobs; every result, new or Existing, is stored as returned, and
// a new one has its creation record alone.
func checkReturnedAreCreated(t tb, s jobstate.Store, drawn []uuid.UUID, got []jobstate.Created) {
	t.Helper()
	stored := existing(t, s, drawn)
	want := map[uuid.UUID]bool{}
	for _, c := range got {
		j := c.Job
		st, err := s.Get(context.Background(), j.ID)
		if assert.NoError(t, err, "a job returned is not stored") {
			assert.Equal(t, j, st, "the job returned is the job stored")
		}
		if c.Existing {
			continue
		}
		want[j.ID] = true
		h, err := s.History(context.Background(), j.ID)
		if assert.NoError(t, err) && assert.Len(t, h, 1) {
			assert.Equal(t, jobstate.EventCreate, h[0].Event)
		}
	}
	assert.Equal(t, want, stored, "the jobs stored are exactly the new jobs returned")
}

// testCreateBatchDirect: CreateBatch without keys writes each Write as
// given, in order (a 1 MiB payload included); no keys writes nothing; a
// duplicate id, of a stored job or of an earlier job of the batch, is
// ErrDuplicateJob with the results exactly the jobs created; the
// function's error is returned as it is; a cancelled context creates
// nothing and calls no function.
func testCreateBatchDirect(t *testing.T, newStore NewStore) {
	s := newStore(t)
	bc := s.(jobstate.BatchCreator)
	ctx := context.Background()
	called := 0
	write := func(j jobstate.Job) jobstate.BatchCreateFunc {
		return func(context.Context, int, *jobstate.Job) (jobstate.Write, error) {
			called++
			return creation(j), nil
		}
	}

	for _, keys := range [][]jobstate.BatchKey{nil, {}} {
		got, err := bc.CreateBatch(ctx, keys, write(mkJob(Epoch)))
		assert.NoError(t, err)
		assert.Empty(t, got)
	}
	assert.Zero(t, called, "no keys: no function called")

	// Two jobs, written as given, with a payload of 1 MiB.
	big := bytes.Repeat([]byte{7}, 1<<20)
	a, b := mkJob(Epoch), mkJob(Epoch.Add(time.Second))
	b.Payload = big
	batch := []jobstate.Job{a, b}
	got, err := bc.CreateBatch(ctx, make([]jobstate.BatchKey, 2), func(_ context.Context, i int, ex *jobstate.Job) (jobstate.Write, error) {
		assert.Nil(t, ex, "no key: no existing job")
		return creation(batch[i]), nil
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, c := range got {
		assert.False(t, c.Existing)
		assert.Equal(t, batch[i].ID, c.Job.ID)
		assert.Equal(t, c.Job, load(t, s, c.Job.ID).Job)
	}
	assert.True(t, bytes.Equal(big, load(t, s, b.ID).Job.Payload))

	// A duplicate id, of a stored job or within the batch.
	c, d := mkJob(Epoch), mkJob(Epoch)
	for _, tc := range []struct {
		name  string
		batch []jobstate.Job
	}{
		{"stored", []jobstate.Job{c, a}},
		{"in the batch", []jobstate.Job{d, d}},
	} {
		got, err := bc.CreateBatch(ctx, make([]jobstate.BatchKey, 2), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
			return creation(tc.batch[i]), nil
		})
		assert.ErrorIs(t, err, jobstate.ErrDuplicateJob, tc.name)
		stored := existing(t, s, []uuid.UUID{tc.batch[0].ID})
		if len(got) > 0 {
			require.Len(t, got, 1, "%s: only the first job can have been created", tc.name)
			assert.Equal(t, tc.batch[0].ID, got[0].Job.ID)
			assert.False(t, got[0].Existing)
		}
		assert.Len(t, stored, len(got), "%s: the jobs stored are the jobs returned", tc.name)
	}
	assert.Equal(t, a, load(t, s, a.ID).Job, "the stored job is untouched")

	// A function error is returned as it is.
	fail := errors.New("no")
	_, err = bc.CreateBatch(ctx, make([]jobstate.BatchKey, 1), func(context.Context, int, *jobstate.Job) (jobstate.Write, error) {
		return jobstate.Write{}, fail
	})
	assert.ErrorIs(t, err, fail)

	// A cancelled context: nothing created, the function not called.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	e := mkJob(Epoch)
	_, err = bc.CreateBatch(cctx, make([]jobstate.BatchKey, 1), write(e))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, called, "cancelled: no function called")
	assert.Empty(t, existing(t, s, []uuid.UUID{e.ID}))
}

// testCreateBatchInvalid: CreateBatch refuses with ErrInvalidArgument a
// nil function, a key without a machine (before calling any function,
// creating nothing), and a zero Write where there is no existing job to
// keep (without a key, or under a free key, which stays free); the
// results returned beside the refusal are exactly the jobs created.
func testCreateBatchInvalid(t *testing.T, newStore NewStore) {
	s := newStore(t)
	bc := s.(jobstate.BatchCreator)
	ctx := context.Background()

	_, err := bc.CreateBatch(ctx, make([]jobstate.BatchKey, 1), nil)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "nil function")

	// A key without a machine, first or after a valid job.
	for _, keys := range [][]jobstate.BatchKey{
		{{Key: "k"}, {}},
		{{}, {Key: "k"}},
	} {
		jobs := []jobstate.Job{mkJob(Epoch), mkJob(Epoch)}
		jobs[0].IdempotencyKey, jobs[1].IdempotencyKey = keys[0].Key, keys[1].Key
		called := 0
		got, err := bc.CreateBatch(ctx, keys, func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
			called++
			return creation(jobs[i]), nil
		})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a key without a machine: %+v", keys)
		if keys[0].Key != "" {
			assert.Zero(t, called, "a key without a machine first: no function called")
			assert.Empty(t, got)
		}
		checkReturnedAreCreated(t, s, []uuid.UUID{jobs[0].ID, jobs[1].ID}, got)
	}

	// A zero Write with no job to keep: without a key, under a free key,
	// and after a job created in the same batch.
	zero := func(context.Context, int, *jobstate.Job) (jobstate.Write, error) { return jobstate.Write{}, nil }
	for _, keys := range [][]jobstate.BatchKey{{{}}, {{Machine: "m", Key: "free"}}} {
		got, err := bc.CreateBatch(ctx, keys, zero)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a zero Write with nothing to keep: %+v", keys)
		assert.Empty(t, got)
	}
	first := mkJob(Epoch)
	got, err := bc.CreateBatch(ctx, make([]jobstate.BatchKey, 2), func(_ context.Context, i int, _ *jobstate.Job) (jobstate.Write, error) {
		if i == 0 {
			return creation(first), nil
		}
		return jobstate.Write{}, nil
	})
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, "a zero Write after a job created")
	checkReturnedAreCreated(t, s, []uuid.UUID{first.ID}, got)
	assert.Nil(t, holder(t, s, "m", "free"), "the free key stays free")
}

// propCreateMany: whatever goes wrong in a batch (a refusal, an effect
// error, a duplicate id of a stored job or of an earlier job of the
// batch), the jobs returned are exactly the jobs created, each stored as
// returned, and a batch without error creates every job.
func propCreateMany(rt *rapid.T, t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	ids := &idSource{}
	store := newStore(t)
	def, err := jobstate.NewDefinition(bulkSpec(&fx))
	if err != nil {
		rt.Fatal(err)
	}
	eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(jobstate.NewManualClock(Epoch)), jobstate.WithIDs(ids.gen))
	if err != nil {
		rt.Fatal(err)
	}
	ctx := context.Background()
	first, err := eng.Create(ctx, jobstate.NewJob{Machine: "transfer"})
	if err != nil {
		rt.Fatal(err)
	}
	n := rapid.IntRange(1, 8).Draw(rt, "n")
	jobs := make([]jobstate.NewJob, n)
	faults := make([]string, n)
	for i := range jobs {
		faults[i] = rapid.SampledFrom([]string{"", "", "", "bad", "boom", "dup-stored", "dup-batch"}).Draw(rt, fmt.Sprint("fault", i))
		jobs[i] = jobstate.NewJob{Machine: "transfer", Payload: []byte(fmt.Sprint("job", i)), Priority: rapid.IntRange(-2, 2).Draw(rt, fmt.Sprint("priority", i))}
		switch faults[i] {
		case "bad", "boom":
			jobs[i].Payload = []byte(faults[i])
		}
	}
	// The ids the engine draws for the batch: a fault of a duplicate id
	// draws the stored job's id or the batch's previous id.
	k := 0
	var prev uuid.UUID
	ids.next = func() uuid.UUID {
		id := uuid.New()
		if k < n {
			switch faults[k] {
			case "dup-stored":
				id = first.Job.ID
			case "dup-batch":
				if prev != uuid.Nil {
					id = prev
				}
			}
		}
		k++
		prev = id
		return id
	}
	before := len(ids.drawn())
	got, err := eng.CreateMany(ctx, jobs)
	drawn := ids.drawn()[before:]
	var candidates []uuid.UUID
	for _, id := range drawn {
		if id != first.Job.ID {
			candidates = append(candidates, id)
		}
	}
	checkReturnedAreCreated(rt, store, candidates, got)
	for _, c := range got {
		if c.Existing {
			rt.Fatalf("no key, but job %s returned as existing", c.Job.ID)
		}
	}
	if err == nil && len(got) != n {
		rt.Fatalf("no error, but %d jobs of %d created", len(got), n)
	}
	if err != nil && !errors.Is(err, jobstate.ErrGuardRefused) && !errors.Is(err, errBoom) && !errors.Is(err, jobstate.ErrDuplicateJob) {
		rt.Fatalf("unexpected error: %v", err)
	}
	st, err := store.Get(ctx, first.Job.ID)
	if err != nil || !reflect.DeepEqual(st, first.Job) {
		rt.Fatalf("the stored job changed (%v): %+v, was %+v", err, st, first.Job)
	}
}
