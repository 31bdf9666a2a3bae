package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobstate/jobstate"
)

// One group: its transaction, its members' functions and writes, and
// what it sends (see group.go for how groups are formed).

// group is one shared transaction.
type group struct {
	g       *grouper
	s       *Store
	tx      *connTx
	members []*member
	snaps   []jobstate.Snapshot
	out     []jobstate.Job
	ok      []bool  // the member's write is queued or sent and not refused
	errs    []error // why a member's write is not (nil: its function failed)
	spSent  []bool  // the member's savepoint was sent
	sp      bool    // members have savepoints (more than one member)
	pending []segment
	// tailErr is the error of the statement a member's function sent
	// through Tx at the end of the last batch (its own answer, the
	// transaction going on): see execFor.
	tailErr error
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
	// planned are the members done by their plans (groupplan.go),
	// answered after the COMMIT.
	planned []*plannedDone
}

// fastWrite is a member's write in many.
type fastWrite struct {
	member int
	cur    *jobstate.Job
	w      jobstate.Write
}

// segment is the queued statements of one member; tail marks the one
// whose last statement is a statement of the member's function.
type segment struct {
	member int
	tail   bool
	stmts  []stmt
}

type stmt struct {
	sql  string
	args []any
	fn   func(pgx.BatchResults) error
}

// stmtsOf returns the statements queued on b.
func stmtsOf(b *pgx.Batch) []stmt {
	out := make([]stmt, 0, b.Len())
	for _, qq := range b.QueuedQueries {
		out = append(out, stmt{sql: qq.SQL, args: qq.Arguments, fn: qq.Fn})
	}
	return out
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
	ms, done, err := s.runPlanned(tx, ms)
	// failPlanned answers the members done by their plans, whose writes
	// the rollback of the group's transaction undid.
	failPlanned := func(err error) {
		for _, d := range done {
			d.m.res <- result{err: wrapErr(d.m.ctx, "update", err, inTransaction)}
		}
	}
	if err != nil {
		rollback(tx)
		alone(ms)
		failPlanned(err)
		return
	}
	if len(ms) == 0 {
		(&group{g: g, s: s, tx: tx, planned: done}).finish()
		return
	}
	ids := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		ids[i] = m.id
	}
	snaps, err := s.lockGroup(tx, ids)
	if err != nil {
		rollback(tx)
		alone(ms)
		failPlanned(err)
		return
	}
	grp := &group{g: g, s: s, tx: tx, members: make([]*member, 0, len(ms)), snaps: make([]jobstate.Snapshot, 0, len(ms)), planned: done}
	var skipped []*member
	for _, m := range ms {
		if snap, ok := snaps[m.id]; ok {
			grp.members = append(grp.members, m)
			grp.snaps = append(grp.snaps, *snap)
		} else {
			skipped = append(skipped, m)
		}
	}
	alone(skipped)
	n := len(grp.members)
	if n == 0 {
		if len(done) > 0 {
			grp.finish()
		} else {
			rollback(tx)
		}
		return
	}
	if err := s.lockGroupKeys(tx, grp.snaps); err != nil {
		rollback(tx)
		alone(grp.members)
		failPlanned(err)
		return
	}
	grp.out = make([]jobstate.Job, n)
	grp.ok = make([]bool, n)
	grp.errs = make([]error, n)
	grp.spSent = make([]bool, n)
	// With members done by their plans, a member that fails is rolled
	// back alone: the group goes on to commit the plans' writes.
	grp.sp = n > 1 || len(done) > 0
	grp.many.reserve(n)
	grp.fast = make([]fastWrite, 0, n)
	for i := range grp.members {
		grp.runMember(i)
	}
	grp.finish()
}

// lockGroup locks the jobs of ids that no other transaction holds and
// reads their snapshots, in one round trip, by job.
func (s *Store) lockGroup(tx *connTx, ids []uuid.UUID) (map[uuid.UUID]*jobstate.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	snaps, err := s.loadSnapshots(ctx, tx, snapshotQuery{
		lock: s.sql.lockMany, lockArgs: []any{pgIDs(ids)},
		effects: s.sql.claimEffs, readArgs: []any{claimedSetting},
	})
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]*jobstate.Snapshot, len(snaps))
	for i := range snaps {
		out[snaps[i].Job.ID] = &snaps[i]
	}
	return out, nil
}

