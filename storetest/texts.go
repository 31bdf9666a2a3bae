package storetest

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/jobstate/jobstate"
	m "github.com/jobstate/jobstate/internal/machines"
)

// propTexts: every text a user or a handler supplies reaches the store
// either whole or not at all. A key, owner, fingerprint, actor, reason or
// worker name within the limits (valid UTF-8, no NUL, short enough) is
// stored and read back byte for byte; one beyond them is refused with
// ErrInvalidArgument and changes nothing; a handler's error text, whatever
// its bytes and length, is recorded as CleanErrorText makes it, and the
// failure always ends the execution. One store serves every case: each
// case works on jobs of its own.
func propTexts(t *testing.T, newStore NewStore) {
	rapid.Check(t, newTextsRun(t, newStore).check)
}

// textsRun holds the store of one run of the Texts property.
type textsRun struct {
	f    *fixture
	used map[string]bool // keys taken by earlier cases
}

func newTextsRun(t *testing.T, newStore NewStore) *textsRun {
	return &textsRun{f: newFixture(t, newStore, nil, m.QueueSpec()), used: make(map[string]bool)}
}

// total counts the jobs of the store, or returns -1 when the store does
// not count.
func (r *textsRun) total(rt *rapid.T) int {
	counter, ok := r.f.Store.(jobstate.Counter)
	if !ok {
		return -1
	}
	counts, err := counter.Count(r.f.Ctx, "queue")
	if err != nil {
		rt.Fatalf("count: %v", err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// check runs one case of the Texts property.
func (r *textsRun) check(rt *rapid.T) {
	f, used, total := r.f, r.used, r.total
	ctx := f.Ctx
	nj := jobstate.NewJob{
		Machine:     "queue",
		Key:         drawText(rt, "key", jobstate.MaxKeyBytes),
		Fingerprint: drawText(rt, "fingerprint", jobstate.MaxKeyBytes),
		Owner:       drawText(rt, "owner", jobstate.MaxKeyBytes),
		Actor:       drawText(rt, "actor", jobstate.MaxKeyBytes),
		Reason:      drawText(rt, "reason", jobstate.MaxReasonBytes),
	}
	if used[nj.Key] {
		nj.Key = "" // another case's job holds it
	}
	valid := fits(nj.Key, jobstate.MaxKeyBytes) && fits(nj.Fingerprint, jobstate.MaxKeyBytes) &&
		fits(nj.Owner, jobstate.MaxKeyBytes) && fits(nj.Actor, jobstate.MaxKeyBytes) && fits(nj.Reason, jobstate.MaxReasonBytes)
	before := total(rt)
	created, err := f.Eng.Create(ctx, nj)
	if !valid {
		if !errors.Is(err, jobstate.ErrInvalidArgument) {
			rt.Fatalf("create with texts beyond the limits: got %v, want ErrInvalidArgument", err)
		}
		if after := total(rt); after != before {
			rt.Fatalf("a refused create changed the job count: %d → %d", before, after)
		}
		return
	}
	if err != nil {
		rt.Fatalf("create with texts within the limits: %v", err)
	}
	used[nj.Key] = nj.Key != ""
	job := f.Get(created.Job.ID)
	if job.IdempotencyKey != nj.Key || job.Owner != nj.Owner {
		rt.Fatalf("key %q / owner %q read back as %q / %q", nj.Key, nj.Owner, job.IdempotencyKey, job.Owner)
	}
	if nj.Key != "" && nj.Fingerprint != "" && job.Fingerprint != nj.Fingerprint {
		rt.Fatalf("fingerprint %q read back as %q", nj.Fingerprint, job.Fingerprint)
	}
	hist, err := f.Eng.History(ctx, job.ID)
	if err != nil || len(hist) != 1 {
		rt.Fatalf("history: %v (%d records)", err, len(hist))
	}
	if hist[0].Actor != nj.Actor || hist[0].Reason != nj.Reason {
		rt.Fatalf("creation actor %q / reason %q read back as %q / %q", nj.Actor, nj.Reason, hist[0].Actor, hist[0].Reason)
	}

	// A user's call: actor and reason.
	call := jobstate.Call{Actor: drawText(rt, "call actor", jobstate.MaxKeyBytes), Reason: drawText(rt, "call reason", jobstate.MaxReasonBytes)}
	_, err = f.Eng.Fire(ctx, job.ID, m.Submit, call)
	if !fits(call.Actor, jobstate.MaxKeyBytes) || !fits(call.Reason, jobstate.MaxReasonBytes) {
		if !errors.Is(err, jobstate.ErrInvalidArgument) {
			rt.Fatalf("fire with texts beyond the limits: got %v, want ErrInvalidArgument", err)
		}
		if got := f.Get(job.ID); got.Version != job.Version {
			rt.Fatalf("a refused fire moved the job from version %d to %d", job.Version, got.Version)
		}
		call = jobstate.Call{Actor: "user"}
		if _, err := f.Eng.Fire(ctx, job.ID, m.Submit, call); err != nil {
			rt.Fatalf("fire: %v", err)
		}
	} else if err != nil {
		rt.Fatalf("fire with texts within the limits: %v", err)
	}
	hist, _ = f.Eng.History(ctx, job.ID)
	if last := hist[len(hist)-1]; last.Actor != call.Actor || last.Reason != call.Reason {
		rt.Fatalf("fire actor %q / reason %q read back as %q / %q", call.Actor, call.Reason, last.Actor, last.Reason)
	}

	// A worker's name.
	worker := drawText(rt, "worker", jobstate.MaxKeyBytes)
	claimed, err := f.Eng.ClaimJob(ctx, job.ID, jobstate.ClaimRequest{Machine: "queue", Worker: worker})
	if worker == "" || !fits(worker, jobstate.MaxKeyBytes) {
		if !errors.Is(err, jobstate.ErrInvalidArgument) {
			rt.Fatalf("claim by worker %q: got %v, want ErrInvalidArgument", short(worker), err)
		}
		worker = "w"
		if claimed, err = f.Eng.ClaimJob(ctx, job.ID, jobstate.ClaimRequest{Machine: "queue", Worker: worker}); err != nil {
			rt.Fatalf("claim: %v", err)
		}
	} else if err != nil {
		rt.Fatalf("claim by a worker named within the limits: %v", err)
	}
	xs, err := f.Eng.Executions(ctx, job.ID)
	if err != nil || len(xs) != 1 || xs[0].Owner != worker {
		rt.Fatalf("executions after a claim by %q: %v %+v", short(worker), err, xs)
	}

	// A handler's error: never refused, always recorded clean.
	msg := drawErrorText(rt)
	cause := errors.New(msg)
	if rapid.Bool().Draw(rt, "permanent") {
		cause = jobstate.Permanent(cause)
	}
	failed, err := f.Eng.Fail(ctx, claimed.Lease, cause)
	if err != nil {
		rt.Fatalf("fail with an error text of %d bytes: %v", len(msg), err)
	}
	want := jobstate.CleanErrorText(cause.Error())
	stored := f.Get(job.ID)
	if stored.LastError != want || failed.LastError != want {
		rt.Fatalf("error text recorded as %q (returned %q), want %q", short(stored.LastError), short(failed.LastError), short(want))
	}
	xs, err = f.Eng.Executions(ctx, job.ID)
	if err != nil || len(xs) != 1 {
		rt.Fatalf("executions after the failure: %v %+v", err, xs)
	}
	if xs[0].Status.Live() || xs[0].Error != want {
		rt.Fatalf("the failed execution is %s with error %q, want ended with %q", xs[0].Status, short(xs[0].Error), short(want))
	}
	if stored.Leases != 0 {
		rt.Fatalf("the job holds %d leases after its only execution failed", stored.Leases)
	}

	// A listing's filters.
	if l, ok := f.Store.(jobstate.Lister); ok && l != nil {
		owner := drawText(rt, "list owner", jobstate.MaxKeyBytes)
		_, err := f.Eng.List(ctx, jobstate.ListQuery{Machine: "queue", Owner: owner}, "")
		if fits(owner, jobstate.MaxKeyBytes) != (err == nil) {
			rt.Fatalf("list by owner %q: %v", short(owner), err)
		}
		if err != nil && !errors.Is(err, jobstate.ErrInvalidArgument) {
			rt.Fatalf("list by owner %q: got %v, want ErrInvalidArgument", short(owner), err)
		}
	}
}

// fits reports whether s is a text the engine accepts within limit bytes.
func fits(s string, limit int) bool {
	return len(s) <= limit && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// drawText draws a text for a field limited to limit bytes: mostly texts
// within the limits (empty, plain, multi-byte, exactly at the limit), and
// texts beyond them (a NUL, invalid UTF-8, one byte too many, far too
// long).
func drawText(rt *rapid.T, label string, limit int) string {
	switch rapid.IntRange(0, 9).Draw(rt, label+" shape") {
	case 0:
		return ""
	case 1:
		return strings.Repeat("k", limit)
	case 2:
		return strings.Repeat("k", limit+1)
	case 3:
		return strings.Repeat("é", limit/2) // 2 bytes each: exactly limit
	case 4:
		return "a\x00b"
	case 5:
		return "bad \xff\xfe utf-8"
	case 6:
		return strings.Repeat("x", 64<<10)
	case 7:
		return string(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, label+" bytes"))
	default:
		return rapid.StringN(0, 40, -1).Draw(rt, label)
	}
}

// drawErrorText draws a handler's error text: any bytes, of any length
// around MaxErrorBytes.
func drawErrorText(rt *rapid.T) string {
	switch rapid.IntRange(0, 4).Draw(rt, "error shape") {
	case 0:
		return string(rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "error bytes"))
	case 1:
		n := rapid.IntRange(jobstate.MaxErrorBytes-4, jobstate.MaxErrorBytes+4).Draw(rt, "error length")
		return strings.Repeat("€", n/3) + strings.Repeat("e", n%3)
	case 2:
		return strings.Repeat("\x00\xff", rapid.IntRange(1, 3*jobstate.MaxErrorBytes).Draw(rt, "error pairs"))
	case 3:
		return "timeout\x00 reading \xc3\x28 upstream"
	default:
		return rapid.String().Draw(rt, "error text")
	}
}

// short cuts a text for a failure message.
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
