package conformance

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
)

// This file holds the generator's draws (docs/conformance.md §6.2): the
// next step of a scenario, weighted by what the scenario holds, and its
// arguments.

// draw picks the next step: an operation weighted by what the scenario
// holds, with arguments that mostly make sense and sometimes do not.
func (g *generator) draw() Step {
	// A duplicate delivery: the previous step again (fresh aliases).
	if n := len(g.steps); n > 0 && g.chance(0.07) {
		p := g.steps[n-1]
		switch p.Op {
		case "create", "fire", "cancel", "claim_job", "heartbeat", "start", "commit", "finish", "succeed", "fail", "snooze", "advance", "apply", "redrive", "sweep":
			s := p
			s.Expect = Expect{}
			s.Note = "the previous step again (a duplicate delivery)"
			switch s.Op {
			case "create", "redrive":
				if s.As != "" {
					s.As = g.jobAlias()
				}
			case "claim_job":
				s.As = g.leaseAlias()
			}
			return s
		}
	}
	live := g.liveLeases()
	type choice struct {
		op string
		w  int
	}
	nj := len(g.jobs)
	var cs []choice
	add := func(op string, w int) {
		if w > 0 {
			cs = append(cs, choice{op, w})
		}
	}
	switch {
	case nj == 0:
		add("create", 40)
	case nj < 3:
		add("create", 10)
	default:
		add("create", 3)
	}
	if nj > 0 {
		add("fire", 10)
		add("cancel", 3)
		add("get", 3)
		add("claim_job", 4)
		add("history", 3)
		add("executions", 2)
		add("list", 3)
		if len(g.def.Effects()) > 0 {
			add("apply", 4)
		} else if g.chance(0.3) {
			add("apply", 1)
		}
		if from := g.def.Policy().RedriveFrom; len(from) > 0 {
			w := 3
			for _, a := range g.jobs {
				if j, _, ok := g.stored(a); ok && slices.Contains(from, j.State) {
					w = 20 // a job waits to be redriven
				}
			}
			add("redrive", w)
		} else if g.chance(0.3) {
			add("redrive", 1)
		}
	}
	if g.claimable() {
		add("claim", 12)
	} else {
		add("claim", 2)
	}
	add("sweep", 5)
	add("recover_worker", 2)
	add("clock", 12)
	if len(g.leases) > 0 {
		w := 1
		if len(live) > 0 {
			w = 4
		}
		add("heartbeat", 2*w)
		add("start", 2*w)
		add("commit", 2*w)
		if g.committedLease(live) != "" {
			add("finish", 8)
		} else {
			add("finish", 1)
		}
		add("succeed", 3*w)
		add("fail", 3*w)
		add("snooze", 1*w)
		add("advance", 2*w)
	}
	total := 0
	for _, c := range cs {
		total += c.w
	}
	x := g.rnd.IntN(total)
	op := cs[len(cs)-1].op
	for _, c := range cs {
		if x < c.w {
			op = c.op
			break
		}
		x -= c.w
	}
	s := Step{Op: op}
	switch op {
	case "create":
		g.drawCreate(&s)
	case "fire":
		s.Job = g.someJob()
		s.Event = string(g.userEvent(s.Job))
		g.drawCall(&s, true)
	case "cancel":
		s.Job = g.someJob()
		g.drawCall(&s, true)
	case "get", "history", "executions":
		if g.chance(0.04) {
			s.JobID = missingJob
		} else {
			s.Job = g.someJob()
		}
	case "claim", "claim_job":
		if op == "claim_job" {
			s.Job = g.someJob()
		} else if g.chance(0.02) {
			s.Machine = ptr("no_such_machine")
		}
		s.Worker = g.worker()
		s.TTL = g.leaseTTL()
		s.Args = g.args()
		s.As = g.leaseAlias()
	case "heartbeat", "start", "commit", "finish", "succeed", "fail", "snooze", "advance":
		g.drawLease(&s, live)
		if c := g.committedLease(live); op == "finish" && c != "" && s.Token == nil && g.chance(0.8) {
			s.Lease = c
		}
		switch op {
		case "commit", "succeed":
			if g.chance(0.6) {
				s.Result = ptr(pick(g, "r1", "r2"))
			}
			switch x := g.rnd.Float64(); {
			case x < 0.25:
				s.Effect = "count"
			case x < 0.3:
				s.Effect = "fail_effect"
			}
		case "fail":
			if g.chance(0.03) {
				break // no error at all
			}
			s.Error = pick(g, "boom", "boom", "timeout", "403", "404", "429")
			perm := 0.15
			if len(g.def.Policy().RedriveFrom) > 0 {
				perm = 0.4 // reach the states a redrive starts from
			}
			switch x := g.rnd.Float64(); {
			case x < 0.15:
				s.Class = "retryable"
			case x < 0.15+perm:
				s.Class = "permanent"
			case x < 0.25+perm:
				s.Class = "retry_after"
				s.After = pick(g, "3s", "1m", "0")
			}
		case "snooze":
			s.Delay = pick(g, "5s", "5s", "1m", "0")
			if g.chance(0.04) {
				s.Delay = "-1s"
			}
		case "advance":
			s.Event = string(g.userEvent(g.aliasOfLease(s.Lease)))
			g.drawCall(&s, false)
		}
	case "apply":
		s.Job = g.someJob()
		var names, here []string
		for _, e := range g.def.Effects() {
			names = append(names, e.Name)
			for _, a := range g.jobs {
				j, _, _ := g.stored(a)
				if len(e.In) == 0 || slices.Contains(e.In, j.State) {
					here = append(here, a+" "+e.Name)
				}
			}
		}
		if len(here) > 0 && g.chance(0.7) {
			s.Job, s.Effect, _ = strings.Cut(pick(g, here...), " ")
		} else if len(names) == 0 || g.chance(0.1) {
			s.Effect = "no_such_effect"
		} else {
			s.Effect = pick(g, names...)
		}
		g.drawCall(&s, false)
	case "redrive":
		s.Job = g.terminalJob()
		s.As = g.jobAlias()
		g.drawCall(&s, true)
	case "sweep":
		if len(g.jobs) > 0 && g.chance(0.8) {
			s.Job = g.someJob()
		}
	case "recover_worker":
		s.Worker = pick(g, "w1", "w2", "w2")
		if g.chance(0.05) {
			s.Worker = ""
		}
		if len(g.jobs) > 0 && g.chance(0.8) {
			s.Job = g.someJob()
		}
	case "clock":
		g.drawClock(&s)
	case "list":
		g.drawList(&s)
	}
	return s
}

