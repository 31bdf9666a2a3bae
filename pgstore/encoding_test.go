package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// uuidTypes records whether pgx was asked to encode a uuid.UUID or to
// scan into one (an array's elements included: they reach the element
// codec one by one). pgx handles those through their text form, since
// uuid.UUID is a driver.Valuer and an sql.Scanner: the store passes and
// scans pgtype.UUID.
type uuidTypes struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (u *uuidTypes) note(what string, v any) {
	switch v.(type) {
	case uuid.UUID, *uuid.UUID:
		u.mu.Lock()
		u.seen[fmt.Sprintf("%s %T", what, v)] = true
		u.mu.Unlock()
	}
}

// noteCodec is PostgreSQL's uuid codec noting the Go types it is asked
// to encode and to scan into.
type noteCodec struct {
	pgtype.UUIDCodec
	u *uuidTypes
}

func (c noteCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	c.u.note("encoded", value)
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c noteCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	c.u.note("scanned into", target)
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

// pool returns a pool on the test cluster whose connections note in u
// the Go types of what they encode as, and scan from, uuid and uuid[].
func (u *uuidTypes) pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return sharedPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 4
		cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
			elem := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: noteCodec{u: u}}
			c.TypeMap().RegisterType(elem)
			c.TypeMap().RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: elem}})
			return nil
		}
	})
}

// TestIDsCrossAsBytes runs every kind of statement the store sends (a
// creation with and without a key, a batch by COPY with keys, single and
// batch claims, heartbeats, commits alone and in a group, a retry, a
// once-only effect, every read, a listing with a cursor, the
// sweep's reads and a prune) and checks that pgx was never handed a
// uuid.UUID to encode or to scan into.
func TestIDsCrossAsBytes(t *testing.T) {
	u := &uuidTypes{seen: map[string]bool{}}
	pool := u.pool(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	for _, group := range []int{0, 8} {
		t.Run(fmt.Sprintf("group=%d", group), func(t *testing.T) {
			store, err := pgstore.New(pool, pgstore.Options{Schema: schema, GroupCommit: group})
			require.NoError(t, err)
			t.Cleanup(store.Close)
			spec := workSpec()
			spec.Effects = []jobstate.EffectSpec{{Name: "notify", In: []jobstate.State{"done"}, Run: func(context.Context, jobstate.Job) error { return nil }}}
			def, err := jobstate.NewDefinition(spec)
			require.NoError(t, err)
			clock := jobstate.NewManualClock(epoch)
			eng, err := jobstate.New(store, jobstate.WithMachines(def), jobstate.WithClock(clock))
			require.NoError(t, err)

			key := fmt.Sprint("key-", group)
			first, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: key})
			require.NoError(t, err)
			again, err := eng.Create(ctx, jobstate.NewJob{Machine: "work", Key: key})
			require.NoError(t, err)
			require.True(t, again.Existing)
			_, err = eng.Create(ctx, jobstate.NewJob{Machine: "work"})
			require.NoError(t, err)
			many := []jobstate.NewJob{{Machine: "work", Key: key}, {Machine: "work", Key: key + "-new"}, {Machine: "work"}, {Machine: "work"}}
			_, err = eng.CreateMany(ctx, many)
			require.NoError(t, err)

			one, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"})
			require.NoError(t, err)
			lease, err := eng.Heartbeat(ctx, one.Lease)
			require.NoError(t, err)
			_, err = eng.Succeed(ctx, lease, jobstate.CommitInput{Result: []byte(`"ok"`)})
			require.NoError(t, err)
			_, err = eng.Apply(ctx, one.Job.ID, "notify", jobstate.Call{Actor: "ops"})
			require.NoError(t, err)

			batch, err := eng.ClaimMany(ctx, jobstate.ClaimRequest{Machine: "work", Worker: "w"}, 3)
			require.NoError(t, err)
			require.NotEmpty(t, batch)
			// Concurrent ends, so that a group store groups them.
			errs := make([]error, len(batch))
			var wg sync.WaitGroup
			for i, c := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 0 {
						_, errs[i] = eng.Fail(ctx, c.Lease, fmt.Errorf("try again"))
						return
					}
					_, errs[i] = eng.Succeed(ctx, c.Lease, jobstate.CommitInput{})
				}()
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}

			_, err = eng.Get(ctx, first.Job.ID)
			require.NoError(t, err)
			_, err = eng.History(ctx, one.Job.ID)
			require.NoError(t, err)
			_, err = eng.Executions(ctx, one.Job.ID)
			require.NoError(t, err)
			effects, err := eng.Effects(ctx, one.Job.ID)
			require.NoError(t, err)
			require.NotEmpty(t, effects)
			page, err := eng.List(ctx, jobstate.ListQuery{Machine: "work", Limit: 2}, "")
			require.NoError(t, err)
			require.NotEmpty(t, page.Next)
			_, err = eng.List(ctx, jobstate.ListQuery{Machine: "work", Limit: 2}, page.Next)
			require.NoError(t, err)
			_, err = eng.Counts(ctx, "work")
			require.NoError(t, err)
			clock.Advance(time.Hour)
			_, err = eng.Sweep(ctx)
			require.NoError(t, err)
			_, err = eng.Stuck(ctx, "work", time.Second, 10)
			require.NoError(t, err)
			_, err = eng.Prune(ctx, time.Minute, 10)
			require.NoError(t, err)
		})
	}
	require.Empty(t, u.seen, "pgx was handed uuid.UUID values, which it encodes and decodes through their text form")
}
