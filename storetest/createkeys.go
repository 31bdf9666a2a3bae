package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/internal/enginesuite"
)

// runCreateBatchKeys checks batches with idempotency keys, directly and
// through Engine.CreateMany (subtests of RunCreateBatch).
func runCreateBatchKeys(t *testing.T, newStore NewStore) {
	t.Run("DirectExisting", func(t *testing.T) { testCreateBatchExisting(t, newStore) })
	t.Run("SameKeyTwice", func(t *testing.T) { testCreateManySameKeyTwice(t, newStore) })
	t.Run("KeyHeld", func(t *testing.T) { testCreateManyKeyHeld(t, newStore) })
	t.Run("KeyConflict", func(t *testing.T) { testCreateManyKeyConflict(t, newStore) })
	t.Run("KeysConcurrent", func(t *testing.T) { testCreateManyKeysConcurrent(t, newStore) })
	t.Run("KeysAsCreate", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) { propCreateManyKeys(rt, t, newStore) })
	})
}

// bulk2Spec is bulkSpec under another name ("bulk2"), a second machine
// whose keys are other keys than transfer's.
func bulk2Spec(effects *enginesuite.Counter) jobstate.Spec {
	spec := bulkSpec(effects)
	spec.Name = "bulk2"
	return spec
}

// holder returns the job holding key in machine as s holds it (nil when
// the key is free), asking s.Create to keep it: a zero Write keeps the
// holder and writes nothing, and with no holder is refused
// (ErrInvalidArgument) with nothing written.
func holder(t tb, s jobstate.Store, machine, key string) *jobstate.Job {
	t.Helper()
	var seen *jobstate.Job
	j, created, err := s.Create(context.Background(), machine, key, func(_ context.Context, ex *jobstate.Job) (jobstate.Write, error) {
		seen = ex
		return jobstate.Write{}, nil
	})
	switch {
	case seen == nil && errors.Is(err, jobstate.ErrInvalidArgument):
		return nil
	case seen == nil || err != nil || created:
		t.Fatalf("holder of %s/%s: existing %v, created %v, error %v", machine, key, seen, created, err)
	case j.ID != seen.ID:
		t.Fatalf("holder of %s/%s: Create returned %s, its function saw %s", machine, key, j.ID, seen.ID)
	}
	return &j
}

// testCreateBatchExisting: CreateBatch calls the function of a keyed job
// with the job holding its key: nil for a free key (and for the same key
// of another machine), the stored holder, or the job an earlier call of
// the same batch created under it; a zero Write keeps that job
// (Existing), a new Write takes the key over.
func testCreateBatchExisting(t *testing.T, newStore NewStore) {
	s := newStore(t)
	bc := s.(jobstate.BatchCreator)
	ctx := context.Background()
	keyed := func(machine, key string) jobstate.Job {
		j := mkJob(Epoch)
		j.Machine, j.IdempotencyKey = machine, key
		return j
	}
	held := keyed("m", "held")
	_, created, err := s.Create(ctx, "m", "held", func(context.Context, *jobstate.Job) (jobstate.Write, error) { return creation(held), nil })
	require.NoError(t, err)
	require.True(t, created)
	held = load(t, s, held.ID).Job

	a, other, free, c := keyed("m", "k"), keyed("m2", "k"), keyed("m", ""), keyed("m", "k")
	keys := []jobstate.BatchKey{{Machine: "m", Key: "k"}, {Machine: "m", Key: "k"}, {Machine: "m", Key: "held"}, {}, {Machine: "m2", Key: "k"}, {Machine: "m", Key: "k"}}
	writes := []jobstate.Write{creation(a), {}, {}, creation(free), creation(other), creation(c)}
	seen := make([]*jobstate.Job, len(keys))
	calls := 0
	got, err := bc.CreateBatch(ctx, keys, func(_ context.Context, i int, ex *jobstate.Job) (jobstate.Write, error) {
		calls++
		if ex != nil {
			cp := *ex
			seen[i] = &cp
		}
		return writes[i], nil
	})
	require.NoError(t, err)
	require.Len(t, got, len(keys))
	assert.Equal(t, len(keys), calls, "one call per job")

	assert.Nil(t, seen[0], "a free key: no existing job")
	if assert.NotNil(t, seen[1], "a repeated key: the job created under it") {
		assert.Equal(t, got[0].Job, *seen[1])
	}
	if assert.NotNil(t, seen[2], "a held key: its holder") {
		assert.Equal(t, held, *seen[2])
	}
	assert.Nil(t, seen[3], "no key: no existing job")
	assert.Nil(t, seen[4], "the same key on another machine is another key")
	if assert.NotNil(t, seen[5], "a repeated key: the job created under it") {
		assert.Equal(t, a.ID, seen[5].ID)
	}

	wantIDs := []uuid.UUID{a.ID, a.ID, held.ID, free.ID, other.ID, c.ID}
	wantExisting := []bool{false, true, true, false, false, false}
	for i, g := range got {
		assert.Equal(t, wantIDs[i], g.Job.ID, "result %d", i)
		assert.Equal(t, wantExisting[i], g.Existing, "result %d", i)
	}
	assert.Equal(t, got[0].Job, got[1].Job, "the job kept is the job created")
	assert.Equal(t, held, got[2].Job, "the holder kept is the holder stored")
	checkReturnedAreCreated(t, s, []uuid.UUID{a.ID, free.ID, other.ID, c.ID}, got)

	for _, h := range []struct {
		machine, key string
		want         uuid.UUID
	}{{"m", "k", c.ID}, {"m", "held", held.ID}, {"m2", "k", other.ID}} {
		if j := holder(t, s, h.machine, h.key); assert.NotNil(t, j, "%s/%s", h.machine, h.key) {
			assert.Equal(t, h.want, j.ID, "the holder of %s/%s", h.machine, h.key)
		}
	}
}

