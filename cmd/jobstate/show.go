package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// storeFlags are the flags of every command that reads the store.
type storeFlags struct {
	db   dbFlags
	defs listFlag
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	f.db.register(fs)
	fs.Var(&f.defs, "definitions", "a JSON definition file, or a directory of them (repeatable; default $JOBSTATE_DEFINITIONS)")
}

// checkStore resolves the database and reads the definitions, sending
// nothing.
func (a *app) checkStore(f storeFlags) (database, []definitionFile, error) {
	defs, err := loadDefinitions(a.definitionPaths(f.defs))
	if err != nil {
		return database{}, nil, err
	}
	db, err := a.checkDB(f.db)
	if err != nil {
		return database{}, nil, err
	}
	return db, defs, nil
}

// list prints jobs by the filters of Engine.List: one page (from
// --cursor), or every page with --all; a table, or JSON with --json.
func (a *app) list(ctx context.Context, args []string) error {
	fs := a.newFlags("list", "[filters] [--limit N] [--cursor C | --all] [--json]")
	var sf storeFlags
	var ff filterFlags
	sf.register(fs)
	ff.register(fs, true)
	limit := fs.Int("limit", 50, fmt.Sprintf("jobs per page, 1 to %d", jobstate.MaxListLimit))
	cursor := fs.String("cursor", "", "the page after this cursor (printed after each page)")
	all := fs.Bool("all", false, "print every page")
	asJSON := fs.Bool("json", false, "print JSON: {\"jobs\": [...], \"next\": CURSOR}")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("list: unexpected argument %q (filters are flags)", pos[0])
	}
	if *limit < 1 || *limit > jobstate.MaxListLimit {
		return usagef("--limit %d is outside 1..%d", *limit, jobstate.MaxListLimit)
	}
	if *all && *cursor != "" {
		return usagef("list: --all and --cursor exclude each other")
	}
	db, defs, err := a.checkStore(sf)
	if err != nil {
		return err
	}
	q, err := ff.query(time.Now())
	if err != nil {
		return err
	}
	q.Limit = *limit
	if err := checkQuery(ctx, defs, q, *cursor); err != nil {
		return err
	}
	s, err := a.open(ctx, db, defs, 2)
	if err != nil {
		return err
	}
	defer s.close()

	var jobs []jobstate.Job
	next := *cursor
	var tw *tabwriter.Writer
	if !*asJSON {
		tw = tabwriter.NewWriter(a.stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tMACHINE\tSTATE\tATTEMPT\tRETRIES\tCREATED\tUPDATED\tLAST ERROR")
	}
	for {
		page, err := s.eng.List(ctx, q, next)
		if err != nil {
			return dbError("list", err)
		}
		next = page.Next
		if *asJSON {
			jobs = append(jobs, page.Jobs...)
		} else {
			for _, j := range page.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.ID, j.Machine, j.State, j.Attempt, j.RetryCount,
					stamp(j.CreatedAt), stamp(j.UpdatedAt), clip(j.LastError, 60))
			}
			tw.Flush()
		}
		if !*all || next == "" {
			break
		}
	}
	if *asJSON {
		if jobs == nil {
			jobs = []jobstate.Job{}
		}
		out := struct {
			Jobs []jobstate.Job `json:"jobs"`
			Next string         `json:"next,omitempty"`
			// NextFlags are the flags that ask for the next page: the
			// cursor, and the times given as durations ago, resolved.
			NextFlags []string `json:"next_flags,omitempty"`
		}{Jobs: jobs, Next: next}
		if next != "" {
			out.NextFlags = append([]string{"--cursor", next}, ff.absoluteTimes(q)...)
		}
		return writeJSON(a.stdout, out)
	}
	if next != "" {
		fmt.Fprintf(a.stdout, "more: %s\n", strings.Join(append([]string{"--cursor", next}, ff.absoluteTimes(q)...), " "))
	}
	return nil
}

