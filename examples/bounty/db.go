package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// FeeWallet is the marketplace's account: it receives the 20% fee of every
// payout.
const FeeWallet = "fee-wallet"

// WorkerSharePercent is the winner's share of the reward (T3: 80% to the
// worker, 20% to the fee wallet).
const WorkerSharePercent = 80

// The application database's own refusals. Effects return them inside the
// engine's atomic write, which then writes nothing.
var (
	// ErrDuplicateDeposit is the UNIQUE constraint on deposit_tx_hash (T1):
	// a deposit can fund one bounty only.
	ErrDuplicateDeposit = errors.New("deposit transaction already funded a bounty")
	// ErrNotFunded: the bounty holds no deposit, so there is nothing to
	// refund (T7 for a bounty cancelled while open).
	ErrNotFunded = errors.New("the bounty was never funded: nothing to refund")
	// ErrAlreadyRefunded: refund_tx_hash is already set. The engine's
	// once-only effect should make this unreachable; the database refuses
	// anyway, as its own constraint.
	ErrAlreadyRefunded = errors.New("deposit already refunded")
	// ErrNoFiring: a rule effect ran outside the engine's firing of its
	// rule, so it has no call to read (see jobstate.FiringOf).
	ErrNoFiring = errors.New("rule effect run outside a firing")
)

// Deposit is the buyer's on-chain funding of a bounty: the transaction and
// the address it came from (deposit_tx_hash, depositor_address).
type Deposit struct {
	TxHash string
	From   string
}

// Escrow is what the database holds for a funded bounty: the deposit, its
// amount, and where the money went (paid to a winner, or refunded).
type Escrow struct {
	Deposit
	Amount int64
	// PaidTo is the winner the reward was paid to, empty until then.
	PaidTo string
	// RefundTx is refund_tx_hash, empty until the refund.
	RefundTx string
}

// Agent is a registered worker (POST /agents) and its reputation counters.
type Agent struct {
	Name string
	// Claims counts the bounties the worker claimed (total_claims); Passed
	// the worker's submissions that passed, each of which won its bounty
	// (passed_submissions).
	Claims int
	Passed int
}

// CompletionRate is the worker's reputation: passed_submissions /
// total_claims, zero for a worker that has claimed nothing.
func (a Agent) CompletionRate() float64 {
	if a.Claims == 0 {
		return 0
	}
	return float64(a.Passed) / float64(a.Claims)
}

// DB is the example's in-memory application database: agents, escrowed
// deposits, balances. The lifecycle of bounties is not here but in the
// engine's store; this database changes only inside the engine's atomic
// writes, through the effects the machine declares. It is safe for
// concurrent use.
type DB struct {
	mu       sync.Mutex
	agents   map[string]*Agent
	txs      map[string]uuid.UUID // UNIQUE(deposit_tx_hash)
	escrows  map[uuid.UUID]*Escrow
	balances map[string]int64
	// participants lists, per bounty, the workers who claimed it, in order
	// (job.participants[]).
	participants map[uuid.UUID][]string
	// bounties lists every bounty posted, in order: the example's own
	// listing, for stores without the Lister capability.
	bounties []uuid.UUID
	// payouts and refunds count how many times each effect took effect.
	payouts, refunds int
}

// NewDB returns an empty database.
func NewDB() *DB {
	return &DB{
		agents:   make(map[string]*Agent),
		txs:      make(map[string]uuid.UUID),
		escrows:  make(map[uuid.UUID]*Escrow),
		balances: make(map[string]int64),

		participants: make(map[uuid.UUID][]string),
	}
}

// Register records a worker (POST /agents); registering twice keeps the
// existing record.
func (db *DB) Register(name string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.agents[name]; !ok {
		db.agents[name] = &Agent{Name: name}
	}
}

// Agent returns a copy of a worker's record and whether it is registered.
func (db *DB) Agent(name string) (Agent, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	a, ok := db.agents[name]
	if !ok {
		return Agent{}, false
	}
	return *a, true
}

// Escrow returns a copy of a bounty's escrow and whether it was funded.
func (db *DB) Escrow(id uuid.UUID) (Escrow, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	e, ok := db.escrows[id]
	if !ok {
		return Escrow{}, false
	}
	return *e, true
}

// Balance returns an account's balance in cents.
func (db *DB) Balance(account string) int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.balances[account]
}

// Runs returns how many times the payout and the refund effects took effect.
func (db *DB) Runs() (payouts, refunds int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.payouts, db.refunds
}

// Participants returns the workers who claimed the bounty, in order.
func (db *DB) Participants(id uuid.UUID) []string {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Clone(db.participants[id])
}

// Joined reports whether worker claimed the bounty.
func (db *DB) Joined(id uuid.UUID, worker string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Contains(db.participants[id], worker)
}

// Bounties returns every bounty posted, in the order posted.
func (db *DB) Bounties() []uuid.UUID {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Clone(db.bounties)
}