// lockGroupKeys takes the locks of the concurrency keys of the group's
// jobs with one (any of their functions may claim them, make them ready
// or stop them being ready, which changes their key's heads), waiting
// for each, in one statement and a fixed order, before any function runs:
// a group that waits for a key holds no other, so two groups cannot wait
// for each other. A member's write that raises its job's leases under a
// limit then counts its key's live executions without waiting
// (checkKey), and the recomputation of its key's heads (queueHeads) takes
// a lock the group holds.
func (s *Store) lockGroupKeys(tx *connTx, snaps []jobstate.Snapshot) error {
	var names []string
	for i := range snaps {
		if j := &snaps[i].Job; j.ConcurrencyKey != "" {
			names = append(names, s.keyLockName(j.Machine, j.ConcurrencyKey))
		}
	}
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	return s.waitKeys(ctx, tx, names)
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
		snaps, err := s.lockGroup(grp.tx, ids)
		if err != nil {
			grp.breakWith(err, inTransaction)
			m.turn <- turn{err: grp.errFor(m)}
			return
		}
		for j := i; j < len(grp.members); j++ {
			if sn, ok := snaps[grp.members[j].id]; ok {
				grp.snaps[j] = *sn
			}
		}
	}
	snap := &grp.snaps[i]
	lazy := newLazyTx(grp.tx)
	lazy.detach = true
	lazy.nested = func() { grp.dirty = true }
	lazy.before = func(context.Context) error {
		if err := grp.send(false); err != nil {
			return grp.errFor(m)
		}
		if grp.sp && !grp.spSent[i] {
			grp.tx.queue("SAVEPOINT " + grp.spName(i))
			grp.spSent[i] = true
		}
		return nil
	}
	lazy.exec = grp.execFor(i)
	began := time.Now()
	m.turn <- turn{snap: snap, fctx: s.fnContext(m.ctx, lazy)}
	r := <-m.ret
	average(&grp.g.fnTime, time.Since(began))
	// What the function's savepoints left to send (their ends) belongs
	// to the member, inside its savepoint.
	var queued []stmt
	for _, sql := range grp.tx.takeQueued() {
		queued = append(queued, stmt{sql: sql})
	}
	if r.err != nil {
		// The caller returns its function's error, or errs[i]: the loss
		// of the group's connection the function met.
		grp.undo(i, queued)
		if lostWith(m.ctx, grp.tx.Conn(), r.err) {
			grp.errs[i] = &jobstate.UnavailableError{Op: "update", Err: r.err}
		}
		return
	}
	if needsKeyCheck(&snap.Job, &r.w) {
		// The key's live executions, counted in the group's transaction
		// once what it queued before has gone (the key's lock is the
		// group's already: lockGroupKeys).
		if err := grp.send(false); err != nil {
			grp.errs[i] = grp.errFor(m)
			return
		}
		j := &snap.Job
		gctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
		counts, err := s.gateKeys(gctx, grp.tx, j.Machine, []string{j.ConcurrencyKey})
		cancel()
		if err != nil {
			grp.breakWith(err, inTransaction)
			grp.errs[i] = grp.errFor(m)
			return
		}
		if err := jobstate.CheckKeyLimit(*j, r.w, counts[j.ConcurrencyKey]); err != nil {
			grp.undo(i, queued)
			grp.errs[i] = err
			return
		}
	}
	seg := segment{member: i, stmts: queued}
	var many *multiWrite
	if !grp.spSent[i] && len(queued) == 0 {
		many = &grp.many
	}
	staged := grp.many.len()
	b := &pgx.Batch{}
	if err := s.stage(grp.tx.plans, snap, &r.w, &grp.out[i], many, b); err != nil {
		grp.undo(i, queued)
		grp.errs[i] = err
		return
	}
	if grp.many.len() > staged {
		grp.fast = append(grp.fast, fastWrite{member: i, cur: &snap.Job, w: r.w})
		grp.ok[i] = true
		return
	}
	seg.stmts = append(seg.stmts, stmtsOf(b)...)
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

// execFor returns how member i's function runs a statement through Tx
// (lazyTx.exec): in one round trip with the group's pending writes, the
// member's savepoint and the savepoints its function took. An error of
// that statement is the function's to handle, as on a transaction of its
// own; an error of what went before it is the group's.
func (grp *group) execFor(i int) func(ctx context.Context, sql string, args []any) (pgconn.CommandTag, error) {
	m := grp.members[i]
	return func(_ context.Context, sql string, args []any) (pgconn.CommandTag, error) {
		if grp.broken != nil {
			return pgconn.CommandTag{}, grp.errFor(m)
		}
		seg := segment{member: i, tail: true}
		if grp.sp && !grp.spSent[i] {
			seg.stmts = append(seg.stmts, stmt{sql: "SAVEPOINT " + grp.spName(i)})
			grp.spSent[i] = true
		}
		for _, q := range grp.tx.takeQueued() {
			seg.stmts = append(seg.stmts, stmt{sql: q})
		}
		var tag pgconn.CommandTag
		seg.stmts = append(seg.stmts, stmt{sql: sql, args: args, fn: func(br pgx.BatchResults) error {
			var err error
			tag, err = br.Exec()
			return err
		}})
		grp.pending = append(grp.pending, seg)
		if err := grp.send(false); err != nil {
			return pgconn.CommandTag{}, grp.errFor(m)
		}
		if err := grp.tailErr; err != nil {
			grp.tailErr = nil
			return pgconn.CommandTag{}, err
		}
		return tag, nil
	}
}

