package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate"
)

// TestSweepRecoversStuckJudging checks rule 12's recovery where the server
// keeps running: a submission left judging with no verdict is failed by
// the periodic sweep once its judging lease lapses (not before), the
// bounty stays funded, and the late verdict is fenced out. Start-up
// recovery is TestInvariants/12_*.
func TestSweepRecoversStuckJudging(t *testing.T) {
	w := newWorld(t)
	b := w.funded()
	stuck := w.submit(b.ID, "alice", pass)
	w.clock.Advance(JudgingLease - time.Nanosecond)
	rep, err := w.m.Sweep(w.ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Aborted, "still within its judging lease")
	assert.Equal(t, []string{"alice judging"}, w.statuses(b.ID))
	w.clock.Advance(time.Nanosecond)
	rep, err = w.m.Sweep(w.ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Aborted)
	s := w.snap(b.ID)
	assert.Equal(t, Funded, s.Job.State, "the bounty stays funded")
	assert.Zero(t, s.Job.Leases)
	subs := w.submissions(b.ID)
	require.Len(t, subs, 1)
	assert.Equal(t, Failed, subs[0].Status)
	assert.Equal(t, "lease expired", subs[0].Reason)
	before := w.snap(b.ID)
	_, err = w.m.Judge(w.ctx, stuck)
	w.refused(before, err, jobstate.ErrLeaseLost)
	w.judge(w.submit(b.ID, "alice", pass))
	assert.Equal(t, Resolved, w.get(b.ID).State, "alice's retry wins")
}