// testCreateManySameKeyTwice: the same key twice in one CreateMany makes
// one job: the first creates it, the second is Existing with the first's
// job; one id drawn, one effect run and one observer notice for it.
func testCreateManySameKeyTwice(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	var obs recorder
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen), obs.option()}, bulkSpec(&fx))
	jobs := []jobstate.NewJob{
		{Machine: "transfer", Key: "k", Payload: []byte("p"), Actor: "first"},
		{Machine: "transfer", Payload: []byte("q")},
		{Machine: "transfer", Key: "k", Payload: []byte("p"), Actor: "second"},
	}
	got, err := f.Eng.CreateMany(f.Ctx, jobs)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.False(t, got[0].Existing)
	assert.False(t, got[1].Existing)
	assert.True(t, got[2].Existing, "the second job under the key finds the first")
	assert.Equal(t, got[0].Job, got[2].Job)
	assert.Equal(t, "k", got[0].Job.IdempotencyKey)

	assert.Len(t, ids.drawn(), 2, "two jobs built")
	assert.Equal(t, int64(2), fx.Get(), "two creation effects")
	assert.Equal(t, []uuid.UUID{got[0].Job.ID, got[1].Job.ID}, obs.told(), "observers told of each job created, once")
	checkReturnedAreCreated(t, f.Store, ids.drawn(), got)
	if h := f.Snapshot(got[0].Job.ID).History; assert.Len(t, h, 1) {
		assert.Equal(t, "first", h[0].Actor, "the record is the first job's")
	}
	if h := holder(t, f.Store, "transfer", "k"); assert.NotNil(t, h) {
		assert.Equal(t, got[0].Job.ID, h.ID)
	}
}

