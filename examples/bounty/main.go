// Command bounty runs a bounty marketplace on jobstate: bounties open →
// funded → resolved/expired/cancelled, workers who claim a funded bounty
// and then submit to it, submissions as concurrent executions of the
// bounty where the first to pass wins, lazy expiry on every read (the list
// included), cancel blocked while judging, the refund as a once-only
// effect that is not a state, and crash recovery of stuck judging at
// start-up and by the periodic sweep.
//
//	go run ./examples/bounty
//
// The store is memstore and time is a manual clock, so deadlines and
// leases pass instantly. The machine is declared in machine.go, the
// application database its effects write to in db.go, the marketplace's
// operations in market.go, its HTTP API (a net/http handler) in http.go;
// this file tells the story.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// main runs the story and exits non-zero if it fails.
func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bounty:", err)
		os.Exit(1)
	}
}

// buyer posts every bounty of the story; wallet is where its deposits come
// from and refunds go.
const (
	buyer  = "acme"
	wallet = "acme-wallet"
)

// run tells the story on out: a bounty won by the first of several
// passing submissions, one that expires on read and is refunded once, a
// cancel refused while judging then accepted, and a restart that fails
// stuck judging.
func run(ctx context.Context, out io.Writer) error {
	clock := jobstate.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	store, db := memstore.New(), NewDB()
	m, _, err := Start(ctx, store, db, clock, DemoOracle)
	if err != nil {
		return err
	}
	// The buyer is a registered agent too, which does not let it work on
	// its own bounties.
	for _, w := range []string{"alice", "bob", "carol", "dave", "erin", buyer} {
		m.Register(w)
	}
	fmt.Fprintln(out, "Bounty marketplace on jobstate: memstore, manual clock.")

	// 1. Several workers submit at once; the first passer wins.
	fmt.Fprintln(out, "\n1. Three workers, one winner")
	b1, err := postAndFund(ctx, out, m, Terms{Title: "Say 'good morning, friend' in French", Reward: 10000, Rubric: []string{"bonjour", "ami"}}, time.Time{}, "0x5eed01")
	if err != nil {
		return err
	}
	for _, w := range []string{"mallory", buyer} {
		_, err := m.Join(ctx, b1.ID, w)
		fmt.Fprintf(out, "  %s claims: refused (%s)\n", w, why(err))
	}
	_, err = m.Submit(ctx, b1.ID, "alice", "salut")
	fmt.Fprintf(out, "  alice submits before claiming: refused (%s)\n", why(err))
	for _, w := range []string{"alice", "bob", "carol"} {
		if _, err := m.Join(ctx, b1.ID, w); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "  alice, bob and carol claim it: participants %v\n", db.Participants(b1.ID))
	contents := map[string]string{"alice": "salut", "bob": "bonjour mon ami", "carol": "Bonjour, mon ami !"}
	subs, err := submitAll(ctx, m, b1.ID, []string{"alice", "bob", "carol"}, contents)
	if err != nil {
		return err
	}
	job, err := m.Get(ctx, b1.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice, bob and carol submit at once: %d judging, bounty %s\n", job.Leases, job.State)
	v, err := m.Judge(ctx, subs["alice"])
	if err != nil {
		return err
	}
	job, err = m.Get(ctx, b1.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice's verdict: %s: failed; bounty still %s, %d judging\n", v.Reason, job.State, job.Leases)
	fmt.Fprintln(out, "  bob and carol are judged at once; both pass, the first to commit wins:")
	verdicts := judgeAll(ctx, m, []Submission{subs["bob"], subs["carol"]})
	for _, w := range []string{"bob", "carol"} {
		r := verdicts[w]
		if r.err == nil {
			fmt.Fprintf(out, "    %-5s score %d: passed, won\n", w, r.v.Score)
		} else {
			fmt.Fprintf(out, "    %-5s score %d: discarded (%s)\n", w, r.v.Score, why(r.err))
		}
	}
	if err := printBounty(ctx, out, m, b1.ID); err != nil {
		return err
	}
	if job, err = m.Get(ctx, b1.ID); err != nil {
		return err
	}
	res, err := ResolutionOf(job)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  winner %s, result %q; paid %s to %s, %s to %s\n", res.Winner, res.ResultData,
		usd(db.Balance(res.Winner)), res.Winner, usd(db.Balance(FeeWallet)), FeeWallet)
	var reps []string
	for _, w := range []string{"alice", "bob", "carol"} {
		a, _ := db.Agent(w)
		reps = append(reps, fmt.Sprintf("%s %d/%d = %.2f", w, a.Passed, a.Claims, a.CompletionRate()))
	}
	fmt.Fprintf(out, "  completion rates (passed/claims): %s\n", strings.Join(reps, ", "))

	// 2. A funded bounty past its deadline expires when read; the buyer is
	// refunded once.
	fmt.Fprintln(out, "\n2. Lazy expiry and a refund")
	b2, err := postAndFund(ctx, out, m, Terms{Title: "Summarise a contract", Reward: 5000}, clock.Now().Add(time.Hour), "0x5eed02")
	if err != nil {
		return err
	}
	if _, err := m.Join(ctx, b2.ID, "dave"); err != nil {
		return err
	}
	late, err := m.Submit(ctx, b2.ID, "dave", "a summary")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "  dave claims it and submits: judging")
	clock.Advance(time.Hour)
	raw, err := store.Get(ctx, b2.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  an hour passes (deadline %s); nothing runs, the store still holds %s\n", b2.Deadline.Format("15:04"), raw.State)
	if err := printBounty(ctx, out, m, b2.ID); err != nil {
		return err
	}
	_, err = m.Judge(ctx, late)
	fmt.Fprintf(out, "  dave's verdict arrives: refused (%s)\n", why(err))
	if err := refund(ctx, out, m, b2.ID, "mallory"); err != nil {
		return err
	}
	if err := refund(ctx, out, m, b2.ID, buyer); err != nil {
		return err
	}
	if err := refund(ctx, out, m, b2.ID, buyer); err != nil {
		return err
	}

	// 3. Cancel is refused while a submission is judging.
	fmt.Fprintln(out, "\n3. Cancel while judging")
	b3, err := postAndFund(ctx, out, m, Terms{Title: "Name our cat", Reward: 2000, Rubric: []string{"whiskers"}}, time.Time{}, "0x5eed03")
	if err != nil {
		return err
	}
	if _, err := m.Join(ctx, b3.ID, "erin"); err != nil {
		return err
	}
	sub, err := m.Submit(ctx, b3.ID, "erin", "Felix")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "  erin claims it and submits: judging")
	_, err = m.Cancel(ctx, b3.ID, buyer)
	fmt.Fprintf(out, "  %s cancels: refused (%s)\n", buyer, why(err))
	if v, err = m.Judge(ctx, sub); err != nil {
		return err
	}
	fmt.Fprintf(out, "  erin's verdict: %s: failed\n", v.Reason)
	if job, err = m.Cancel(ctx, b3.ID, buyer); err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s cancels: %s\n", buyer, job.State)
	if err := refund(ctx, out, m, b3.ID, buyer); err != nil {
		return err
	}

	// 4. The server dies while submissions are judging; start-up fails
	// them at once, though their judging leases have not lapsed.
	fmt.Fprintln(out, "\n4. Restart during judging")
	b4, err := postAndFund(ctx, out, m, Terms{Title: "Fix a typo", Reward: 1000, Rubric: []string{"receive"}}, time.Time{}, "0x5eed04")
	if err != nil {
		return err
	}
	for _, w := range []string{"alice", "bob"} {
		if _, err := m.Join(ctx, b4.ID, w); err != nil {
			return err
		}
	}
	stuck, err := submitAll(ctx, m, b4.ID, []string{"alice", "bob"}, map[string]string{"alice": "recieve", "bob": "receive"})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "  alice and bob claim it and submit: 2 judging")
	clock.Advance(time.Minute)
	fmt.Fprintf(out, "  the server crashes and comes back a minute later, within the judging lease (%s)\n", JudgingLease)
	m, rep, err := Start(ctx, store, db, clock, DemoOracle)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  start-up recovery: %d stuck submission(s) failed\n", rep.Aborted)
	if err := printBounty(ctx, out, m, b4.ID); err != nil {
		return err
	}
	_, err = m.Judge(ctx, stuck["bob"])
	fmt.Fprintf(out, "  a verdict for bob from the old server arrives: refused (%s)\n", why(err))
	sub, err = m.Submit(ctx, b4.ID, "bob", "I before E except after C: receive")
	if err != nil {
		return err
	}
	if _, err := m.Judge(ctx, sub); err != nil {
		return err
	}
	fmt.Fprintln(out, "  bob submits again (a retry) and passes:")
	if err := printBounty(ctx, out, m, b4.ID); err != nil {
		return err
	}

	// 5. A judging submission that gets no verdict is failed by the
	// periodic sweep once its judging lease lapses.
	fmt.Fprintln(out, "\n5. Stuck judging, recovered by the sweep")
	b5, err := postAndFund(ctx, out, m, Terms{Title: "Translate a menu", Reward: 3000}, time.Time{}, "0x5eed05")
	if err != nil {
		return err
	}
	if _, err := m.Join(ctx, b5.ID, "carol"); err != nil {
		return err
	}
	if _, err := m.Submit(ctx, b5.ID, "carol", "menu"); err != nil {
		return err
	}
	fmt.Fprintf(out, "  carol claims it and submits; the oracle never answers\n")
	clock.Advance(JudgingLease)
	rep, err = m.Sweep(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s later, the sweep: %d stuck submission(s) failed\n", JudgingLease, rep.Aborted)
	if err := printBounty(ctx, out, m, b5.ID); err != nil {
		return err
	}

	// 6. The list expires overdue bounties as a single read does.
	fmt.Fprintln(out, "\n6. The list (GET /jobs)")
	b6, err := postAndFund(ctx, out, m, Terms{Title: "Proofread a poem", Reward: 1500}, clock.Now().Add(time.Minute), "0x5eed06")
	if err != nil {
		return err
	}
	clock.Advance(time.Minute)
	raw, err = store.Get(ctx, b6.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  a minute passes (its deadline); the store still holds %s\n", raw.State)
	all, err := m.List(ctx)
	if err != nil {
		return err
	}
	for i, j := range all {
		t, _ := TermsOf(j)
		fmt.Fprintf(out, "  %d. %-38q %s\n", i+1, t.Title, j.State)
	}
	return nil
}

// postAndFund posts a bounty for the story's buyer and funds it with the
// deposit tx, telling each step.
func postAndFund(ctx context.Context, out io.Writer, m *Market, t Terms, deadline time.Time, tx string) (jobstate.Job, error) {
	job, err := m.Post(ctx, buyer, t, deadline)
	if err != nil {
		return job, err
	}
	fmt.Fprintf(out, "  %s posts %q for %s: %s\n", buyer, t.Title, usd(t.Reward), job.State)
	if job, err = m.Fund(ctx, job.ID, buyer, Deposit{TxHash: tx, From: wallet}); err != nil {
		return job, err
	}
	fmt.Fprintf(out, "  %s funds it (tx %s from %s): %s\n", buyer, tx, wallet, job.State)
	return job, nil
}

// submitAll submits each worker's content to the bounty concurrently and
// returns the submissions by worker.
func submitAll(ctx context.Context, m *Market, id uuid.UUID, workers []string, content map[string]string) (map[string]Submission, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	subs := make(map[string]Submission)
	var errs []error
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.Submit(ctx, id, w, content[w])
			mu.Lock()
			defer mu.Unlock()
			subs[w], errs = s, append(errs, err)
		}()
	}
	wg.Wait()
	return subs, errors.Join(errs...)
}

