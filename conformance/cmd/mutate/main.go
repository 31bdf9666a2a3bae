// Command mutate measures how strongly the conformance vectors pin the Go
// engine: it plants plausible single bugs (mutants) in the root package,
// one at a time, replays the vectors against each, and counts the mutants
// that no vector kills (docs/conformance.md §7).
//
// From the repository's top:
//
//	go run ./conformance/cmd/mutate                 # hand-written vectors
//	go run ./conformance/cmd/mutate -generated      # then the corpus, on the survivors
//	go run ./conformance/cmd/mutate -list           # the mutants, without running them
//
// The mutation operators are: negate an if condition; move a comparison's
// boundary (< and <=, > and >=); negate == and !=; drop one side of && and
// ||; delete a statement (a call, an assignment other than a declaration,
// an increment, a break or continue). Each appends one problem fewer to a
// definition's list when it deletes a validation call, so "drop a
// validation problem" is one of them.
//
// The run compiles the conformance tests once: every mutant is planted in
// a copy of the root package's files, behind a switch that reads the
// variable JOBSTATE_MUTANT, and the copy replaces the files through go's
// -overlay flag, so the working tree is never touched. Then the test
// binary runs once per mutant, on two processes by default; a mutant is
// killed when the run fails or times out. A mutant listed in equivalent
// (with why no behaviour of the specification can tell it from the
// engine) is reported apart. The exit status is 1 when an unexplained
// mutant survives.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// files are the root package's files that hold the specified rules. The
// others hold no rule a vector can observe: Mermaid diagrams
// (mermaid.go), the Job's JSON form (jobjson.go), the definition's JSON
// reader (json.go, whose problems are pinned by the def_ vectors but
// whose error paths are mostly Go reflection), CreateMany (createmany.go,
// §4.2.1: no vector), the store-side checks (storecheck.go), clocks,
// capabilities, error texts and the interfaces.
var files = []string{
	"commit.go", "create.go", "definition.go", "effects.go", "engine.go",
	"execution.go", "failure.go", "idempotency.go", "job.go", "lease.go",
	"lifecycle.go", "limits.go", "list.go", "policy.go", "retry.go",
	"sweep.go", "text.go", "transitions.go", "validate.go",
}

// skipFuncs are functions of those files that no vector can reach, with
// the reason; their mutants are not planted.
var skipFuncs = map[string]string{
	"New": "engine construction: options are Go values, not vector input", "WithMachines": "option", "WithClock": "option",
	"WithObserver": "option", "WithIDs": "option", "WithRandom": "option",
	"ready":   "an engine not made by New: Go only",
	"Machine": "accessor", "Store": "accessor", "Now": "accessor",
	"notify": "observers (§4.24): no step observes them",
	"Prune":  "no vector op", "Counts": "no vector op", "Stuck": "no vector op", "ClaimMany": "no vector op",
	"Replay":          "§2.6: pure function of a history, checked by Go tests",
	"CheckProjection": "the §5 invariant checker, not the engine",
	"Error":           "error texts: vectors compare codes", "KeyAt": "no vector op",
	"String": "kind names", "MarshalText": "JSON form", "UnmarshalText": "JSON form",
	"Retries": "Go helper", "FixedBackoff": "Go helper", "ExponentialBackoff": "Go helper", "WithJitter": "Go helper",
	"States": "accessor copy", "Rules": "accessor copy", "Effects": "accessor copy", "Events": "accessor",
	"Initial": "accessor", "Name": "accessor", "Policy": "accessor", "Create": "accessor", "State": "accessor",
	"FiringOf": "Go context helper", "WakeAt": "exported helper of wakeAt",
	"History": "plain read", "Executions": "plain read", "Due": "Go helper, unused by the engine",
	"ContextWithSavepointer": "store capability",
}

