package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
)

// propBoundedRetry: invariant 3. A job whose every attempt fails
// retryably ends in its failure state after exactly MaxRetries+1 attempts;
// a permanent error ends it at once; snoozes do not count; it is never
// claimable before its not-before.
func propBoundedRetry(rt *rapid.T, t *testing.T, newStore NewStore) {
	spec, _ := genMachine(rt)
	if spec.Policy.Retry.MaxRetries == jobstate.Unlimited {
		spec.Policy.Retry.MaxRetries = 3
	}
	spec.Policy.FailOnLeaseLoss = false
	max := spec.Policy.Retry.MaxRetries
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		rt.Fatal(err)
	}
	clock := jobstate.NewManualClock(Epoch)
	eng, err := jobstate.New(newStore(t), jobstate.WithMachines(def), jobstate.WithClock(clock))
	if err != nil {
		rt.Fatal(err)
	}
	ctx := context.Background()
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "gen"})
	if err != nil {
		rt.Fatal(err)
	}
	id := c.Job.ID
	if spec.Initial == "" {
		if _, err := eng.Fire(ctx, id, "submit", jobstate.Call{}); err != nil {
			rt.Fatal(err)
		}
	}
	failures := 0
	for attempt := 1; ; attempt++ {
		if attempt > 100 {
			rt.Fatal("no end in sight")
		}
		// Wait for the job to be due, trying to claim too early first.
		j, err := eng.Get(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if j.Kind == jobstate.KindWaiting || j.NotBefore.After(clock.Now()) {
			if _, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "gen", Worker: "w"}); !errors.Is(err, jobstate.ErrNoJob) {
				rt.Fatalf("claim before not-before: %v", err)
			}
			clock.Set(j.NotBefore)
			if _, err := eng.Sweep(ctx); err != nil {
				rt.Fatal(err)
			}
		}
		cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "gen", Worker: "w"})
		if err != nil {
			rt.Fatalf("attempt %d: %v", attempt, err)
		}
		outcome := rapid.SampledFrom([]string{"retryable", "retryable", "retryable", "retryAfter", "snooze", "crash", "permanent", "success"}).Draw(rt, fmt.Sprintf("outcome%d", attempt))
		switch outcome {
		case "retryable":
			j, err = eng.Fail(ctx, cl.Lease, errors.New("flaky"))
		case "retryAfter":
			j, err = eng.Fail(ctx, cl.Lease, jobstate.RetryAfter(errors.New("429"), 7*time.Second))
			if err == nil && !j.Terminal() && !j.NotBefore.Equal(clock.Now().Add(7*time.Second)) {
				rt.Fatalf("retry-after: not-before %s", j.NotBefore)
			}
		case "snooze":
			j, err = eng.Snooze(ctx, cl.Lease, time.Second)
		case "crash":
			clock.Set(cl.Lease.ExpiresAt)
			_, err = eng.Sweep(ctx)
			if err == nil {
				j, err = eng.Get(ctx, id)
			}
		case "permanent":
			j, err = eng.Fail(ctx, cl.Lease, jobstate.Permanent(errors.New("bad")))
		case "success":
			if !def.Can(cl.Job.State, jobstate.EventSucceed) {
				outcome = "permanent" // no commit where no succeed rule leads on
				j, err = eng.Fail(ctx, cl.Lease, jobstate.Permanent(errors.New("bad")))
				break
			}
			j, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{})
		}
		if err != nil {
			rt.Fatalf("%s: %v", outcome, err)
		}
		if outcome != "snooze" && outcome != "success" {
			failures++
		}
		if j.RetryCount > max {
			rt.Fatalf("retry count %d above max %d", j.RetryCount, max)
		}
		switch {
		case outcome == "success":
			if j.Outcome != jobstate.OutcomeSucceeded {
				rt.Fatalf("success ended in %q", j.State)
			}
			return
		case outcome == "permanent":
			if !j.Terminal() {
				rt.Fatalf("a permanent error was retried: %q", j.State)
			}
			return
		case j.Terminal():
			if failures != max+1 {
				rt.Fatalf("exhausted after %d failures, want exactly %d", failures, max+1)
			}
			if j.Outcome == jobstate.OutcomeSucceeded {
				rt.Fatalf("exhausted into a success state")
			}
			return
		case failures > max:
			rt.Fatalf("%d failures and still %q", failures, j.State)
		}
	}
}

// propIdempotency: invariant 5. Concurrent creates with one key yield one
// job and one creation effect; other keys are independent.
func propIdempotency(rt *rapid.T, t *testing.T, newStore NewStore) {
	var mu sync.Mutex
	effects := 0
	spec, _ := genMachine(rt)
	spec.Create.Effect = func(context.Context, jobstate.Job) error {
		mu.Lock()
		effects++
		mu.Unlock()
		return nil
	}
	def, err := jobstate.NewDefinition(spec)
	if err != nil {
		rt.Fatal(err)
	}
	eng, err := jobstate.New(newStore(t), jobstate.WithMachines(def), jobstate.WithClock(jobstate.NewManualClock(Epoch)))
	if err != nil {
		rt.Fatal(err)
	}
	keys := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "c"}), 2, 12).Draw(rt, "keys")
	ids := make([]uuid.UUID, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func(i int, k string) {
			defer wg.Done()
			c, err := eng.Create(context.Background(), jobstate.NewJob{Machine: "gen", Key: jobstate.Key("user", k), Payload: []byte(k)})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = c.Job.ID
		}(i, k)
	}
	wg.Wait()
	byKey := make(map[string]uuid.UUID)
	for i, k := range keys {
		if prev, ok := byKey[k]; ok && prev != ids[i] {
			rt.Fatalf("key %q gave jobs %s and %s", k, prev, ids[i])
		}
		byKey[k] = ids[i]
	}
	distinct := make([]string, 0, len(byKey))
	for k := range byKey {
		distinct = append(distinct, k)
	}
	sort.Strings(distinct)
	if effects != len(distinct) {
		rt.Fatalf("%d creation effects for %d keys %v", effects, len(distinct), distinct)
	}
}