// get prints one job with its history, executions and effects.
func (a *app) get(ctx context.Context, args []string) error {
	fs := a.newFlags("get", "ID [--json]")
	var sf storeFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON: {\"job\", \"history\", \"executions\", \"effects\"}")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("get: name one job id")
	}
	id, err := parseID(pos[0])
	if err != nil {
		return err
	}
	db, defs, err := a.checkStore(sf)
	if err != nil {
		return err
	}
	s, err := a.open(ctx, db, defs, 2)
	if err != nil {
		return err
	}
	defer s.close()
	job, err := s.eng.Get(ctx, id)
	if errors.Is(err, jobstate.ErrNotFound) {
		return refusedf("job %s not found", id)
	}
	if err != nil {
		return dbError("get", err)
	}
	hist, err := s.eng.History(ctx, id)
	if err != nil {
		return dbError("get: history", err)
	}
	execs, err := s.eng.Executions(ctx, id)
	if err != nil {
		return dbError("get: executions", err)
	}
	effs, err := s.eng.Effects(ctx, id)
	if err != nil {
		return dbError("get: effects", err)
	}
	if *asJSON {
		return writeJSON(a.stdout, jobDetail(job, hist, execs, effs))
	}
	printJob(a.stdout, job, hist, execs, effs)
	return nil
}

// parseID reads a job id: a UUID in its canonical form (or with braces,
// a urn:uuid: prefix or no hyphens, as uuid.Parse accepts).
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usagef("malformed job id %q: want a UUID such as 0190f5e4-8c3b-7a6e-9d1f-2b4c6d8e0f12", clip(s, 80))
	}
	return id, nil
}

// counts prints the number of jobs per machine and state: every state
// the definitions declare, in their order, with 0 where none is.
func (a *app) counts(ctx context.Context, args []string) error {
	fs := a.newFlags("counts", "[--machine NAME] [--json]")
	var sf storeFlags
	sf.register(fs)
	machine := fs.String("machine", "", "only this machine (default: every machine of the definitions)")
	asJSON := fs.Bool("json", false, "print JSON: {machine: {state: count}}")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("counts: unexpected argument %q", pos[0])
	}
	db, defs, err := a.checkStore(sf)
	if err != nil {
		return err
	}
	if len(defs) == 0 {
		return usagef("counts: no definitions given (--definitions or JOBSTATE_DEFINITIONS): the machines to count come from them")
	}
	if err := checkQuery(ctx, defs, jobstate.ListQuery{Machine: *machine}, ""); err != nil {
		return err
	}
	s, err := a.open(ctx, db, defs, 2)
	if err != nil {
		return err
	}
	defer s.close()
	names := machineNames(defs)
	if *machine != "" {
		names = []string{*machine}
	}
	out := map[string]map[jobstate.State]int{}
	tw := tabwriter.NewWriter(a.stdout, 2, 8, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "MACHINE\tSTATE\tKIND\tJOBS")
	}
	for _, name := range names {
		c, err := s.eng.Counts(ctx, name)
		if err != nil {
			return dbError("counts", err)
		}
		def, _ := s.eng.Machine(name)
		row := map[jobstate.State]int{}
		for _, st := range def.States() {
			row[st.Name] = c[st.Name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", name, st.Name, st.Kind, c[st.Name])
		}
		// A state the definition no longer declares still has its jobs.
		var extra []string
		for st := range c {
			if _, ok := def.State(st); !ok {
				extra = append(extra, string(st))
			}
		}
		sort.Strings(extra)
		for _, st := range extra {
			row[jobstate.State(st)] = c[jobstate.State(st)]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", name, st, "undeclared", c[jobstate.State(st)])
		}
		out[name] = row
	}
	if *asJSON {
		return writeJSON(a.stdout, out)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return refusedf("writing JSON: %v", err)
	}
	return nil
}

// stamp writes a time for people: RFC 3339 in UTC to the second, "-" for
// none.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// exact writes a time for scripts: RFC 3339 in UTC with its nanoseconds,
// "" for none.
func exact(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// clip cuts s to n runes on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
