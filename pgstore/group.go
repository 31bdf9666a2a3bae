package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobstate/jobstate"
)

// Group commit (Options.GroupCommit): concurrent Updates are coalesced
// into shared transactions, one COMMIT (one WAL flush) for many jobs.
//
// A committer goroutine takes the waiting Updates (distinct jobs, up to
// GroupCommit of them) and, in one round trip, begins a transaction and
// locks their rows with FOR NO KEY UPDATE SKIP LOCKED, reading their
// snapshots after the lock. A job it could not lock (held by another
// transaction, or unknown) is handed back to its caller, which runs its
// Update alone as without group commit: waiting for the lock, or
// returning ErrNotFound. Then each member's function runs, one after
// another, in its caller's goroutine, with the group's transaction in its
// context; its write is checked as by Update and queued in a savepoint of
// its own. The queued writes are sent with the COMMIT in one round trip;
// statements a function runs through Tx first send what is queued and the
// member's savepoint. A member whose function failed, or whose write the
// server refused, is rolled back to its savepoint (the statements after
// it, never run, are sent again), without undoing the others; its caller
// gets the error at once. The others are answered after the COMMIT.

// errGroupRolledBack ends a group whose only member failed.
var errGroupRolledBack = errors.New("pgstore: group rolled back")

// grouper queues the Updates of a store with group commit.
type grouper struct {
	s    *Store
	max  int
	mu   sync.Mutex
	q    []*member
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
	done bool
}

// member is one Update waiting for, or in, a group.
type member struct {
	ctx  context.Context
	id   uuid.UUID
	turn chan turn
	ret  chan fnReturn
	res  chan result
}

// turn tells a member's caller what to do: run alone, fail at once, or run
// its function on snap with the context fctx.
type turn struct {
	alone bool
	err   error
	snap  *jobstate.Snapshot
	fctx  context.Context
}

// fnReturn is what the member's function returned.
type fnReturn struct {
	w   jobstate.Write
	err error
}

// result is a member's outcome.
type result struct {
	job jobstate.Job
	err error
}

func newGrouper(s *Store, max, committers int) *grouper {
	g := &grouper{s: s, max: max, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	for i := 0; i < committers; i++ {
		g.wg.Add(1)
		go g.run()
	}
	return g
}

// close stops the committers once their groups are done; Updates waiting
// run alone.
func (g *grouper) close() {
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		return
	}
	g.done = true
	q := g.q
	g.q = nil
	g.mu.Unlock()
	close(g.stop)
	for _, m := range q {
		m.turn <- turn{alone: true}
	}
	g.wg.Wait()
}

// update is Store.Update through a group.
func (g *grouper) update(ctx context.Context, id uuid.UUID, fn jobstate.UpdateFunc) (jobstate.Job, error) {
	m := &member{ctx: ctx, id: id, turn: make(chan turn, 1), ret: make(chan fnReturn, 1), res: make(chan result, 1)}
	g.mu.Lock()
	if g.done {
		g.mu.Unlock()
		return g.s.updateAlone(ctx, id, fn)
	}
	g.q = append(g.q, m)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	t := <-m.turn
	if t.alone {
		return g.s.updateAlone(ctx, id, fn)
	}
	// Whatever happens, the job stays locked by the group until it ends:
	// the caller waits for that, so that what it does next finds the
	// job unlocked, as after an Update of its own.
	if t.err != nil {
		<-m.res
		return jobstate.Job{}, t.err
	}
	var r fnReturn
	func() {
		ok := false
		defer func() {
			if !ok {
				// fn panicked: the group rolls the member back and goes
				// on; the panic goes on in the caller.
				m.ret <- fnReturn{err: errors.New("pgstore: update function panicked")}
			}
		}()
		r.w, r.err = fn(t.fctx, *t.snap)
		ok = true
	}()
	m.ret <- r
	res := <-m.res
	if r.err != nil {
		if res.err != nil {
			// The function met the loss of the group's connection.
			return jobstate.Job{}, res.err
		}
		return jobstate.Job{}, r.err
	}
	return res.job, res.err
}

