package jobstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
	"github.com/jobstate/jobstate/memstore"
)

func TestCleanErrorText(t *testing.T) {
	long := strings.Repeat("a", jobstate.MaxErrorBytes+10)
	euros := strings.Repeat("€", jobstate.MaxErrorBytes/3+5) // 3 bytes each
	for _, tc := range []struct {
		name, in, want string
	}{
		{"clean text is kept", "disk full: /var", "disk full: /var"},
		{"empty", "", ""},
		{"NUL replaced", "a\x00b", "a\uFFFDb"},
		{"each invalid byte replaced", "x\xff\xfey", "x\uFFFD\uFFFDy"},
		{"a cut sequence replaced", "\xc3(", "\uFFFD("},
		{"a replacement character is kept", "\uFFFD", "\uFFFD"},
		{"at the limit kept", long[:jobstate.MaxErrorBytes], long[:jobstate.MaxErrorBytes]},
		{"long cut with an ellipsis", long, long[:jobstate.MaxErrorBytes-3] + "…"},
		{"cut at a character boundary", euros, euros[:(jobstate.MaxErrorBytes-3)/3*3] + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, jobstate.CleanErrorText(tc.in))
		})
	}
}

// FuzzCleanErrorText: the result is valid UTF-8 without NUL, within
// MaxErrorBytes, cleaning it again changes nothing, and a text that needed
// no cleaning is returned as it is.
//
//	go test -run '^$' -fuzz FuzzCleanErrorText .
func FuzzCleanErrorText(f *testing.F) {
	f.Add("plain")
	f.Add("a\x00b\xff")
	f.Add(strings.Repeat("é", jobstate.MaxErrorBytes))
	f.Fuzz(func(t *testing.T, s string) {
		got := jobstate.CleanErrorText(s)
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("CleanErrorText(%q) = %q: not clean", s, got)
		}
		if len(got) > jobstate.MaxErrorBytes {
			t.Fatalf("CleanErrorText gave %d bytes, above %d", len(got), jobstate.MaxErrorBytes)
		}
		if again := jobstate.CleanErrorText(got); again != got {
			t.Fatalf("cleaning twice changed %q to %q", got, again)
		}
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && len(s) <= jobstate.MaxErrorBytes && got != s {
			t.Fatalf("a clean text %q came back as %q", s, got)
		}
	})
}

// TestFailRecordsAnyErrorText: a handler's error text with a NUL and
// invalid UTF-8 is recorded clean and the execution ends, whatever the
// store (the storetest Texts property runs the same on every store).
func TestFailRecordsAnyErrorText(t *testing.T) {
	ctx := context.Background()
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
	require.NoError(t, err)
	_, err = eng.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{})
	require.NoError(t, err)
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: "w"})
	require.NoError(t, err)

	job, err := eng.Fail(ctx, cl.Lease, jobstate.Permanent(errors.New("read \x00 from \xff device")))
	require.NoError(t, err)
	assert.Equal(t, m.Failed, job.State)
	assert.Equal(t, "read \uFFFD from \uFFFD device", job.LastError)
	xs, err := eng.Executions(ctx, c.Job.ID)
	require.NoError(t, err)
	require.Len(t, xs, 1)
	assert.False(t, xs[0].Status.Live())
	assert.Equal(t, job.LastError, xs[0].Error)
}

// TestTextsBeyondLimitsRefused: each text an operation carries is refused
// beyond its limit with ErrInvalidArgument, and nothing is written.
func TestTextsBeyondLimitsRefused(t *testing.T) {
	ctx := context.Background()
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	key := strings.Repeat("k", jobstate.MaxKeyBytes)
	reason := strings.Repeat("r", jobstate.MaxReasonBytes)

	t.Run("at the limits accepted", func(t *testing.T) {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Key: key, Owner: key, Actor: key, Reason: reason})
		require.NoError(t, err)
		assert.Equal(t, key, c.Job.IdempotencyKey)
		_, err = eng.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{Actor: key, Reason: reason})
		require.NoError(t, err)
		_, err = eng.ClaimJob(ctx, c.Job.ID, jobstate.ClaimRequest{Machine: "queue", Worker: key})
		require.NoError(t, err)
	})

	bad := map[string]string{
		"one byte too long": key + "k",
		"a NUL":             "a\x00b",
		"invalid UTF-8":     "a\xffb",
	}
	for name, s := range bad {
		t.Run(name, func(t *testing.T) {
			for field, nj := range map[string]jobstate.NewJob{
				"key":         {Machine: "queue", Key: s},
				"owner":       {Machine: "queue", Owner: s},
				"fingerprint": {Machine: "queue", Key: "k", Fingerprint: s},
				"actor":       {Machine: "queue", Actor: s},
			} {
				_, err := eng.Create(ctx, nj)
				assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, field)
			}
			c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
			require.NoError(t, err)
			_, err = eng.Fire(ctx, c.Job.ID, m.Submit, jobstate.Call{Actor: s})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			_, err = eng.Cancel(ctx, c.Job.ID, jobstate.Call{Actor: s})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			got, err := eng.Get(ctx, c.Job.ID)
			require.NoError(t, err)
			assert.Equal(t, c.Job.Version, got.Version, "a refused call wrote")
			_, err = eng.Claim(ctx, jobstate.ClaimRequest{Machine: "queue", Worker: s})
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			_, err = eng.RecoverWorker(ctx, s)
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			_, err = eng.List(ctx, jobstate.ListQuery{Owner: s}, "")
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
			_, err = eng.List(ctx, jobstate.ListQuery{Key: s}, "")
			assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
		})
	}
	t.Run("reason one byte too long", func(t *testing.T) {
		_, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue", Reason: reason + "r"})
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	})
	counts, err := eng.Counts(ctx, "queue")
	require.NoError(t, err)
	total := 0
	for _, n := range counts {
		total += n
	}
	assert.Equal(t, 1+len(bad), total, "only the accepted creations are stored")
}