// equivalent explains the surviving mutants that no vector can kill
// because no behaviour the specification states for a vector tells them
// from the engine. Each pattern is matched against a mutant's stable name
// (see mutant.key), a space, a vertical bar, a space and the mutated
// source line, so that a pattern can name the line rather than the
// mutant's ordinal; the reason says why.
var equivalent = []struct {
	pattern, reason string
	// outside marks a mutant whose difference shows only outside the
	// vector format (to a Go caller, with another store or engine, under
	// store faults): it is not equivalent, but no vector can kill it.
	outside bool
}{
	{`^(commit\.go:Engine\.(Commit|Succeed)#\d+ .* \| in\.Result = clone\(in\.Result\)$|definition\.go:NewDefinition#\d+ delete assignment \| .*= append\(\[\]State\(nil\), )`,
		"a defensive copy of memory the caller handed in (a Go caller that changes it afterwards would see the difference); every value a vector sees has crossed the store", true},
	{`^(effects\.go:plan\.keep#\d+ .* \| w\.\w+ = slices\.Clone|sweep\.go:chain\.add#\d+ delete (call|assignment) \| (copy\(execs, c\.cur\.Executions\)|kept\.\w+ = slices\.Clone))`,
		"a copy inside one write: a chain's later steps only append records and effects to the write, never change an execution an earlier step wrote, and replace the chain's executions rather than change them, so the point kept is the same shared or not", false},
	{`^retry\.go:Backoff\.Delay#22 `,
		"a draw of exactly 0 is set to 0 whether the test is >= or >", false},
	{`^retry\.go:Backoff\.Delay#(1|3|4|19) |^retry\.go:clampDelay#`,
		"no change of value: the engine never asks for a retry number below 1, and a delay already capped at a Max of at most MaxDuration is the same whether the boundary is < or <= (the boundary value maps to itself)", false},
	{`^retry\.go:Backoff\.Delay#(10|12) `,
		"the product is never NaN (Initial > 0 and a factor of at least 1, both finite, whenever the kind is exponential) and an infinite product is at least 2^63 anyway", false},
	{`^retry\.go:Backoff\.validate#(6|8) `,
		"a factor that is NaN or infinite: JSON numbers are finite, so no definition or vector can give one", true},
	{`^lease\.go:Engine\.claim#\d+ delete assignment \| next\.CancelRequested = false`,
		"clears CancelRequested, which only a cancel sets, and a cancel always leaves the job terminal, where no claim follows", false},
	{`^sweep\.go:Engine\.sweepWrite#\d+ && keeps its (left|right) side \| if c\.w\.Job\.Version == cur\.Job\.Version && !c\.w\.Job\.WakeAt`,
		"the stale-WakeAt refresh's two tests (§4.17 step 3.5): a write that took a step has the WakeAt its settling gave it, never a stale one, and a due job whose stored WakeAt is right always has a step to take, so either test alone decides the same", false},
	{`^engine\.go:Definition\.wakeAt#\d+ \S+ keeps its right side \| if !t\.IsZero\(\) && job\.SweepRetryAt\.After\(t\)`,
		"a job gets a SweepRetryAt only when pushed back after a failed sweep write, and it was due then, so its wake time without the push-back is never the zero time; every other write clears the field", false},
	{`^(idempotency\.go:Key#|execution\.go:ExecStatus\.Final#|definition\.go:containsEvent#|job\.go:Kind\.Valid#2 )`,
		"code no vector reaches: Key is a client helper (vectors give keys literally), Final and Events serve Go callers, and a kind above terminal cannot be written in JSON", true},
	{`^definition\.go:Definition\.stateIndex#(1|2) `,
		"chooses between a linear scan and a map lookup, which give the same index", false},
	{`^definition\.go:NewDefinition#\d+ != to == \| d\.ruleEffects = `,
		"a flag that only decides whether Succeed prepares the commit-alone write to fall back on (§4.13), which a write with no rule effect never uses: setting it too often costs time, not behaviour", false},
	{`^definition\.go:Definition\.Can#\d+ && keeps its right side`,
		"Can is asked only about a job's own state, which its machine declares, so the index is never -1", false},
	{`^lifecycle\.go:validateLifecycle#\d+ \|\| keeps its (left|right) side \| if r\.Event == EventSucceed && \(r\.Guard != nil \|\| r\.GuardName != ""\)`,
		"a definition read from JSON sets a rule's Guard and GuardName together (a guard is given by name), so either test alone decides the same; they differ only for a Spec built in Go", true},
	{`^lifecycle\.go:validateLifecycle#\d+ && keeps its (left|right) side \| if to, ok := kinds\[r\.To\]; ok && to\.Kind == KindWaiting`,
		"the set of fail targets is only read for waiting states: a target that is undeclared (whose zero kind is no kind) or not waiting is never looked up", false},
	{`^policy\.go:validatePolicy#\d+ delete call \| p\.add\("effect %q has no Run function"`,
		"a JSON effect's run names a registry function resolved before validation (an unknown name is a problem of the JSON, §5.4), so Run is never nil; only a Spec built in Go can leave it nil", true},
	{`^validate\.go:validateRules#\d+ delete continue \| continue$`,
		"skips a group of one rule, which the loop after it would pass over without a problem anyway", false},
	{`^limits\.go:after#\d+ && keeps its left side`,
		"every duration the engine adds to an instant is at least 0 (refused or clamped before), so the sum is never before the instant", false},
	{`^list\.go:Engine\.List#\d+ delete assignment \| q\.After = ListCursor\{\}`,
		"clears ListQuery.After, a field a Go caller may set and the store reads; the vector format has no such field", true},
	{`^list\.go:ListQuery\.validate#(1|2) `,
		"the store's List refuses the same limits itself (docs/store.md: a limit of 1 to MaxListLimit + 1), so the code stays invalid_argument", true},
	{`^list\.go:ListQuery\.validate#3 `,
		"a limit of 0 was replaced by 50 before the check, so < 0 and <= 0 refuse the same limits", false},
	{`^list\.go:ListQuery\.validate#\d+ && keeps its right side \| if !r\.from\.IsZero\(\) && !r\.to\.IsZero\(\) && !r\.to\.After\(r\.from\)`,
		"a bound that is set is at least MinTime, which is after the zero time, so dropping the test that the start is set changes nothing", false},
	{`^list\.go:decodeCursor#(5|6|13|15|16) `,
		"the layout inside a cursor (its version byte, nanoseconds, time range) is each implementation's own (§4.25: opaque); a vector can only give a text List never made, which fails the length or the digest first", true},
	{`^list\.go:Engine\.checkListStates#\d+ delete break`,
		"stops a search whose answer is already known; going on changes nothing", false},
	{`^lease\.go:Engine\.Claim#\d+ && keeps its (left|right) side \| if errors\.Is\(err, ErrNoJob\) && got\.failed != nil`,
		"the test that the claim's error is ErrNoJob matters only for another error (a store's or the context's) after a passed-over job, and the test that a job was passed over only for the text of a no_job error with none", true},
	{`^failure\.go:Engine\.Snooze#\d+ && keeps its left side`,
		"differs only in an active state with neither a retry nor an abandon rule, where the refusal names the other event; its code, invalid_transition, is the same", true},
	{`^text\.go:CleanErrorText#\d+ <= to < \| if len\(s\) <= MaxErrorBytes && textProblem\(s\) == ""`,
		"a valid text of exactly MaxErrorBytes bytes taken through the cleaning loop comes out unchanged", false},
	{`^engine\.go:Engine\.expireOnRead#3 `,
		"expire checks the deadline again under the job's lock and writes nothing when it has not passed, so the job returned is the same", false},
	{`^engine\.go:Engine\.expireOnRead#4 `,
		"a job of a machine the engine does not know; every job a vector's store holds is of the vector's one machine", true},
	{`^engine\.go:Definition\.wakeAt#\d+ (&& keeps its right side \| if !c\.IsZero\(\)|> to >= \| if job\.Leases > 0)`,
		"earliest is never given the zero time (UpdatedAt is always set, NotBefore is tested first, a deadline that can act is set, and a job without live leases has no lease end, which earliest ignores)", false},
	{`^engine\.go:Definition\.expires#\d+ && keeps its left side`,
		"a terminal state has no expire rule (nothing leaves a terminal state), so Can decides for it", false},
	{`^engine\.go:Engine\.move#\d+ (&& keeps its left side|> to >=) \| if exec == uuid\.Nil && cur\.Job\.Kind == KindActive`,
		"an active job always holds a live execution (Leases > 0), and only claim, which Fire cannot fire, enters an active state from another kind (§2.3 rule 12)", false},
	{`^sweep\.go:Engine\.loseLeases#\d+ && keeps its left side \| if before == KindActive && err == nil`,
		"a step whose building fails fails the whole write, whose counts are dropped (§4.17 step 6)", false},
	{`^sweep\.go:Engine\.Sweep#\d+ (delete assignment \| (q\.AfterWake, q\.AfterID = |seen\[d\.ID\] = true)|delete continue)`,
		"a job met once is not met again in the same pass: after its write it has no due work left (the chain takes every due step) or, when the write failed, it is pushed back past now; so neither the page cursor nor the set of jobs seen changes what is swept (they bound the work of a pass when writes fail in the store)", true},
	{`^sweep\.go:Engine\.(Sweep|RecoverWorker)#\d+ && keeps its left side \| if (err := e\.sweepJob\(ctx, d\.ID, now, &rep\); )?err != nil && !errors\.Is\(err, ErrNotFound\)`,
		"a job deleted between the listing and its write; no vector step runs between them", true},
	{`^sweep\.go:Engine\.(sweepJob|RecoverWorker)#\d+ delete assignment \| r, marks = SweepReport\{\}, nil`,
		"resets the counts when the store runs the update's function again, which the vectors' store (memstore) never does", true},
	{`^sweep\.go:Engine\.sweepWrite#\d+ delete call \| c\.mark\(r\)`,
		"the mark after the expire step, a chain's last: cut back at the expire's own effect the mark is not kept, and kept the write is whole, so its counts are all of the report", false},
	{`^sweep\.go:Engine\.RecoverWorker#\d+ delete continue \| continue // another engine's machine`,
		"a vector's engine runs its one machine, and its store holds only that machine's jobs", true},
	{`^sweep\.go:Engine\.RecoverWorker#\d+ (&& keeps its left side \| if err != nil && !errors\.Is\(err, ErrIncomplete\)|delete continue \| continue$)`,
		"a recovery's write is never cut back: on a single-execution machine it has one step, and on a concurrent one its only step with a rule (and so with effects) is the committed execution's finish, which ends the chain; and a failed write's counts are dropped anyway", false},
	{`^sweep\.go:chain\.add#\d+ (delete assignment \| (c\.w\.Effects = append|\*p = x|execs = append\(execs, x\))|!= to == \| if p := findExec\(c\.w\.Executions)`,
		"a sweep or recovery step records no once-only effect, creates no execution, and never writes an execution an earlier step of its chain wrote", false},
}