// testCreateManyKeyHeld: a key held by a job Create made before is
// returned Existing with that job, and neither the creation guard nor
// the effect runs for it (the guard would refuse "bad", the effect fail
// on "boom": each under the holder's fingerprint); no id is drawn and
// no observer told for it.
func testCreateManyKeyHeld(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	var obs recorder
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen), obs.option()}, bulkSpec(&fx))
	h1 := f.Create("transfer", jobstate.NewJob{Key: "k1", Payload: []byte("ok"), Fingerprint: "fp1"})
	h2 := f.Create("transfer", jobstate.NewJob{Key: "k2", Payload: []byte("ok"), Fingerprint: "fp2"})
	effects, drawn, told := fx.Get(), len(ids.drawn()), len(obs.told())

	got, err := f.Eng.CreateMany(f.Ctx, []jobstate.NewJob{
		{Machine: "transfer", Key: "k1", Payload: []byte("boom"), Fingerprint: "fp1"},
		{Machine: "transfer", Key: "k2", Payload: []byte("bad"), Fingerprint: "fp2"},
		{Machine: "transfer", Payload: []byte("new")},
	})
	require.NoError(t, err, "no guard or effect ran for the held keys")
	require.Len(t, got, 3)
	assert.Equal(t, jobstate.Created{Job: h1, Existing: true}, got[0])
	assert.Equal(t, jobstate.Created{Job: h2, Existing: true}, got[1])
	assert.False(t, got[2].Existing)

	assert.Equal(t, effects+1, fx.Get(), "one effect: the new job's")
	assert.Len(t, ids.drawn(), drawn+1, "one job built: the new one")
	assert.Equal(t, []uuid.UUID{got[2].Job.ID}, obs.told()[told:], "observers told of the new job alone")
	checkReturnedAreCreated(t, f.Store, ids.drawn()[drawn:], got)
	assert.Equal(t, h1, f.Get(h1.ID), "the holder is untouched")
}

// testCreateManyKeyConflict: a key reused with another fingerprint, held
// by a job stored before or by one the same batch created, stops the
// batch with a *KeyConflictError naming the key and its holder; the
// results are exactly the jobs created (none on a store with
// transactions, the jobs decided before the conflict in memory), and the
// keys are held accordingly.
func testCreateManyKeyConflict(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	var obs recorder
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen), obs.option()}, bulkSpec(&fx))
	held := f.Create("transfer", jobstate.NewJob{Key: "k", Payload: []byte("a")})

	for _, tc := range []struct {
		name string
		key  string // the key in conflict
		jobs []jobstate.NewJob
	}{
		{"held before", "k", []jobstate.NewJob{
			{Machine: "transfer", Payload: []byte("x")},
			{Machine: "transfer", Key: "k2", Payload: []byte("y")},
			{Machine: "transfer", Key: "k", Payload: []byte("b")},
			{Machine: "transfer", Payload: []byte("z")},
		}},
		{"held in the batch", "k3", []jobstate.NewJob{
			{Machine: "transfer", Key: "k3", Payload: []byte("a")},
			{Machine: "transfer", Key: "k4", Payload: []byte("a")},
			{Machine: "transfer", Key: "k3", Payload: []byte("b")},
			{Machine: "transfer", Payload: []byte("z")},
		}},
	} {
		before, told := len(ids.drawn()), len(obs.told())
		got, err := f.Eng.CreateMany(f.Ctx, tc.jobs)
		drawn := ids.drawn()[before:]
		var kc *jobstate.KeyConflictError
		require.ErrorAs(t, err, &kc, tc.name)
		assert.ErrorIs(t, err, jobstate.ErrKeyConflict, tc.name)
		assert.Equal(t, tc.key, kc.Key, tc.name)
		wantHolder := held.ID
		if tc.key != "k" {
			require.NotEmpty(t, drawn, tc.name)
			wantHolder = drawn[0]
		}
		assert.Equal(t, wantHolder, kc.Holder, "%s: the error names the holder", tc.name)

		checkReturnedAreCreated(t, f.Store, drawn, got)
		assert.Len(t, drawn, 2, "%s: the batch stopped at the conflict, the two jobs before it built", tc.name)
		if len(got) > 0 {
			require.Len(t, got, 2, "%s: a store without transactions returns the jobs decided before the conflict", tc.name)
		}
		assert.Equal(t, newIDs(got), obs.told()[told:], "%s: observers told of the jobs created alone", tc.name)
		if h := holder(t, f.Store, "transfer", "k"); assert.NotNil(t, h, tc.name) {
			assert.Equal(t, held.ID, h.ID, "%s: the key in conflict keeps its holder", tc.name)
		}
		for i, nj := range tc.jobs[:2] {
			if nj.Key == "" {
				continue
			}
			h := holder(t, f.Store, "transfer", nj.Key)
			if len(got) == 0 {
				assert.Nil(t, h, "%s: nothing created, %s stays free", tc.name, nj.Key)
			} else if assert.NotNil(t, h, tc.name) {
				assert.Equal(t, got[i].Job.ID, h.ID, "%s: %s held by the job created under it", tc.name, nj.Key)
			}
		}
	}
	assert.Equal(t, held, f.Get(held.ID), "the holder is untouched")
}

