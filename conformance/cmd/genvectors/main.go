// Command genvectors draws random conformance scenarios over the machines
// of the hand-written vectors, runs them on the Go engine (memstore) and
// writes them, every step expecting every field the format can, as one
// gzip-compressed JSON file per machine (docs/conformance.md §6).
//
// The committed corpus in conformance/generated/ is rewritten, from the
// repository's top, by
//
//	go run ./conformance/cmd/genvectors
//
// Beside the scenarios of each machine it writes invalid definitions
// (-invalid of them, generated/invalid_definitions.json.gz): definitions
// of the machines broken in one to three places, each expecting its
// complete list of problems in order.
//
// The same seed value (-rand) and options always write the same files.
// Scenario n of a machine depends only on the seed value, the machine and
// n: -first and -per-machine draw scenarios the corpus does not have, into
// another directory, for a port that wants more:
//
//	go run ./conformance/cmd/genvectors -rand 7 -first 1000 -per-machine 100 -out more
//
// Findings (a failing operation that changed stored state, a returned job
// that differs from the stored one, an invariant of the specification's §5
// broken) are printed to standard error with a reproduction; the first two
// kinds end their scenario before the step, so that the corpus replays.
// The exit status is 1 when there are findings and -strict is set.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/conformance"
	"github.com/jobstate/jobstate/memstore"
)

// Defaults of the committed corpus.
const (
	defaultRand       = 1
	defaultPerMachine = 56
	defaultMinSteps   = 8
	defaultMaxSteps   = 40
	defaultOut        = "conformance/generated"
	// defaultInvalid is how many invalid definitions the corpus holds.
	defaultInvalid = 400
)

func main() {
	var (
		randValue  = flag.Uint64("rand", defaultRand, "the seed value of the random draws")
		perMachine = flag.Int("per-machine", defaultPerMachine, "scenarios per machine")
		first      = flag.Int("first", 0, "number of the first scenario of each machine")
		minSteps   = flag.Int("min-steps", defaultMinSteps, "fewest steps in a scenario")
		maxSteps   = flag.Int("max-steps", defaultMaxSteps, "most steps in a scenario")
		invalid    = flag.Int("invalid", defaultInvalid, "invalid definitions to draw (0: none)")
		out        = flag.String("out", defaultOut, "directory to write; its .json.gz files are replaced")
		only       = flag.String("machines", "", "comma-separated labels of the machines to draw for (default: all)")
		strict     = flag.Bool("strict", false, "exit with status 1 when there are findings")
		list       = flag.Bool("list", false, "list the machines and their labels, and exit")
	)
	flag.Parse()
	if err := run(*randValue, *perMachine, *first, *minSteps, *maxSteps, *invalid, *out, *only, *strict, *list); err != nil {
		fmt.Fprintln(os.Stderr, "genvectors:", err)
		os.Exit(1)
	}
}