// drawList draws a list: mostly the next page of an earlier listing with
// the same filters, else random filters; sometimes a cursor of another
// query, a state or machine that does not exist, or a page too large.
func (g *generator) drawList(s *Step) {
	s.As = "p" + strconv.Itoa(g.nPage+1)
	if len(g.pages) > 0 && g.chance(0.4) {
		prev := pick(g, g.pages...)
		if g.chance(0.9) {
			*s = listFilters(prev)
			s.As = "p" + strconv.Itoa(g.nPage+1)
		}
		s.Cursor = prev.As
		s.Limit = pick(g, prev.Limit, prev.Limit, 1, 2)
		return
	}
	switch x := g.rnd.Float64(); {
	case x < 0.6:
		s.Machine = ptr(g.def.Name())
	case x < 0.63:
		s.Machine = ptr("no_such_machine")
	}
	states := g.def.States()
	if g.chance(0.4) {
		for _, st := range states {
			if g.chance(0.4) {
				s.States = append(s.States, string(st.Name))
			}
		}
	}
	if g.chance(0.03) {
		s.States = append(s.States, "NO_SUCH_STATE")
	}
	if g.chance(0.15) {
		s.Kinds = []string{pick(g, states...).Kind.String()}
	}
	if g.chance(0.1) {
		var outcomes []string
		for _, st := range states {
			if st.Outcome != "" {
				outcomes = append(outcomes, string(st.Outcome))
			}
		}
		if len(outcomes) > 0 {
			s.Outcomes = []string{pick(g, outcomes...)}
		}
	}
	if g.chance(0.25) {
		s.Owner = "alice"
	}
	if g.chance(0.1) {
		s.Key = pick(g, "k1", "k2")
	}
	start, _ := time.Parse(time.RFC3339Nano, GenStart)
	if g.chance(0.1) {
		s.CreatedFrom = genTime(start.Add(pick(g, time.Second, time.Minute)))
	}
	if g.chance(0.1) {
		s.UpdatedTo = genTime(g.now())
	}
	if g.chance(0.05) {
		s.CompletedFrom = genTime(start)
	}
	if g.chance(0.2) {
		s.Order = "updated"
	}
	s.Desc = g.chance(0.3)
	s.Limit = pick(g, 1, 2, 2, 3, 0)
	if g.chance(0.02) {
		s.Limit = 1001
	}
}