// explain returns the reason a mutant is equivalent, or "", and whether
// its difference shows only outside the vector format.
func explain(m mutant) (string, bool) {
	for _, e := range equivalent {
		if regexp.MustCompile(e.pattern).MatchString(m.key() + " | " + m.src) {
			return e.reason, e.outside
		}
	}
	return "", false
}

type mutant struct {
	id   int
	file string
	fn   string
	n    int // ordinal of the mutant within its function
	line int
	desc string
	src  string // the source line, trimmed
}

// key names a mutant stably across edits elsewhere in its file.
func (m mutant) key() string { return fmt.Sprintf("%s:%s#%d %s", m.file, m.fn, m.n, m.desc) }

// edit replaces the source range [start, end) by wrap applied to the
// range's text with the nested edits made.
type edit struct {
	start, end int
	wrap       func(inner string) string
}

func main() {
	var (
		root      = flag.String("root", ".", "the repository's top (the root package's directory)")
		generated = flag.Bool("generated", false, "replay the generated corpus too, on the hand-written vectors' survivors")
		parallel  = flag.Int("parallel", 2, "mutants run at once")
		timeout   = flag.Duration("timeout", 20*time.Second, "longest run of one mutant; a longer one is killed")
		only      = flag.String("only", "", "regexp: run only the mutants whose key matches")
		list      = flag.Bool("list", false, "list the mutants and exit")
		keep      = flag.Bool("keep", false, "keep the temporary directory")
	)
	flag.Parse()
	if err := run(*root, *generated, *parallel, *timeout, *only, *list, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
}

func run(root string, generated bool, parallel int, timeout time.Duration, only string, list, keep bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	var filter *regexp.Regexp
	if only != "" {
		if filter, err = regexp.Compile(only); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "jobstate-mutate-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	overlay := map[string]string{}
	var all []mutant
	for _, name := range files {
		path := filepath.Join(root, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, ms, err := instrument(name, src, len(all)+1)
		if err != nil {
			return err
		}
		all = append(all, ms...)
		dst := filepath.Join(tmp, name)
		if err := os.WriteFile(dst, out, 0o644); err != nil {
			return err
		}
		overlay[path] = dst
	}
	sw := filepath.Join(tmp, "zz_mutant_switch.go")
	if err := os.WriteFile(sw, []byte(switchFile), 0o644); err != nil {
		return err
	}
	overlay[filepath.Join(root, "zz_mutant_switch.go")] = sw
	if list {
		for _, m := range all {
			fmt.Printf("%4d %s:%d %s\n     %s\n", m.id, m.file, m.line, m.key(), m.src)
		}
		return nil
	}
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		return err
	}
	bin := filepath.Join(tmp, "conformance.test")
	build := exec.Command("go", "test", "-c", "-overlay", ovPath, "-o", bin, "./conformance")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the instrumented tests: %v\n%s", err, out)
	}
	dir := filepath.Join(root, "conformance")
	vectors := "^TestVectorsOnMemstore$"
	if ok, out := runMutant(bin, dir, vectors, 0, timeout); !ok {
		return fmt.Errorf("the vectors fail on the engine itself (no mutant):\n%s", out)
	}
	var todo []mutant
	for _, m := range all {
		if filter == nil || filter.MatchString(m.key()) {
			todo = append(todo, m)
		}
	}
	start := time.Now()
	survivors, kills := runAll(bin, dir, vectors, todo, parallel, timeout)
	fmt.Printf("hand-written vectors: %d mutants, %d killed, %d survived (%.1f%% killed) in %s\n",
		len(todo), len(todo)-len(survivors), len(survivors), pct(len(todo)-len(survivors), len(todo)), time.Since(start).Round(time.Second))
	byVector := map[string]int{}
	for _, v := range kills {
		byVector[v]++
	}
	if generated && len(survivors) > 0 {
		left, _ := runAll(bin, dir, "^(TestVectorsOnMemstore|TestGeneratedOnMemstore)$", survivors, parallel, 4*timeout)
		fmt.Printf("with the generated corpus: %d of the %d survivors killed, %d survived\n", len(survivors)-len(left), len(survivors), len(left))
		survivors = left
	}
	var explained, open []mutant
	outside := 0
	for _, m := range survivors {
		if why, out := explain(m); why != "" {
			explained = append(explained, m)
			if out {
				outside++
			}
		} else {
			open = append(open, m)
		}
	}
	killed := len(todo) - len(survivors)
	fmt.Printf("survivors: %d explained (%d equivalent, %d outside the vector format), %d unexplained\n",
		len(explained), len(explained)-outside, outside, len(open))
	fmt.Printf("plausible mutants killed: %.1f%% (%d of %d; the explained left out); counting those outside the format as survivors: %.1f%% (%d of %d)\n",
		pct(killed, len(todo)-len(explained)), killed, len(todo)-len(explained),
		pct(killed, len(todo)-len(explained)+outside), killed, len(todo)-len(explained)+outside)
	for _, m := range explained {
		why, out := explain(m)
		label := "equivalent"
		if out {
			label = "outside   "
		}
		fmt.Printf("  %s %s:%d %s\n      %s\n      %s\n", label, m.file, m.line, m.key(), m.src, why)
	}
	for _, m := range open {
		fmt.Printf("  SURVIVED   %s:%d %s\n      %s\n", m.file, m.line, m.key(), m.src)
	}
	if len(open) > 0 {
		os.Exit(1)
	}
	return nil
}

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

// runAll runs every mutant and returns the survivors, in id order, and for
// each killed mutant the first vector that failed.
func runAll(bin, dir, tests string, ms []mutant, parallel int, timeout time.Duration) ([]mutant, map[int]string) {
	var (
		mu        sync.Mutex
		survivors []mutant
		kills     = map[int]string{}
		wg        sync.WaitGroup
		next      = make(chan mutant)
	)
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range next {
				ok, out := runMutant(bin, dir, tests, m.id, timeout)
				mu.Lock()
				if ok {
					survivors = append(survivors, m)
				} else {
					kills[m.id] = firstFailure(out)
				}
				mu.Unlock()
			}
		}()
	}
	for _, m := range ms {
		next <- m
	}
	close(next)
	wg.Wait()
	sort.Slice(survivors, func(i, j int) bool { return survivors[i].id < survivors[j].id })
	return survivors, kills
}