// run is a committer: it runs groups until the store is closed.
func (g *grouper) run() {
	defer g.wg.Done()
	for {
		ms := g.take()
		if ms == nil {
			return
		}
		g.runGroup(ms)
	}
}

// take waits for Updates and returns up to max of them, of distinct jobs,
// in arrival order; nil when the store is closed.
func (g *grouper) take() []*member {
	for {
		g.mu.Lock()
		if g.done {
			g.mu.Unlock()
			return nil
		}
		if len(g.q) > 0 {
			seen := make(map[uuid.UUID]bool, min(len(g.q), g.max))
			var ms, rest []*member
			for _, m := range g.q {
				if len(ms) < g.max && !seen[m.id] {
					seen[m.id] = true
					ms = append(ms, m)
				} else {
					rest = append(rest, m)
				}
			}
			g.q = rest
			more := len(rest) > 0
			g.mu.Unlock()
			if more {
				select {
				case g.wake <- struct{}{}:
				default:
				}
			}
			return ms
		}
		g.mu.Unlock()
		select {
		case <-g.wake:
		case <-g.stop:
			return nil
		}
	}
}

// group is one shared transaction.
type group struct {
	s       *Store
	tx      *connTx
	members []*member
	snaps   []*jobstate.Snapshot
	out     []jobstate.Job
	ok      []bool  // the member's write is queued or sent and not refused
	errs    []error // why a member's write is not (nil: its function failed)
	spSent  []bool  // the member's savepoint was sent
	sp      bool    // members have savepoints (more than one member)
	pending []segment
	// many holds the writes of the members whose functions sent
	// nothing: they go in a few statements for all (multi.go), in the
	// COMMIT's round trip; fast keeps them to be sent one by one if
	// that fails.
	many multiWrite
	fast []fastWrite
	// broken is the driver's error when the transaction failed as a
	// whole, which arose in brokenAt; errFor maps it for each member.
	broken   error
	brokenAt phase
	dirty    bool // a nested store call ran: reread the snapshots
}

// fastWrite is a member's write in many.
type fastWrite struct {
	member int
	cur    *jobstate.Job
	w      jobstate.Write
}

// segment is the queued statements of one member.
type segment struct {
	member int
	stmts  []stmt
}

type stmt struct {
	sql  string
	args []any
	fn   func(pgx.BatchResults) error
}