// listFilters returns a list step with the filters and order of s and
// nothing else.
func listFilters(s Step) Step {
	return Step{
		Op: "list", Machine: s.Machine, States: s.States, Kinds: s.Kinds, Outcomes: s.Outcomes,
		Owner: s.Owner, Key: s.Key, CreatedFrom: s.CreatedFrom, CreatedTo: s.CreatedTo,
		UpdatedFrom: s.UpdatedFrom, UpdatedTo: s.UpdatedTo, CompletedFrom: s.CompletedFrom,
		CompletedTo: s.CompletedTo, Order: s.Order, Desc: s.Desc,
	}
}

// jobAlias and leaseAlias give the next alias to bind; a step that fails
// binds none, and the next step gets the same.
func (g *generator) jobAlias() string { return "j" + strconv.Itoa(g.nJob+1) }

func (g *generator) leaseAlias() string { return "l" + strconv.Itoa(g.nLease+1) }

func (g *generator) worker() string {
	if g.chance(0.03) {
		return ""
	}
	return pick(g, "w1", "w1", "w2")
}

func (g *generator) leaseTTL() string {
	switch x := g.rnd.Float64(); {
	case x < 0.03:
		return "-1s"
	case x < 0.25:
		return pick(g, "10s", "1m", "2m")
	}
	return ""
}

// args draws the args of a call: numbers for even_arg, mostly.
func (g *generator) args() json.RawMessage {
	p := 0.1
	if g.guards["even_arg"] {
		p = 0.7
	}
	if !g.chance(p) {
		return nil
	}
	return json.RawMessage(pick(g, "2", "2", "4", "3", "-6", `"2"`, "2.5"))
}

// drawCall fills the actor, reason, args and (for fire, cancel, redrive)
// if_version of a call.
func (g *generator) drawCall(s *Step, ifVersion bool) {
	switch x := g.rnd.Float64(); {
	case x < 0.5:
		s.Actor = "alice"
	case x < 0.75:
		s.Actor = "bob"
	}
	if g.chance(0.1) {
		s.Reason = "generated"
	}
	s.Args = g.args()
	if !ifVersion || s.Job == "" {
		return
	}
	j, _, ok := g.stored(s.Job)
	if !ok {
		return
	}
	switch x := g.rnd.Float64(); {
	case x < 0.1:
		s.IfVersion = j.Version
	case x < 0.15 && j.Version > 1:
		s.IfVersion = j.Version - 1
	}
}

func (g *generator) drawCreate(s *Step) {
	s.As = g.jobAlias()
	if g.chance(0.02) {
		s.Machine = ptr("no_such_machine")
	}
	if g.chance(0.7) {
		s.Payload = ptr(pick(g, "p1", "p1", "p2"))
	}
	if g.chance(0.35) {
		s.Key = pick(g, "k1", "k1", "k2")
	}
	if g.chance(0.5) {
		s.Owner = "alice"
	}
	switch x := g.rnd.Float64(); {
	case x < 0.03:
		s.TTL = "-1s"
	case x < 0.25:
		s.TTL = pick(g, "30s", "90s", "10m", "1h")
	}
	if g.chance(0.05) {
		s.Deadline = genTime(g.now().Add(pick(g, 45*time.Second, 5*time.Minute)))
	}
	if g.chance(0.1) {
		s.NotBefore = genTime(g.now().Add(pick(g, 10*time.Second, time.Minute)))
	}
	if g.chance(0.2) {
		s.Priority = pick(g, -1, 1, 2)
	}
	switch x := g.rnd.Float64(); {
	case x < 0.02:
		s.MaxRetries = ptr(-2)
	case x < 0.15:
		s.MaxRetries = ptr(pick(g, 0, 1, 2, -1))
	}
	switch x := g.rnd.Float64(); {
	case x < 0.4:
		s.Actor = "alice"
	case x < 0.55:
		s.Actor = "bob"
	}
	if g.chance(0.1) {
		s.Reason = "generated"
	}
	s.Args = g.args()
}