// undo drops what member i wrote through the transaction, if anything;
// queued are the ends of its function's savepoints, not sent, which the
// rollback to its savepoint makes moot.
func (grp *group) undo(i int, queued []stmt) {
	if !grp.sp {
		// The only member failed: the group rolls back.
		grp.broken = errGroupRolledBack
		return
	}
	if !grp.spSent[i] {
		if len(queued) > 0 {
			grp.pending = append(grp.pending, segment{member: -1, stmts: queued})
		}
		return
	}
	name := grp.spName(i)
	grp.tx.plans.rolledBack()
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
				b.Queue(st.sql, st.args...).Fn = counted(st.fn, &done)
				owner = append(owner, si)
			}
		}
		reached := false
		if final {
			queueCommit(b, "COMMIT", &reached)
		}
		err := grp.sendBatch(b, final)
		if err == nil {
			grp.pending = nil
			return nil
		}
		if last := len(owner) - 1; done == last && segs[owner[last]].tail && isDefinite(err) {
			// The function's own statement failed: its answer, for the
			// function to handle; what went before it stands.
			grp.pending = nil
			grp.tailErr = err
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
		if err := grp.rollbackTo(grp.spName(seg.member)); err != nil {
			return err
		}
		m := grp.members[seg.member]
		grp.ok[seg.member] = false
		grp.errs[seg.member] = grp.s.fail(m.ctx, "update", err)
		grp.pending = segs[k+1:]
	}
	return nil
}

// counted returns a batch callback that reads a statement's answer (with
// fn, or as an Exec when fn is nil) and counts it in *done when it is not
// an error: the first statement not counted is the one that failed.
func counted(fn func(pgx.BatchResults) error, done *int) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		var err error
		if fn != nil {
			err = fn(br)
		} else {
			_, err = br.Exec()
		}
		if err == nil {
			*done++
		}
		return err
	}
}

// sendBatch sends b, the group's statements (with its COMMIT when
// final), bounded by CommitTimeout. The round trip of a COMMIT that
// succeeds is measured: it sets how long Updates wait before another
// group starts for them.
func (grp *group) sendBatch(b *pgx.Batch, final bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), grp.s.opts.CommitTimeout)
	defer cancel()
	start := time.Now()
	err := grp.tx.SendBatch(ctx, b).Close()
	if err == nil && final {
		average(&grp.g.rtt, time.Since(start))
		grp.tx.finish()
	}
	return err
}

// rollbackTo rolls the group's transaction back to the savepoint name
// and ends it, after a statement in it failed; a failure of that breaks
// the group.
func (grp *group) rollbackTo(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), grp.s.opts.CommitTimeout)
	defer cancel()
	grp.tx.plans.rolledBack()
	if _, err := grp.tx.q.Exec(ctx, "ROLLBACK TO SAVEPOINT "+name+"; RELEASE SAVEPOINT "+name); err != nil {
		return grp.breakWith(err, inTransaction)
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
	for _, d := range grp.planned {
		if err != nil {
			d.m.res <- result{err: grp.errFor(d.m)}
		} else {
			d.m.res <- result{job: d.job, recs: d.recs}
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
	if err := s.queueMulti(b, grp.tx.plans, &grp.many); err != nil {
		return grp.breakWith(err, inTransaction)
	}
	if grp.sp {
		b.Queue("RELEASE SAVEPOINT pgstore_w")
	}
	reached := false
	queueCommit(b, "COMMIT", &reached)
	done := 0
	for _, qq := range b.QueuedQueries {
		qq.Fn = counted(qq.Fn, &done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	start := time.Now()
	err := grp.tx.SendBatch(ctx, b).Close()
	cancel()
	if err == nil {
		average(&grp.g.rtt, time.Since(start))
		grp.tx.finish()
		return nil
	}
	if !grp.sp || !isDefinite(err) || done == 0 || done >= b.Len()-2 {
		return grp.breakWith(err, commitPhase(err, reached))
	}
	ctx, cancel = context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	grp.tx.plans.rolledBack()
	_, rerr := grp.tx.q.Exec(ctx, "ROLLBACK TO SAVEPOINT pgstore_w; RELEASE SAVEPOINT pgstore_w")
	cancel()
	if rerr != nil {
		return grp.breakWith(rerr, inTransaction)
	}
	for _, f := range grp.fast {
		i := f.member
		b := &pgx.Batch{}
		if err := s.queueWrite(b, grp.tx.plans, f.cur, grp.snaps[i].Executions, &f.w, &grp.out[i]); err != nil {
			return grp.breakWith(err, inTransaction)
		}
		seg := segment{member: i, stmts: []stmt{{sql: "SAVEPOINT " + grp.spName(i)}}}
		seg.stmts = append(seg.stmts, stmtsOf(b)...)
		seg.stmts = append(seg.stmts, stmt{sql: "RELEASE SAVEPOINT " + grp.spName(i)})
		grp.pending = append(grp.pending, seg)
	}
	grp.many, grp.fast = multiWrite{}, nil
	return grp.send(true)
}
