package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore"
	"github.com/jobstate/jobstate/pgstore/pgtest"
)

// TestClaimDurability: a claim made in a transaction of its own commits
// with synchronous_commit off unless Options.DurableClaims is set; every
// other write keeps the session's setting (on here), and so does a claim
// made in the caller's transaction. The claim rule's effect reads the
// setting of the transaction it runs in, through Tx.
func TestClaimDurability(t *testing.T) {
	cluster, _ := pgtest.Shared(t)
	ctx := context.Background()
	u, err := url.Parse(cluster.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("synchronous_commit", "on") // the shared cluster runs with it off
	u.RawQuery = q.Encode()
	pool, err := pgtest.NewPool(ctx, u.String(), 4)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	for _, tc := range []struct {
		durable  bool
		inCaller bool
		many     bool
		want     string
	}{
		{durable: false, want: "off"},
		{durable: false, many: true, want: "off"},
		{durable: true, many: true, want: "on"},
		{durable: true, want: "on"},
		{durable: false, inCaller: true, want: "on"},
	} {
		t.Run(fmt.Sprintf("durable=%v/caller=%v/many=%v", tc.durable, tc.inCaller, tc.many), func(t *testing.T) {
			schema := pgtest.Schema(t)
			store, err := pgstore.New(pool, pgstore.Options{Schema: schema, DurableClaims: tc.durable})
			require.NoError(t, err)
			t.Cleanup(store.Close)
			seen := map[jobstate.Event]string{}
			show := func(ev jobstate.Event) jobstate.EffectFunc {
				return func(ctx context.Context, _ jobstate.Job) error {
					tx, ok := pgstore.Tx(ctx)
					if !ok {
						return errors.New("no transaction in the effect's context")
					}
					var v string
					if err := tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
						return err
					}
					seen[ev] = v
					return nil
				}
			}
			spec := workSpec()
			for i := range spec.Rules {
				spec.Rules[i].Effect = show(spec.Rules[i].Event)
			}
			def, err := jobstate.NewDefinition(spec)
			require.NoError(t, err)
			eng, err := jobstate.New(store, jobstate.WithMachines(def))
			require.NoError(t, err)
			_, err = eng.Create(ctx, jobstate.NewJob{Machine: "work"})
			require.NoError(t, err)
			claimCtx := ctx
			var tx interface{ Commit(context.Context) error }
			if tc.inCaller {
				ptx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = ptx.Rollback(ctx) }()
				claimCtx, tx = pgstore.WithTx(ctx, ptx), ptx
			}
			req := jobstate.ClaimRequest{Machine: "work", Worker: "w"}
			var cl jobstate.Claimed
			if tc.many {
				cs, err := eng.ClaimMany(claimCtx, req, 4)
				require.NoError(t, err)
				require.Len(t, cs, 1)
				cl = cs[0]
			} else {
				cl, err = eng.Claim(claimCtx, req)
				require.NoError(t, err)
			}
			if tx != nil {
				require.NoError(t, tx.Commit(ctx))
			}
			_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, seen[jobstate.EventClaim], "the claim's transaction")
			assert.Equal(t, "on", seen[jobstate.EventSucceed], "the commit's transaction")
		})
	}
}