func (g *grouper) runGroup(ms []*member) {
	s := g.s
	alone := func(ms []*member) {
		for _, m := range ms {
			m.turn <- turn{alone: true}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	tx, err := s.beginConn(ctx)
	cancel()
	if err != nil {
		alone(ms)
		return
	}
	ids := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		ids[i] = m.id
	}
	snaps, err := s.groupSnapshots(tx, s.sql.lockMany, ids)
	if err != nil {
		rollback(tx)
		alone(ms)
		return
	}
	grp := &group{s: s, tx: tx}
	var skipped []*member
	for _, m := range ms {
		if snap, ok := snaps[m.id]; ok {
			grp.members = append(grp.members, m)
			grp.snaps = append(grp.snaps, snap)
		} else {
			skipped = append(skipped, m)
		}
	}
	alone(skipped)
	n := len(grp.members)
	if n == 0 {
		rollback(tx)
		return
	}
	grp.out = make([]jobstate.Job, n)
	grp.ok = make([]bool, n)
	grp.errs = make([]error, n)
	grp.spSent = make([]bool, n)
	grp.sp = n > 1
	for i := range grp.members {
		grp.runMember(i)
	}
	grp.finish()
}

// groupSnapshots runs lockSQL (which records the ids it returns, as the
// claim statement does) over ids, then reads the executions and effects
// of the jobs it returned, in one round trip.
func (s *Store) groupSnapshots(tx pgx.Tx, lockSQL string, ids []uuid.UUID) (map[uuid.UUID]*jobstate.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(lockSQL, ids)
	b.Queue(s.sql.claimExecs, claimedSetting)
	b.Queue(s.sql.claimEffs, claimedSetting)
	br := tx.SendBatch(ctx, b)
	out := make(map[uuid.UUID]*jobstate.Snapshot, len(ids))
	err := func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		jobs, err := scanJobs(rows)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			out[j.ID] = &jobstate.Snapshot{Job: j}
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		execs, err := scanExecs(rows)
		if err != nil {
			return err
		}
		for _, x := range execs {
			if sn, ok := out[x.JobID]; ok {
				sn.Executions = append(sn.Executions, x)
			}
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			e, err := scanEffect(rows, &id)
			if err != nil {
				return err
			}
			if sn, ok := out[id]; ok {
				sn.Effects = append(sn.Effects, e)
			}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (grp *group) spName(i int) string { return "pgstore_g" + strconv.Itoa(i) }

// runMember hands member i its turn, and queues its write.
func (grp *group) runMember(i int) {
	s, m := grp.s, grp.members[i]
	if grp.broken != nil {
		m.turn <- turn{err: grp.errFor(m)}
		return
	}
	if err := m.ctx.Err(); err != nil {
		m.turn <- turn{err: err}
		return
	}
	if grp.dirty {
		// A nested store call may have written later members' jobs:
		// read their snapshots again (they are locked by the group).
		grp.dirty = false
		if err := grp.send(false); err != nil {
			m.turn <- turn{err: grp.errFor(m)}
			return
		}
		ids := make([]uuid.UUID, 0, len(grp.members)-i)
		for _, o := range grp.members[i:] {
			ids = append(ids, o.id)
		}
		snaps, err := s.groupSnapshots(grp.tx, s.sql.lockMany, ids)
		if err != nil {
			grp.breakWith(err, inTransaction)
			m.turn <- turn{err: grp.errFor(m)}
			return
		}
		for j := i; j < len(grp.members); j++ {
			if sn, ok := snaps[grp.members[j].id]; ok {
				grp.snaps[j] = sn
			}
		}
	}
	snap := grp.snaps[i]
	lazy := newLazyTx(grp.tx)
	lazy.detach = true
	lazy.nested = func() { grp.dirty = true }
	lazy.before = func(context.Context) error {
		if err := grp.send(false); err != nil {
			return grp.errFor(m)
		}
		if grp.sp && !grp.spSent[i] {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
			defer cancel()
			if _, err := grp.tx.Exec(ctx, "SAVEPOINT "+grp.spName(i)); err != nil {
				grp.breakWith(err, inTransaction)
				return grp.errFor(m)
			}
			grp.spSent[i] = true
		}
		return nil
	}
	m.turn <- turn{snap: snap, fctx: s.fnContext(m.ctx, lazy)}
	r := <-m.ret
	if r.err != nil {
		// The caller returns its function's error, or errs[i]: the loss
		// of the group's connection the function met.
		grp.undo(i)
		if lostWith(m.ctx, grp.tx.Conn(), r.err) {
			grp.errs[i] = &jobstate.UnavailableError{Op: "update", Err: r.err}
		}
		return
	}
	fail := func(err error) {
		grp.undo(i)
		grp.errs[i] = err
	}
	cur := &snap.Job
	w := r.w
	if w.Job.ID != cur.ID {
		fail(fmt.Errorf("%w: write for job %s applied to job %s", jobstate.ErrInvalidArgument, w.Job.ID, cur.ID))
		return
	}
	seg := segment{member: i}
	if w.Job.Version == cur.Version && len(w.Transitions) == 0 && len(w.Executions) == 0 && len(w.Effects) == 0 {
		grp.out[i] = *cur
	} else {
		if err := checkWrite(cur, snap.Executions, snap.Effects, &w); err != nil {
			fail(err)
			return
		}
		if !grp.spSent[i] {
			ok, err := grp.many.add(cur, &w, &grp.out[i])
			if err != nil {
				fail(err)
				return
			}
			if ok {
				grp.fast = append(grp.fast, fastWrite{member: i, cur: cur, w: w})
				grp.ok[i] = true
				return
			}
		}
		b := &pgx.Batch{}
		if err := s.queueWrite(b, cur, &w, &grp.out[i]); err != nil {
			fail(err)
			return
		}
		for _, qq := range b.QueuedQueries {
			seg.stmts = append(seg.stmts, stmt{sql: qq.SQL, args: qq.Arguments, fn: qq.Fn})
		}
	}
	if grp.sp && (grp.spSent[i] || len(seg.stmts) > 0) {
		if !grp.spSent[i] {
			seg.stmts = append([]stmt{{sql: "SAVEPOINT " + grp.spName(i)}}, seg.stmts...)
		}
		seg.stmts = append(seg.stmts, stmt{sql: "RELEASE SAVEPOINT " + grp.spName(i)})
	}
	grp.ok[i] = true
	if len(seg.stmts) > 0 {
		grp.pending = append(grp.pending, seg)
	}
}

// undo drops what member i wrote through the transaction, if anything.
func (grp *group) undo(i int) {
	if !grp.sp {
		// The only member failed: the group rolls back.
		grp.broken = errGroupRolledBack
		return
	}
	if !grp.spSent[i] {
		return
	}
	name := grp.spName(i)
	grp.pending = append(grp.pending, segment{member: -1, stmts: []stmt{
		{sql: "ROLLBACK TO SAVEPOINT " + name}, {sql: "RELEASE SAVEPOINT " + name},
	}})
}

// send sends the queued statements, with the COMMIT when final. A member
// whose statement the server refused is rolled back to its savepoint and
// answered with the error; the statements after it are sent again. An
// error of the transaction as a whole is returned (and kept in broken).
func (grp *group) send(final bool) error {
	if grp.broken != nil {
		return grp.broken
	}
	for len(grp.pending) > 0 || final {
		segs := grp.pending
		b := &pgx.Batch{}
		owner := make([]int, 0, 8) // segment index of each statement
		done := 0
		for si, seg := range segs {
			for _, st := range seg.stmts {
				fn := st.fn
				b.Queue(st.sql, st.args...).Fn = func(br pgx.BatchResults) error {
					var err error
					if fn != nil {
						err = fn(br)
					} else {
						_, err = br.Exec()
					}
					if err == nil {
						done++
					}
					return err
				}
				owner = append(owner, si)
			}
		}
		reached := false
		if final {
			queueCommit(b, "COMMIT", &reached)
		}
		ctx, cancel := context.WithTimeout(context.Background(), grp.s.opts.CommitTimeout)
		err := grp.tx.SendBatch(ctx, b).Close()
		cancel()
		if err == nil {
			grp.pending = nil
			if final {
				grp.tx.finish()
			}
			return nil
		}
		if done >= len(owner) || !isDefinite(err) || !grp.sp {
			// The COMMIT failed, the connection was lost, or the only
			// member was refused: the transaction fails as a whole.
			ph := inTransaction
			if final {
				ph = commitPhase(err, reached)
			}
			return grp.breakWith(err, ph)
		}
		k := owner[done]
		seg := segs[k]
		if seg.member < 0 {
			return grp.breakWith(err, inTransaction)
		}
		// The statement failed inside the member's savepoint (its first
		// statement, the SAVEPOINT itself, cannot fail in a live
		// transaction): roll back to it and answer the member.
		first := done
		for first > 0 && owner[first-1] == k {
			first--
		}
		if !grp.spSent[seg.member] && done == first {
			return grp.breakWith(err, inTransaction)
		}
		name := grp.spName(seg.member)
		ctx, cancel = context.WithTimeout(context.Background(), grp.s.opts.CommitTimeout)
		_, rerr := grp.tx.q.Exec(ctx, "ROLLBACK TO SAVEPOINT "+name+"; RELEASE SAVEPOINT "+name)
		cancel()
		if rerr != nil {
			return grp.breakWith(rerr, inTransaction)
		}
		m := grp.members[seg.member]
		grp.ok[seg.member] = false
		grp.errs[seg.member] = grp.s.fail(m.ctx, "update", err)
		grp.pending = segs[k+1:]
	}
	return nil
}

// breakWith fails the transaction as a whole with err, the driver's
// error, which arose in ph; it returns err.
func (grp *group) breakWith(err error, ph phase) error {
	grp.broken, grp.brokenAt = err, ph
	return err
}

// errFor is the error of member m when the transaction failed as a
// whole, mapped as for an Update of its own (wrapErr).
func (grp *group) errFor(m *member) error {
	return wrapErr(m.ctx, "update", grp.broken, grp.brokenAt)
}

// finish commits the group and answers the members whose writes are in
// it.
func (grp *group) finish() {
	var err error
	if grp.many.len() == 0 {
		err = grp.send(true)
	} else if err = grp.send(false); err == nil {
		err = grp.sendMany()
	}
	if err != nil {
		rollback(grp.tx)
	}
	for i, m := range grp.members {
		switch {
		case !grp.ok[i]:
			m.res <- result{err: grp.errs[i]}
		case err != nil:
			m.res <- result{err: grp.errFor(m)}
		default:
			m.res <- result{job: grp.out[i]}
		}
	}
}

// sendMany sends the writes in many with the COMMIT. If the server
// refuses one of them (which one, a statement for all cannot tell), the
// group rolls back to before them and sends them one member at a time,
// each in its savepoint.
func (grp *group) sendMany() error {
	s := grp.s
	b := &pgx.Batch{}
	if grp.sp {
		b.Queue("SAVEPOINT pgstore_w")
	}
	if err := s.queueMulti(b, &grp.many); err != nil {
		return grp.breakWith(err, inTransaction)
	}
	if grp.sp {
		b.Queue("RELEASE SAVEPOINT pgstore_w")
	}
	reached := false
	queueCommit(b, "COMMIT", &reached)
	done := 0
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err == nil {
				done++
			}
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	err := grp.tx.SendBatch(ctx, b).Close()
	cancel()
	if err == nil {
		grp.tx.finish()
		return nil
	}
	if !grp.sp || !isDefinite(err) || done == 0 || done >= b.Len()-2 {
		return grp.breakWith(err, commitPhase(err, reached))
	}
	ctx, cancel = context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	_, rerr := grp.tx.q.Exec(ctx, "ROLLBACK TO SAVEPOINT pgstore_w; RELEASE SAVEPOINT pgstore_w")
	cancel()
	if rerr != nil {
		return grp.breakWith(rerr, inTransaction)
	}
	for _, f := range grp.fast {
		i := f.member
		b := &pgx.Batch{}
		if err := s.queueWrite(b, f.cur, &f.w, &grp.out[i]); err != nil {
			return grp.breakWith(err, inTransaction)
		}
		seg := segment{member: i, stmts: []stmt{{sql: "SAVEPOINT " + grp.spName(i)}}}
		for _, qq := range b.QueuedQueries {
			seg.stmts = append(seg.stmts, stmt{sql: qq.SQL, args: qq.Arguments, fn: qq.Fn})
		}
		seg.stmts = append(seg.stmts, stmt{sql: "RELEASE SAVEPOINT " + grp.spName(i)})
		grp.pending = append(grp.pending, seg)
	}
	grp.many, grp.fast = multiWrite{}, nil
	return grp.send(true)
}