// waitBudget is how long a test waits for goroutines that could
// deadlock: two minutes, or less to end before the test's deadline.
func waitBudget(t *testing.T) time.Duration {
	d := 2 * time.Minute
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 15*time.Second; left < d {
			d = max(left, time.Second)
		}
	}
	return d
}

// testCreateManyKeysConcurrent: goroutines calling CreateMany at once,
// with one round's keys (over two machines) in different orders (one
// ascending, one descending, one shuffled, one with each key twice), all
// succeed without waiting on each other in a cycle; each key gets one
// job, built once (one id drawn, one effect, one observer notice), that
// every other result under the key returns as Existing, and that holds
// the key in the store.
func testCreateManyKeysConcurrent(t *testing.T, newStore NewStore) {
	var fx enginesuite.Counter
	var ids idSource
	var obs recorder
	f := newFixture(t, newStore, []jobstate.Option{jobstate.WithIDs(ids.gen), obs.option()}, bulkSpec(&fx), bulk2Spec(&fx))
	const rounds, nKeys = 10, 5
	budget := waitBudget(t)
	ctx, cancel := context.WithTimeout(f.Ctx, budget)
	defer cancel()
	rng := rand.New(rand.NewSource(1))
	type run struct {
		jobs []jobstate.NewJob
		got  []jobstate.Created
		err  error
	}
	for r := 0; r < rounds; r++ {
		keys := make([]jobstate.NewJob, nKeys)
		for i := range keys {
			machine := []string{"transfer", "bulk2"}[i%2]
			key := fmt.Sprintf("r%d-k%d", r, i)
			keys[i] = jobstate.NewJob{Machine: machine, Key: key, Payload: []byte(key)}
		}
		asc := append([]jobstate.NewJob(nil), keys...)
		desc := make([]jobstate.NewJob, nKeys)
		for i := range keys {
			desc[i] = keys[nKeys-1-i]
		}
		shuffled := append([]jobstate.NewJob(nil), keys...)
		rng.Shuffle(nKeys, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		twice := append(append([]jobstate.NewJob(nil), desc...), shuffled...)
		runs := []*run{{jobs: asc}, {jobs: desc}, {jobs: shuffled}, {jobs: twice}}

		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, ru := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ru.got, ru.err = f.Eng.CreateMany(ctx, ru.jobs)
			}()
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			select {
			case <-done:
			default:
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("round %d: CreateMany calls sharing keys still blocked after %s (a deadlock?); goroutines:\n%s", r, budget, buf)
			}
		}

		holders := map[jobstate.BatchKey]uuid.UUID{}
		for g, ru := range runs {
			require.NoError(t, ru.err, "round %d, goroutine %d", r, g)
			require.Len(t, ru.got, len(ru.jobs), "round %d, goroutine %d", r, g)
			for i, c := range ru.got {
				assert.Equal(t, ru.jobs[i].Key, c.Job.IdempotencyKey, "round %d, goroutine %d: results in order", r, g)
				assert.Equal(t, ru.jobs[i].Machine, c.Job.Machine, "round %d, goroutine %d: results in order", r, g)
				if c.Existing {
					continue
				}
				k := jobstate.BatchKey{Machine: c.Job.Machine, Key: c.Job.IdempotencyKey}
				if prev, ok := holders[k]; ok {
					t.Errorf("round %d: key %v created twice: jobs %s and %s", r, k, prev, c.Job.ID)
				}
				holders[k] = c.Job.ID
			}
		}
		require.Len(t, holders, nKeys, "round %d: one job created per key", r)
		for g, ru := range runs {
			for _, c := range ru.got {
				k := jobstate.BatchKey{Machine: c.Job.Machine, Key: c.Job.IdempotencyKey}
				assert.Equal(t, holders[k], c.Job.ID, "round %d, goroutine %d: every result under %v is its one job", r, g, k)
			}
		}
		for k, id := range holders {
			if h := holder(t, f.Store, k.Machine, k.Key); assert.NotNil(t, h) {
				assert.Equal(t, id, h.ID, "round %d: the key %v is held by its one job", r, k)
			}
		}
	}
	n := rounds * nKeys
	assert.Len(t, ids.drawn(), n, "each key's job built once")
	assert.Len(t, existing(t, f.Store, ids.drawn()), n, "each job built is stored")
	assert.Equal(t, int64(n), fx.Get(), "one creation effect per key")
	assert.Len(t, obs.told(), n, "observers told once per key")
}

