package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// The JSON form of `get`: the job in jobstate's own JSON form
// (Job.MarshalJSON), its records with snake_case keys, times in RFC 3339
// UTC with nanoseconds, absent times and ids left out.
type detailJSON struct {
	Job        jobstate.Job     `json:"job"`
	History    []transitionJSON `json:"history"`
	Executions []executionJSON  `json:"executions"`
	Effects    []effectJSON     `json:"effects"`
}

type transitionJSON struct {
	Version int64  `json:"version"`
	From    string `json:"from"`
	Event   string `json:"event"`
	To      string `json:"to"`
	Actor   string `json:"actor,omitempty"`
	Reason  string `json:"reason,omitempty"`
	ExecID  string `json:"exec_id,omitempty"`
	At      string `json:"at"`
}

type executionJSON struct {
	ID             string `json:"id"`
	Attempt        int    `json:"attempt"`
	Owner          string `json:"owner"`
	Status         string `json:"status"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
	HeartbeatAt    string `json:"heartbeat_at,omitempty"`
	ClaimedAt      string `json:"claimed_at,omitempty"`
	StartedAt      string `json:"started_at,omitempty"`
	FinishedAt     string `json:"finished_at,omitempty"`
	Error          string `json:"error,omitempty"`
}

type effectJSON struct {
	Name   string `json:"name"`
	ExecID string `json:"exec_id,omitempty"`
	Actor  string `json:"actor,omitempty"`
	At     string `json:"at"`
}

func idText(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

func jobDetail(job jobstate.Job, hist []jobstate.Transition, execs []jobstate.Execution, effs []jobstate.EffectRecord) detailJSON {
	d := detailJSON{Job: job, History: []transitionJSON{}, Executions: []executionJSON{}, Effects: []effectJSON{}}
	for _, t := range hist {
		d.History = append(d.History, transitionJSON{
			Version: t.Version, From: string(t.From), Event: string(t.Event), To: string(t.To),
			Actor: t.Actor, Reason: t.Reason, ExecID: idText(t.ExecID), At: exact(t.At),
		})
	}
	for _, x := range execs {
		d.Executions = append(d.Executions, executionJSON{
			ID: x.ID.String(), Attempt: x.Attempt, Owner: x.Owner, Status: string(x.Status),
			LeaseExpiresAt: exact(x.LeaseExpiresAt), HeartbeatAt: exact(x.HeartbeatAt),
			ClaimedAt: exact(x.ClaimedAt), StartedAt: exact(x.StartedAt), FinishedAt: exact(x.FinishedAt),
			Error: x.Error,
		})
	}
	for _, e := range effs {
		d.Effects = append(d.Effects, effectJSON{Name: e.Name, ExecID: idText(e.ExecID), Actor: e.Actor, At: exact(e.At)})
	}
	return d
}

// printJob writes a job and its records for people.
func printJob(w io.Writer, job jobstate.Job, hist []jobstate.Transition, execs []jobstate.Execution, effs []jobstate.EffectRecord) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	field := func(name string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", name, v) }
	field("id", job.ID)
	field("machine", job.Machine)
	state := fmt.Sprintf("%s (%s", job.State, job.Kind)
	if job.Outcome != "" {
		state += ", " + string(job.Outcome)
	}
	field("state", state+")")
	field("version", job.Version)
	field("attempt", job.Attempt)
	retries := fmt.Sprint(job.MaxRetries)
	if job.MaxRetries == jobstate.Unlimited {
		retries = "unlimited"
	}
	field("retries", fmt.Sprintf("%d of %s", job.RetryCount, retries))
	if job.Owner != "" {
		field("owner", job.Owner)
	}
	if job.IdempotencyKey != "" {
		field("key", job.IdempotencyKey)
	}
	field("priority", job.Priority)
	field("created", stamp(job.CreatedAt))
	field("updated", stamp(job.UpdatedAt))
	for _, t := range []struct {
		name string
		v    any
		show bool
	}{
		{"started", stamp(job.StartedAt), !job.StartedAt.IsZero()},
		{"completed", stamp(job.CompletedAt), !job.CompletedAt.IsZero()},
		{"not before", stamp(job.NotBefore), !job.NotBefore.IsZero()},
		{"deadline", stamp(job.Deadline), !job.Deadline.IsZero()},
		{"leases", fmt.Sprintf("%d, expiring %s", job.Leases, stamp(job.LeaseExpiresAt)), job.Leases > 0},
		{"committed", job.Committed, job.Committed != uuid.Nil},
		{"cancel requested", job.CancelRequested, job.CancelRequested},
		{"last error", fmt.Sprintf("%s (%s)", clip(job.LastError, 200), job.ErrorClass), job.LastError != ""},
		{"wakes", stamp(job.WakeAt), !job.WakeAt.IsZero()},
		{"payload", fmt.Sprintf("%d bytes", len(job.Payload)), len(job.Payload) > 0},
		{"result", fmt.Sprintf("%d bytes", len(job.Result)), len(job.Result) > 0},
	} {
		if t.show {
			field(t.name, t.v)
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nhistory (%d):\n", len(hist))
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  VERSION\tAT\tFROM\tEVENT\tTO\tACTOR\tREASON")
	for _, t := range hist {
		from := string(t.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Version, stamp(t.At), from, t.Event, t.To, dash(t.Actor), dash(clip(t.Reason, 80)))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nexecutions (%d):\n", len(execs))
	if len(execs) > 0 {
		tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ATTEMPT\tID\tOWNER\tSTATUS\tCLAIMED\tFINISHED\tERROR")
		for _, x := range execs {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Attempt, x.ID, x.Owner, x.Status, stamp(x.ClaimedAt), stamp(x.FinishedAt), dash(clip(x.Error, 80)))
		}
		tw.Flush()
	}

	fmt.Fprintf(w, "\neffects (%d):\n", len(effs))
	if len(effs) > 0 {
		tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tAT\tACTOR\tEXECUTION")
		for _, e := range effs {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Name, stamp(e.At), dash(e.Actor), dash(idText(e.ExecID)))
		}
		tw.Flush()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