var failLine = regexp.MustCompile(`--- FAIL: \S+/(\S+)`)

func firstFailure(out string) string {
	if m := failLine.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return "(no vector named: a panic, a timeout or a build of the test)"
}

// runMutant runs the tests with mutant id switched on (0: none) and
// reports whether they passed.
func runMutant(bin, dir, tests string, id int, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", tests, "-test.failfast", "-test.count=1", "-test.timeout", timeout.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOBSTATE_MUTANT=%d", id))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return err == nil, out.String()
}

// switchFile is added to the root package: the mutant the run switches on.
const switchFile = `package jobstate

import (
	"os"
	"strconv"
)

var zzMutant = func() int {
	n, _ := strconv.Atoi(os.Getenv("JOBSTATE_MUTANT"))
	return n
}()

func zzOn(k int) bool { return zzMutant == k }
`

// instrument plants the mutants of one file, numbered from first, and
// returns the file's new text with them.
func instrument(name string, src []byte, first int) ([]byte, []mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	var (
		edits []edit
		ms    []mutant
	)
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
	lineText := func(p token.Pos) string {
		pos := fset.Position(p)
		lines := strings.Split(string(src), "\n")
		return strings.TrimSpace(lines[pos.Line-1])
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if _, skip := skipFuncs[fd.Name.Name]; skip {
			continue
		}
		fn := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			fn = recvName(fd.Recv.List[0].Type) + "." + fn
		}
		n := 0
		add := func(node ast.Node, desc string, wrap func(k int, inner string) string) {
			n++
			k := first + len(ms)
			ms = append(ms, mutant{id: k, file: name, fn: fn, n: n, line: fset.Position(node.Pos()).Line, desc: desc, src: lineText(node.Pos())})
			edits = append(edits, edit{start: off(node.Pos()), end: off(node.End()), wrap: func(inner string) string { return wrap(k, inner) }})
		}
		// alt wraps a boolean expression: alternative text when the mutant
		// is on, the original (with nested mutants) otherwise. The
		// alternative is never evaluated when the mutant is off.
		alt := func(node ast.Node, desc, alternative string) {
			add(node, desc, func(k int, inner string) string {
				return fmt.Sprintf("((zzOn(%d) && (%s)) || (!zzOn(%d) && (%s)))", k, alternative, k, inner)
			})
		}
		ast.Inspect(fd.Body, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.FuncLit:
				return true
			case *ast.IfStmt:
				if b, ok := x.Cond.(*ast.BinaryExpr); ok && (b.Op == token.EQL || b.Op == token.NEQ) {
					break // negated as a comparison below
				}
				alt(x.Cond, "negate if condition", "!("+text(x.Cond)+")")
			case *ast.BinaryExpr:
				l, r := text(x.X), text(x.Y)
				switch x.Op {
				case token.LSS:
					alt(x, "< to <=", "("+l+") <= ("+r+")")
				case token.LEQ:
					alt(x, "<= to <", "("+l+") < ("+r+")")
				case token.GTR:
					alt(x, "> to >=", "("+l+") >= ("+r+")")
				case token.GEQ:
					alt(x, ">= to >", "("+l+") > ("+r+")")
				case token.EQL:
					alt(x, "== to !=", "("+l+") != ("+r+")")
				case token.NEQ:
					alt(x, "!= to ==", "("+l+") == ("+r+")")
				case token.LAND:
					alt(x, "&& keeps its right side", r)
					alt(x, "&& keeps its left side", l)
				case token.LOR:
					alt(x, "|| keeps its right side", r)
					alt(x, "|| keeps its left side", l)
				}
			case *ast.BlockStmt:
				stmts(x.List, add)
			case *ast.CaseClause:
				stmts(x.Body, add)
			}
			return true
		})
	}
	return apply(src, edits), ms, nil
}