// keyedSide is one side of propCreateManyKeys: an engine over a fresh
// store, with an id source drawing a fixed sequence (so that both sides
// give the same job the same id), a counter of creation effects and an
// observer.
type keyedSide struct {
	store jobstate.Store
	eng   *jobstate.Engine
	ids   *idSource
	fx    enginesuite.Counter
	obs   recorder
}

// newKeyedSide makes a side whose ids are drawn from base (the same
// sequence for every side made with the same base).
func newKeyedSide(rt *rapid.T, t *testing.T, newStore NewStore, base uuid.UUID) *keyedSide {
	k := &keyedSide{store: newStore(t)}
	n := 0
	k.ids = &idSource{next: func() uuid.UUID { // called under the source's lock
		n++
		return uuid.NewSHA1(base, []byte(strconv.Itoa(n)))
	}}
	var defs []*jobstate.Definition
	for _, spec := range []jobstate.Spec{bulkSpec(&k.fx), bulk2Spec(&k.fx)} {
		d, err := jobstate.NewDefinition(spec)
		if err != nil {
			rt.Fatal(err)
		}
		defs = append(defs, d)
	}
	eng, err := jobstate.New(k.store, jobstate.WithMachines(defs...), jobstate.WithClock(jobstate.NewManualClock(Epoch)),
		jobstate.WithIDs(k.ids.gen), k.obs.option())
	if err != nil {
		rt.Fatal(err)
	}
	k.eng = eng
	return k
}

// The machines, keys and payloads propCreateManyKeys draws its jobs from.
var (
	propMachines = []string{"transfer", "bulk2"}
	propKeys     = []string{"k1", "k2", "k3"}
	propPayloads = []string{"a", "a", "a", "b"}
)

// drawKeyedJob draws a job of propCreateManyKeys: one in four without a
// key, the others under one of a few keys of two machines, with a
// payload that is mostly the same (another one is a key conflict).
func drawKeyedJob(rt *rapid.T, label string) jobstate.NewJob {
	nj := jobstate.NewJob{
		Machine: rapid.SampledFrom(propMachines).Draw(rt, label+"machine"),
		Payload: []byte(rapid.SampledFrom(propPayloads).Draw(rt, label+"payload")),
		Actor:   label,
	}
	if rapid.IntRange(0, 3).Draw(rt, label+"keyed") > 0 {
		nj.Key = rapid.SampledFrom(propKeys).Draw(rt, label+"key")
	}
	return nj
}

// holders returns the holder of every key the property draws from (nil
// for a free key).
func holders(t tb, s jobstate.Store) map[jobstate.BatchKey]*jobstate.Job {
	out := map[jobstate.BatchKey]*jobstate.Job{}
	for _, m := range propMachines {
		for _, k := range propKeys {
			out[jobstate.BatchKey{Machine: m, Key: k}] = holder(t, s, m, k)
		}
	}
	return out
}

// snapshot reads everything s holds about the job id.
func snapshot(t tb, s jobstate.Store, id uuid.UUID) state {
	t.Helper()
	ctx := context.Background()
	var st state
	var err error
	if st.Job, err = s.Get(ctx, id); err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if st.Execs, err = s.Executions(ctx, id); err != nil {
		t.Fatalf("Executions %s: %v", id, err)
	}
	if st.History, err = s.History(ctx, id); err != nil {
		t.Fatalf("History %s: %v", id, err)
	}
	if st.Effects, err = s.Effects(ctx, id); err != nil {
		t.Fatalf("Effects %s: %v", id, err)
	}
	return st
}