// someJob picks a job, preferring one that has not finished.
func (g *generator) someJob() string {
	var open []string
	for _, a := range g.jobs {
		if j, _, ok := g.stored(a); ok && j.Kind != jobstate.KindTerminal {
			open = append(open, a)
		}
	}
	if len(open) > 0 && g.chance(0.8) {
		return pick(g, open...)
	}
	return pick(g, g.jobs...)
}

// terminalJob picks a finished job if there is one, preferring one that
// may be redriven.
func (g *generator) terminalJob() string {
	var done, redrive []string
	for _, a := range g.jobs {
		if j, _, ok := g.stored(a); ok && j.Kind == jobstate.KindTerminal {
			done = append(done, a)
			if slices.Contains(g.def.Policy().RedriveFrom, j.State) {
				redrive = append(redrive, a)
			}
		}
	}
	if len(redrive) > 0 && g.chance(0.8) {
		return pick(g, redrive...)
	}
	if len(done) > 0 && g.chance(0.85) {
		return pick(g, done...)
	}
	return pick(g, g.jobs...)
}

// aliasOfLease returns the first job alias of a lease's job.
func (g *generator) aliasOfLease(lease string) string {
	return g.first[g.r.leases[lease].JobID]
}

// userEvent draws an event to fire at a job: mostly one its state has a
// rule for, sometimes any event of the table, a lifecycle event or none.
func (g *generator) userEvent(alias string) jobstate.Event {
	var here []jobstate.Event
	if j, _, ok := g.stored(alias); ok {
		for _, e := range g.def.Events(j.State) {
			if !jobstate.IsLifecycle(e) {
				here = append(here, e)
			}
		}
	}
	switch x := g.rnd.Float64(); {
	case x < 0.7 && len(here) > 0:
		return pick(g, here...)
	case x < 0.85 && len(g.user) > 0:
		return pick(g, g.user...)
	case x < 0.9:
		return "cancel"
	case x < 0.96:
		return pick(g, jobstate.EventClaim, jobstate.EventSucceed, jobstate.EventRetry, jobstate.EventFail, jobstate.EventExpire, jobstate.EventRequeue)
	case x < 0.98:
		return ""
	}
	return "no_such_event"
}

// drawLease picks the lease of a lease operation, mostly a live one, and
// sometimes forges its token.
func (g *generator) drawLease(s *Step, live []string) {
	if len(live) > 0 && g.chance(0.75) {
		s.Lease = live[len(live)-1]
		if g.chance(0.3) {
			s.Lease = pick(g, live...)
		}
	} else {
		s.Lease = pick(g, g.leases...)
	}
	if g.chance(0.08) {
		t := g.r.leases[s.Lease].Token
		s.Token = ptr(pick(g, t+1, t-1, 0, 99))
	}
}

// drawClock moves the clock: by a duration, or to an instant a job waits
// for (a lease's expiry, a not-before, a deadline) exactly.
func (g *generator) drawClock(s *Step) {
	if g.chance(0.3) {
		var at []time.Time
		now := g.now()
		for _, a := range g.jobs {
			j, _, _ := g.stored(a)
			for _, t := range []time.Time{j.LeaseExpiresAt, j.NotBefore, j.Deadline} {
				if t.After(now) {
					at = append(at, t)
				}
			}
		}
		if len(at) > 0 {
			sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
			s.Set = genTime(pick(g, at...))
			return
		}
	}
	s.Advance = pick(g, "1s", "1s", "5s", "10s", "29s", "30s", "31s", "1m", "1m", "5m", "10m", "1h", "25h")
}