// stmts plants a deletion of each statement of list that can be deleted
// without breaking the build.
func stmts(list []ast.Stmt, add func(ast.Node, string, func(int, string) string)) {
	del := func(s ast.Stmt, desc string) {
		add(s, desc, func(k int, inner string) string {
			return fmt.Sprintf("if !zzOn(%d) {\n%s\n}", k, inner)
		})
	}
	for _, s := range list {
		switch x := s.(type) {
		case *ast.ExprStmt:
			if c, ok := x.X.(*ast.CallExpr); ok && isPanic(c) {
				continue
			}
			del(s, "delete call")
		case *ast.AssignStmt:
			if x.Tok != token.DEFINE {
				del(s, "delete assignment")
			}
		case *ast.IncDecStmt:
			del(s, "delete "+x.Tok.String())
		case *ast.BranchStmt:
			if x.Tok == token.BREAK || x.Tok == token.CONTINUE {
				if x.Label == nil {
					del(s, "delete "+x.Tok.String())
				}
			}
		}
	}
}

func isPanic(c *ast.CallExpr) bool {
	id, ok := c.Fun.(*ast.Ident)
	return ok && id.Name == "panic"
}

func recvName(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvName(x.X)
	}
	return "?"
}

// apply makes the edits, which are nested or disjoint, innermost first.
func apply(src []byte, edits []edit) []byte {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].start != edits[j].start {
			return edits[i].start < edits[j].start
		}
		return edits[i].end > edits[j].end // outer first
	})
	var render func(start, end int, es []edit) string
	render = func(start, end int, es []edit) string {
		var b strings.Builder
		pos := start
		for i := 0; i < len(es); {
			e := es[i]
			// the edits nested in e follow it
			j := i + 1
			for j < len(es) && es[j].start < e.end {
				j++
			}
			b.Write(src[pos:e.start])
			b.WriteString(e.wrap(render(e.start, e.end, es[i+1:j])))
			pos = e.end
			i = j
		}
		b.Write(src[pos:end])
		return b.String()
	}
	return []byte(render(0, len(src), edits))
}