// DBState is a deep copy of the whole database, for comparisons.
type DBState struct {
	Agents       map[string]Agent
	Txs          map[string]uuid.UUID
	Escrows      map[uuid.UUID]Escrow
	Balances     map[string]int64
	Participants map[uuid.UUID][]string
	Bounties     []uuid.UUID
	Payouts      int
	Refunds      int
}

// State returns a deep copy of the database.
func (db *DB) State() DBState {
	db.mu.Lock()
	defer db.mu.Unlock()
	s := DBState{
		Agents: make(map[string]Agent), Txs: maps.Clone(db.txs), Escrows: make(map[uuid.UUID]Escrow),
		Balances: maps.Clone(db.balances), Payouts: db.payouts, Refunds: db.refunds,
		Participants: make(map[uuid.UUID][]string), Bounties: slices.Clone(db.bounties),
	}
	for k, p := range db.participants {
		s.Participants[k] = slices.Clone(p)
	}
	for k, a := range db.agents {
		s.Agents[k] = *a
	}
	for k, e := range db.escrows {
		s.Escrows[k] = *e
	}
	return s
}

// firing returns the firing a rule effect runs for: the transition being
// written (with its actor) and the caller's arguments.
func firing(ctx context.Context) (jobstate.Firing, error) {
	f, ok := jobstate.FiringOf(ctx)
	if !ok {
		return jobstate.Firing{}, ErrNoFiring
	}
	return f, nil
}

// recordDeposit is T1's side effect, the effect of the fund rule: it
// records deposit_tx_hash and depositor_address in escrow for the bounty,
// refusing a transaction that already funded a bounty (the UNIQUE
// constraint that prevents double funding). The deposit is the fund call's
// argument, which the effect reads from its firing.
func (db *DB) recordDeposit(ctx context.Context, job jobstate.Job) error {
	f, err := firing(ctx)
	if err != nil {
		return err
	}
	d, ok := f.Args.(Deposit)
	if !ok {
		return fmt.Errorf("%w: fund arguments are %T", ErrBadDeposit, f.Args)
	}
	terms, err := TermsOf(job)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if holder, dup := db.txs[d.TxHash]; dup {
		return fmt.Errorf("%w: %s funded bounty %s", ErrDuplicateDeposit, d.TxHash, holder)
	}
	db.txs[d.TxHash] = job.ID
	db.escrows[job.ID] = &Escrow{Deposit: d, Amount: terms.Reward}
	return nil
}

// recordJoin is the effect of the join rule: the worker, the actor of the
// claim being written, joins the bounty's participants, and the claim
// counts towards the worker's total_claims (invariant 13). A worker who
// already joined is refused (the database's own constraint; the guard
// refuses first).
func (db *DB) recordJoin(ctx context.Context, job jobstate.Job) error {
	f, err := firing(ctx)
	if err != nil {
		return err
	}
	worker := f.Transition.Actor
	db.mu.Lock()
	defer db.mu.Unlock()
	a, ok := db.agents[worker]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotRegistered, worker)
	}
	if slices.Contains(db.participants[job.ID], worker) {
		return ErrAlreadyJoined
	}
	db.participants[job.ID] = append(db.participants[job.ID], worker)
	a.Claims++
	return nil
}

// indexBounty is the creation effect: the bounty joins the example's own
// listing, atomically with its creation.
func (db *DB) indexBounty(_ context.Context, job jobstate.Job) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.bounties = append(db.bounties, job.ID)
	return nil
}

// payout is T3's side effect, the commit effect of the winning submission:
// 80% of the escrowed reward to the winner, 20% to the fee wallet, and the
// winner's passed_submissions counted (invariant 13). It reads the winner
// from the job's result.
func (db *DB) payout(_ context.Context, job jobstate.Job) error {
	res, err := ResolutionOf(job)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	e, ok := db.escrows[job.ID]
	if !ok {
		return fmt.Errorf("bounty %s: %w", job.ID, ErrNotFunded)
	}
	a, ok := db.agents[res.Winner]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotRegistered, res.Winner)
	}
	if e.PaidTo != "" || e.RefundTx != "" {
		return fmt.Errorf("bounty %s: escrow already released", job.ID)
	}
	share := e.Amount * WorkerSharePercent / 100
	db.balances[res.Winner] += share
	db.balances[FeeWallet] += e.Amount - share
	e.PaidTo = res.Winner
	a.Passed++
	db.payouts++
	return nil
}

// refund is T6/T7's effect: the full escrowed amount back to the depositor
// and refund_tx_hash set ("off-chain"). The job's state does not change.
func (db *DB) refund(_ context.Context, job jobstate.Job) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	e, ok := db.escrows[job.ID]
	if !ok {
		return ErrNotFunded
	}
	if e.RefundTx != "" || e.PaidTo != "" {
		return ErrAlreadyRefunded
	}
	db.balances[e.From] += e.Amount
	e.RefundTx = "off-chain"
	db.refunds++
	return nil
}