// propCreateManyKeys: a random batch of jobs, keyless or under keys
// repeated in the batch or held by jobs Create made before, gives what
// Create gives for the same jobs one by one, stopping at the first
// error, on a fresh store with the same jobs before: the same results
// (jobs, ids and Existing flags), the same key conflict (key and
// holder), the same jobs stored with the same records, the same holder
// for each key, the same effects and observer notices. After a conflict
// a store with transactions has created nothing and left every key's
// holder as it was; a store without returns the results decided before
// it.
func propCreateManyKeys(rt *rapid.T, t *testing.T, newStore NewStore) {
	ctx := context.Background()
	base := uuid.New()
	batch, ref := newKeyedSide(rt, t, newStore, base), newKeyedSide(rt, t, newStore, base)

	for i, nj := range rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) jobstate.NewJob { return drawKeyedJob(rt, "before") }), 0, 4).Draw(rt, "before") {
		a, errA := batch.eng.Create(ctx, nj)
		b, errB := ref.eng.Create(ctx, nj)
		if !reflect.DeepEqual(a, b) || (errA == nil) != (errB == nil) || (errA != nil && !errors.Is(errA, jobstate.ErrKeyConflict)) {
			rt.Fatalf("job %d before the batch: Create gave %+v, %v and %+v, %v", i, a, errA, b, errB)
		}
	}
	before := holders(rt, batch.store)
	drawnBefore, effectsBefore := len(batch.ids.drawn()), batch.fx.Get()
	if !reflect.DeepEqual(before, holders(rt, ref.store)) || effectsBefore != ref.fx.Get() {
		rt.Fatalf("the two stores differ before the batch")
	}
	toldBefore := len(batch.obs.told())

	jobs := make([]jobstate.NewJob, rapid.IntRange(1, 8).Draw(rt, "n"))
	for i := range jobs {
		jobs[i] = drawKeyedJob(rt, fmt.Sprintf("job%d", i))
	}
	got, err := batch.eng.CreateMany(ctx, jobs)
	var want []jobstate.Created
	var wantErr error
	for _, nj := range jobs {
		c, err := ref.eng.Create(ctx, nj)
		if err != nil {
			wantErr = err
			break
		}
		want = append(want, c)
	}

	// The same results and error.
	if wantErr != nil && !errors.Is(wantErr, jobstate.ErrKeyConflict) {
		rt.Fatalf("Create: unexpected error %v", wantErr)
	}
	switch {
	case wantErr == nil && err != nil:
		rt.Fatalf("CreateMany failed with %v; Create one by one created them all", err)
	case wantErr != nil:
		var kc, wkc *jobstate.KeyConflictError
		if !errors.As(err, &kc) || !errors.As(wantErr, &wkc) || *kc != *wkc {
			rt.Fatalf("CreateMany failed with %v; Create one by one with %v", err, wantErr)
		}
	}
	rolledBack := err != nil && len(got) == 0
	if !rolledBack && !reflect.DeepEqual(got, want) {
		rt.Fatalf("CreateMany returned (error %v)\n%+v\nCreate one by one\n%+v", err, got, want)
	}

	// Exactly the jobs returned as new were created, as Create created
	// them, with the same records.
	checkReturnedAreCreated(rt, batch.store, batch.ids.drawn()[drawnBefore:], got)
	for _, id := range newIDs(got) {
		if a, b := snapshot(rt, batch.store, id), snapshot(rt, ref.store, id); !reflect.DeepEqual(a, b) {
			rt.Fatalf("job %s stored as\n%+v\nCreate stored\n%+v", id, a, b)
		}
	}
	if !rolledBack {
		a, b := existing(rt, batch.store, batch.ids.drawn()), existing(rt, ref.store, ref.ids.drawn())
		if !reflect.DeepEqual(a, b) {
			rt.Fatalf("%d jobs stored, Create one by one stored %d", len(a), len(b))
		}
	}

	// The same holder for each key; none changed when nothing was created.
	wantHolders := holders(rt, ref.store)
	if rolledBack {
		wantHolders = before
	}
	if h := holders(rt, batch.store); !reflect.DeepEqual(h, wantHolders) {
		rt.Fatalf("holders after the batch (error %v):\n%v\nwant\n%v", err, h, wantHolders)
	}

	// The same effects ran (none for an existing job), and observers were
	// told of the jobs created alone.
	if batch.fx.Get() != ref.fx.Get() {
		rt.Fatalf("%d creation effects, Create one by one ran %d", batch.fx.Get()-effectsBefore, ref.fx.Get()-effectsBefore)
	}
	if told := batch.obs.told()[toldBefore:]; !reflect.DeepEqual(told, newIDs(got)) {
		rt.Fatalf("observers told of %v, the jobs created are %v", told, newIDs(got))
	}
}