// TestDefinitionNamesWithinLimits: names a definition declares are
// refused beyond MaxNameBytes, with a NUL or with invalid UTF-8.
func TestDefinitionNamesWithinLimits(t *testing.T) {
	long := strings.Repeat("n", jobstate.MaxNameBytes+1)
	spec := m.QueueSpec()
	spec.Name = long
	_, err := jobstate.NewDefinition(spec)
	require.ErrorIs(t, err, jobstate.ErrInvalidDefinition)
	assert.Contains(t, err.Error(), "machine name is 129 bytes long, above the limit of 128")

	spec = m.QueueSpec()
	spec.Name = strings.Repeat("n", jobstate.MaxNameBytes)
	_, err = jobstate.NewDefinition(spec)
	require.NoError(t, err, "a name at the limit")

	spec = m.QueueSpec()
	spec.States = append(spec.States, jobstate.StateSpec{Name: "BAD\x00", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeFailed})
	spec.Rules = append(spec.Rules, jobstate.Rule{From: []jobstate.State{m.Queued}, Event: "bad\xff", To: "BAD\x00"})
	_, err = jobstate.NewDefinition(spec)
	var de *jobstate.DefinitionError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Problems, "state #7: its name holds a NUL character")
	assert.Contains(t, de.Problems, "rule #8: its event name is not valid UTF-8")
}

// TestZeroRetryPolicyWithRetryRuleRefused: a machine whose table can retry
// but whose policy allows no retry is refused with what to write; a
// backoff set with MaxRetries 0 says "no retries" on purpose.
func TestZeroRetryPolicyWithRetryRuleRefused(t *testing.T) {
	spec := m.QueueSpec()
	spec.Policy.Retry = jobstate.RetryPolicy{}
	_, err := jobstate.NewDefinition(spec)
	var de *jobstate.DefinitionError
	require.ErrorAs(t, err, &de)
	require.Len(t, de.Problems, 1)
	assert.Contains(t, de.Problems[0], "policy Retry is unset, so rule #5 (RUNNING --retry--> RETRYING) can never retry a failure")
	assert.Contains(t, de.Problems[0], "set Retry.MaxRetries")

	spec.Policy.Retry = jobstate.RetryPolicy{MaxRetries: 0, Backoff: jobstate.FixedBackoff(time.Second)}
	_, err = jobstate.NewDefinition(spec)
	require.NoError(t, err)
}

// TestCancelWithoutRuleSaysSo: the error of a cancel the table does not
// allow names the missing rule.
func TestCancelWithoutRuleSaysSo(t *testing.T) {
	ctx := context.Background()
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: "queue"})
	require.NoError(t, err)
	_, err = eng.Cancel(ctx, c.Job.ID, jobstate.Call{})
	require.ErrorIs(t, err, jobstate.ErrInvalidTransition)
	assert.Contains(t, err.Error(), `machine "queue" has no cancel rule from state "CREATED"`)
}

// TestCountsAndListRefuseUnknowns: Counts of an unregistered machine is
// ErrUnknownMachine, like every other operation; List with a state its
// machine (or, without a machine, every machine) lacks is
// ErrInvalidArgument rather than an empty page.
func TestCountsAndListRefuseUnknowns(t *testing.T) {
	ctx := context.Background()
	eng, err := jobstate.New(memstore.New(), jobstate.WithMachines(m.Queue()))
	require.NoError(t, err)
	_, err = eng.Counts(ctx, "nope")
	assert.ErrorIs(t, err, jobstate.ErrUnknownMachine)
	_, err = eng.List(ctx, jobstate.ListQuery{Machine: "nope"}, "")
	assert.ErrorIs(t, err, jobstate.ErrUnknownMachine)
	_, err = eng.List(ctx, jobstate.ListQuery{Machine: "queue", States: []jobstate.State{"QUEUED", "PAUSED"}}, "")
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `machine "queue" has no state "PAUSED"`)
	_, err = eng.List(ctx, jobstate.ListQuery{States: []jobstate.State{"PAUSED"}}, "")
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
	_, err = eng.List(ctx, jobstate.ListQuery{States: []jobstate.State{"QUEUED"}}, "")
	assert.NoError(t, err)
	_, err = eng.Get(ctx, uuid.New())
	assert.ErrorIs(t, err, jobstate.ErrNotFound)
}