func run(randValue uint64, perMachine, first, minSteps, maxSteps, invalid int, out, only string, strict, list bool) error {
	machines, err := conformance.GenMachines()
	if err != nil {
		return err
	}
	all := machines // the invalid definitions break any of them
	if list {
		for _, m := range machines {
			fmt.Printf("%-12s %s\n", m.Label, m.From)
		}
		return nil
	}
	if only != "" {
		want := make(map[string]bool)
		for _, l := range strings.Split(only, ",") {
			want[strings.TrimSpace(l)] = true
		}
		var keep []conformance.GenMachine
		for _, m := range machines {
			if want[m.Label] {
				keep = append(keep, m)
				delete(want, m.Label)
			}
		}
		if len(want) > 0 {
			return fmt.Errorf("no machine labelled %v (see -list)", keys(want))
		}
		machines = keep
	}
	if perMachine <= 0 || first < 0 || minSteps <= 0 || maxSteps < minSteps || invalid < 0 {
		return fmt.Errorf("bad options: -per-machine %d -first %d -min-steps %d -max-steps %d -invalid %d", perMachine, first, minSteps, maxSteps, invalid)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(out, "*.json.gz"))
	if err != nil {
		return err
	}
	opts := conformance.GenOptions{Rand: randValue, PerMachine: perMachine, First: first, MinSteps: minSteps, MaxSteps: maxSteps}
	man := conformance.Manifest{
		Command:    command(randValue, perMachine, first, minSteps, maxSteps, invalid, out, only),
		Rand:       randValue,
		PerMachine: perMachine,
		MinSteps:   minSteps,
		MaxSteps:   maxSteps,
	}
	began := time.Now()
	var findings []conformance.Finding
	written := make(map[string]bool)
	var bytesOut int
	write := func(label, machine, from string, vs []conformance.Vector) error {
		data, err := conformance.EncodeGenerated(vs)
		if err != nil {
			return err
		}
		gz, err := conformance.Gzip(data)
		if err != nil {
			return err
		}
		name := label + ".json.gz"
		if err := os.WriteFile(filepath.Join(out, name), gz, 0o644); err != nil {
			return err
		}
		written[name] = true
		bytesOut += len(gz)
		steps := 0
		for _, v := range vs {
			steps += len(v.Steps)
		}
		man.Files = append(man.Files, conformance.ManifestFile{
			File: name, Machine: machine, From: from, Scenarios: len(vs), Steps: steps,
			SHA256: conformance.Fingerprint(data),
		})
		man.Scenarios += len(vs)
		man.Steps += steps
		return nil
	}
	for _, m := range machines {
		vs, fs, err := conformance.Generate(m, opts, func() jobstate.Store { return memstore.New() })
		if err != nil {
			return err
		}
		findings = append(findings, fs...)
		var def struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Definition, &def)
		if err := write(m.Label, def.Name, m.From, vs); err != nil {
			return err
		}
	}
	if invalid > 0 && only == "" {
		vs, err := conformance.GenerateInvalid(all, opts, first, invalid)
		if err != nil {
			return err
		}
		if err := write(conformance.InvalidLabel, "", "", vs); err != nil {
			return err
		}
	}
	for _, p := range old {
		if !written[filepath.Base(p)] {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	sort.Slice(man.Files, func(i, j int) bool { return man.Files[i].File < man.Files[j].File })
	mj, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), append(mj, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "genvectors: %d machines, %d scenarios, %d steps, %d bytes compressed, in %s\n",
		len(machines), man.Scenarios, man.Steps, bytesOut, time.Since(began).Round(time.Millisecond))
	report(findings)
	if strict && len(findings) > 0 {
		os.Exit(1)
	}
	return nil
}

// command writes the command line that gives these files.
func command(randValue uint64, perMachine, first, minSteps, maxSteps, invalid int, out, only string) string {
	parts := []string{"go run ./conformance/cmd/genvectors"}
	if randValue != defaultRand {
		parts = append(parts, fmt.Sprintf("-rand %d", randValue))
	}
	if perMachine != defaultPerMachine {
		parts = append(parts, fmt.Sprintf("-per-machine %d", perMachine))
	}
	if first != 0 {
		parts = append(parts, fmt.Sprintf("-first %d", first))
	}
	if minSteps != defaultMinSteps {
		parts = append(parts, fmt.Sprintf("-min-steps %d", minSteps))
	}
	if maxSteps != defaultMaxSteps {
		parts = append(parts, fmt.Sprintf("-max-steps %d", maxSteps))
	}
	if invalid != defaultInvalid {
		parts = append(parts, fmt.Sprintf("-invalid %d", invalid))
	}
	if only != "" {
		parts = append(parts, "-machines "+only)
	}
	if filepath.ToSlash(filepath.Clean(out)) != defaultOut {
		parts = append(parts, "-out "+out)
	}
	return strings.Join(parts, " ")
}

// report prints the findings, grouped by problem, each group with the
// shortest reproduction.
func report(fs []conformance.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(os.Stderr, "genvectors: no findings")
		return
	}
	groups := make(map[string][]conformance.Finding)
	var order []string
	for _, f := range fs {
		k := firstLine(f.Problem)
		if strings.HasPrefix(k, "job ") {
			if _, rest, ok := strings.Cut(k, ": "); ok {
				k = rest // group the jobs' findings by problem
			}
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	fmt.Fprintf(os.Stderr, "genvectors: %d findings, %d kinds\n", len(fs), len(order))
	for _, k := range order {
		g := groups[k]
		best := g[0]
		for _, f := range g {
			if len(f.Steps) < len(best.Steps) {
				best = f
			}
		}
		fmt.Fprintf(os.Stderr, "\n== %d× %s\n   shortest: %s step %d: %s\n", len(g), k, best.Scenario, best.Step, best.Problem)
		for i, s := range best.Steps {
			b, _ := json.Marshal(s)
			fmt.Fprintf(os.Stderr, "   %2d %s\n", i+1, b)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