// judged is one submission's verdict and the engine's answer to it.
type judged struct {
	v   Verdict
	err error
}

// judgeAll judges the submissions concurrently and returns the verdicts by
// worker.
func judgeAll(ctx context.Context, m *Market, subs []Submission) map[string]judged {
	var wg sync.WaitGroup
	var mu sync.Mutex
	out := make(map[string]judged)
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := m.Judge(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			out[s.Worker] = judged{v, err}
		}()
	}
	wg.Wait()
	return out
}

// printBounty reads a bounty (which applies lazy expiry) and tells its
// state and its submissions.
func printBounty(ctx context.Context, out io.Writer, m *Market, id uuid.UUID) error {
	job, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	subs, err := m.Submissions(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  bounty read: %s; submissions:", job.State)
	for i, s := range subs {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(out, "%s %s %s", sep, s.Worker, s.Status)
		if s.Reason != "" {
			fmt.Fprintf(out, " (%s)", reason(s.Reason))
		}
	}
	fmt.Fprintln(out)
	return nil
}

// refund asks for a bounty's refund as actor and tells the outcome.
func refund(ctx context.Context, out io.Writer, m *Market, id uuid.UUID, actor string) error {
	job, err := m.Refund(ctx, id, actor)
	if err != nil {
		fmt.Fprintf(out, "  %s asks for the refund: refused (%s)\n", actor, why(err))
		return nil
	}
	e, _ := m.db.Escrow(id)
	fmt.Fprintf(out, "  %s asks for the refund: %s back to %s (refund tx %s); bounty still %s\n", actor, usd(e.Amount), e.From, e.RefundTx, job.State)
	return nil
}

// why names an engine error by its stable code and, where there is one,
// the guard's or the lease's reason.
func why(err error) string {
	if err == nil {
		return "no error"
	}
	code := jobstate.Code(err)
	var te *jobstate.TransitionError
	if errors.As(err, &te) && te.Cause != nil {
		return code + ": " + te.Cause.Error()
	}
	var le *jobstate.LeaseError
	if errors.As(err, &le) {
		return code + ": " + reason(le.Reason)
	}
	if code == "unknown" {
		return err.Error()
	}
	return code
}

// reason words an execution's end reason for the story: "execution <id>
// won" becomes "another submission won", and the start-up recovery's
// "worker <name> restarted" (the lease is held under the worker's name;
// the server is what restarted) becomes "server restarted".
func reason(s string) string {
	if strings.HasSuffix(s, " won") {
		if i := strings.LastIndex(s, "execution "); i >= 0 {
			return s[:i] + "another submission won"
		}
	}
	if strings.HasSuffix(s, " restarted") {
		if i := strings.LastIndex(s, "worker "); i >= 0 {
			return s[:i] + "server restarted"
		}
	}
	return s
}

// usd formats cents as dollars.
func usd(cents int64) string {
	return fmt.Sprintf("$%d.%02d", cents/100, cents%100)
}
